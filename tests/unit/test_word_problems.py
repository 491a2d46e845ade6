"""The real-model task's held-out split: other wordings, names and operand pairs than training."""

from __future__ import annotations

import random
import re

from rlvr.tasks.word_problems import HELDOUT_TEMPLATES, TRAIN_TEMPLATES, WordProblemsTask, lenient_correct

OP = {t: op for op, t in HELDOUT_TEMPLATES + TRAIN_TEMPLATES}


def _operands(p):
    """(a, b, op) as the template uses them (one names b first)."""
    template = p.metadata["template"]
    x, y = (int(v) for v in re.findall(r"\d+", p.prompt[0]["content"])[:2])
    a, b = (y, x) if template.index("{b}") < template.index("{a}") else (x, y)
    return a, b, OP[template]


def test_heldout_shares_no_wording_and_no_operand_pair_with_training():
    task = WordProblemsTask()
    heldout = task.heldout(200)
    train = task.sample(random.Random(0), 2000)
    held_templates = {t for _, t in HELDOUT_TEMPLATES}
    assert {p.metadata["template"] for p in heldout} == held_templates
    assert not {p.metadata["template"] for p in train} & held_templates
    assert not {_operands(p) for p in heldout} & {_operands(p) for p in train}
    for p in heldout + train[:50]:
        a, b, op = _operands(p)
        assert int(p.reference) == (a + b if op == "+" else a - b) >= 0


def test_lenient_check_reads_the_last_number_in_any_format():
    assert lenient_correct("27 + 82 = 109", "109")
    assert lenient_correct("The total is 1,109 apples.", "1109")
    assert not lenient_correct("109, no wait, 110", "109")
    assert not lenient_correct("no number here", "109")
