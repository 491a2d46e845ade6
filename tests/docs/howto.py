"""The shell blocks of the how-to pages marked runnable, and how to run them (shared by the tests).

A block is marked by an HTML comment on the line before its fence, which the site does not show:

    <!-- runnable -->            the block must exit 0
    <!-- runnable: exit 2 -->    the block must exit 2 (a refusal the page shows on purpose)

The blocks of one page run in order, in one fresh directory, under `bash -e -o pipefail`, with the
interpreter's bin folder first on PATH (its `rlvr`, `torchrun` and `python`) and this checkout's
`src` on PYTHONPATH, offline (HF_HUB_OFFLINE=1)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HOWTO = ROOT / "docs" / "how-to"
MARK = re.compile(r"^<!-- runnable(?::\s*exit (\d+))?\s*-->\s*$")
RUNS = re.compile(r"(?m)^\s*(?:[A-Z_]+=\S+\s+)*(rlvr|torchrun|python)\b")


@dataclass(frozen=True)
class Block:
    page: str
    line: int          # 1-based line of the fence
    code: str
    exit: int

    @property
    def runs_a_command(self) -> bool:
        """True when the block calls rlvr, torchrun or python (not only writes files)."""
        return bool(RUNS.search(self.code))


def blocks(path: Path) -> list[Block]:
    """The marked blocks of one page, in order; a mark not followed by a ```bash fence is an error."""
    lines = path.read_text().splitlines()
    out = []
    for i, line in enumerate(lines):
        m = MARK.match(line)
        if not m:
            continue
        j = i + 1
        if j >= len(lines) or lines[j].strip() not in ("```bash", "```sh"):
            raise ValueError(f"{path.name}:{i + 1}: a runnable mark must be followed by a ```bash fence")
        end = next(k for k in range(j + 1, len(lines)) if lines[k].strip() == "```")
        out.append(Block(path.name, j + 1, "\n".join(lines[j + 1:end]) + "\n", int(m.group(1) or 0)))
    return out


def pages() -> list[Path]:
    return sorted(HOWTO.glob("*.md"))


def environ() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("MLFLOW_", "WANDB_", "TRACKIO_", "PYTEST_"))}
    env.update({"PATH": str(Path(sys.executable).parent) + os.pathsep + env.get("PATH", ""),
                "PYTHONPATH": str(ROOT / "src") + os.pathsep + env.get("PYTHONPATH", ""),
                "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
                "GLOO_SOCKET_IFNAME": "lo", "NO_COLOR": "1"})
    return env


def run(block: Block, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=cwd, env=environ(),
                          capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
