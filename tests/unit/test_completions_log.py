"""completions.parquet: one row per completion with its verifier terms, cut back exactly on resume."""

import json

import torch

from rlvr.monitor import completions
from rlvr.monitor.log import MetricsLog
from rlvr.types import Completion, Group, Problem, Score


def _groups():
    a = Completion("42", [5, 6], [-1.0, -1.0], "stop",
                   Score(1.5, True, (), "42", {"terms": {"math": 1.0, "format": 0.5}}))
    b = Completion("4", [5, 6, 7], [-1.0] * 3, "length", Score(0.0, False, ("no_answer",)))
    c = Completion("x", [9], [-1.0], "stop", None)
    return [Group(Problem("p1", "1+1=", verifier="math"), [1], [a, b], policy_version=3),
            Group(Problem("p2", [{"role": "user", "content": "hi"}], verifier="code"), [2], [c, b])]


def test_rows_hold_every_completion_with_its_rewards_flags_and_finish_reason():
    rows = completions.completion_rows(7, _groups(), torch.tensor([[0.5, -0.5], [0.0, 1.0]]))
    assert len(rows) == 4
    first, second, third = rows[0], rows[1], rows[2]
    assert first["step"] == 7 and first["policy_version"] == 3 and first["problem_id"] == "p1"
    assert json.loads(first["rewards"]) == {"math": 1.0, "format": 0.5} and first["correct"]
    assert second["flags"] == ["no_answer"] and second["finish_reason"] == "length"
    assert json.loads(second["rewards"]) == {"math": 0.0} and second["tokens"] == 3
    assert third["reward"] is None and json.loads(third["prompt"])[0]["content"] == "hi"
    assert [r["advantage"] for r in rows] == [0.5, -0.5, 0.0, 1.0]


def test_the_file_grows_by_whole_steps_and_is_cut_back_to_the_checkpoint(tmp_path):
    log = MetricsLog(tmp_path, tensorboard=False)
    adv = torch.zeros(2, 2)
    log.write_completions(0, _groups(), adv)
    saved = log.offsets()
    assert saved[completions.FILE] == 4
    log.write_completions(2, _groups(), adv)
    assert [r["step"] for r in completions.read(tmp_path / completions.FILE)] == [0] * 4 + [2] * 4
    log.truncate_to(saved)            # resume: rows after the checkpoint go
    assert [r["step"] for r in completions.read(tmp_path / completions.FILE)] == [0] * 4
    log.truncate_to({})               # a fresh start: the file goes
    assert not (tmp_path / completions.FILE).exists()


def test_the_report_shows_the_hardest_won_and_the_flagged_completions(tmp_path):
    from rlvr.report.html import hardest_won, write_report

    def comp(text, correct, flags=()):
        return Completion(text, [5], [-1.0], "stop", Score(float(correct), correct, flags))

    easy = Group(Problem("easy", "2+2="), [1],
                 [comp("EASY-WIN", True), comp("e2", True), comp("e3", True)])
    hard = Group(Problem("hard", "9+9="), [1], [comp("HARD-WIN", True),
                                                comp("HARD-FLAGGED", False, ("no_answer",)),
                                                comp("HARD-PLAIN", False)])
    (tmp_path / "metrics.jsonl").write_text(json.dumps({"step": 0, "reward/mean": 0.5}) + "\n")
    completions.append(tmp_path / completions.FILE,
                       completions.completion_rows(0, [easy, hard], torch.zeros(2, 3)))
    rows = completions.read(tmp_path / completions.FILE)
    assert [r["completion"] for r in hardest_won(rows, 2)] == ["HARD-WIN", "EASY-WIN"]
    page = write_report(tmp_path).read_text()
    section = page[page.index("Hardest-won"):]
    assert section.index("HARD-WIN") < section.index("EASY-WIN")
    assert "completions.parquet</a> row 3 " in section        # the hard win is row 3 of the file
    flagged = section[section.index("Flagged by a verifier"):]
    assert "HARD-FLAGGED" in flagged and "no_answer" in flagged and "HARD-PLAIN" not in flagged
