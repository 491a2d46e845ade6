"""Every shell block of the how-to pages marked runnable runs as the page shows it (tiny model, a few
steps), and the metric names those runs write are all in the metrics reference."""

from __future__ import annotations

import json
import sys

import pytest

from howto import ROOT, Block, blocks, pages, run

sys.path.insert(0, str(ROOT / "docs"))
from gen_reference import in_catalogue  # noqa: E402

MIN_COMMANDS = 15   # the floor: runnable blocks that call rlvr, torchrun or python


def test_the_howto_pages_mark_enough_runnable_commands():
    found = [b for p in pages() for b in blocks(p)]
    commands = [b for b in found if b.runs_a_command]
    assert len(commands) >= MIN_COMMANDS, [f"{b.page}:{b.line}" for b in commands]
    assert len({b.page for b in commands}) >= 10, "runnable commands should cover most how-to pages"


@pytest.mark.parametrize("page", [p for p in pages() if blocks(p)], ids=lambda p: p.name)
def test_runnable_blocks_run(page, tmp_path):
    for block in blocks(page):
        proc = run(block, tmp_path)
        assert proc.returncode == block.exit, (
            f"{page.name}:{block.line}: exit {proc.returncode}, expected {block.exit}\n{block.code}\n"
            f"--- stdout\n{proc.stdout[-3000:]}\n--- stderr\n{proc.stderr[-3000:]}")
    unknown = set()
    for metrics in tmp_path.glob("runs/*/metrics.jsonl"):
        for line in metrics.read_text().splitlines():
            record = json.loads(line)
            if "event" not in record:
                unknown |= {k for k in record if not in_catalogue(k)}
    assert not unknown, f"{page.name}: metrics missing from docs/reference/metrics.md: {sorted(unknown)}"


def test_a_failing_block_is_caught(tmp_path):
    ok = Block("x", 1, "rlvr --help >/dev/null\n", 0)
    broken = Block("x", 2, "ls no-such-file\n", 0)
    refused = Block("x", 3, "rlvr train no-such-preset\n", 2)
    assert run(ok, tmp_path).returncode == 0
    assert run(broken, tmp_path).returncode != broken.exit
    assert run(refused, tmp_path).returncode == refused.exit


def test_marks_without_a_bash_fence_are_refused(tmp_path):
    page = tmp_path / "page.txt"
    page.write_text("<!-- runnable -->\n```yaml\na: 1\n```\n")
    with pytest.raises(ValueError, match="must be followed"):
        blocks(page)
