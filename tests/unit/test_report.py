import base64
import io
import json
import math
import re
from html.parser import HTMLParser
from pathlib import Path

import matplotlib
import pytest
from PIL import Image

from rlvr.errors import UserError
from rlvr.report.html import write_report
from rlvr.report.rundata import read_jsonl, series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
XSS = "<script>alert('x')</script></pre><img src=http://evil.example/x.png>"


def _step(step: int) -> dict:
    reward = 0.2 + 0.02 * step
    return {
        "step": step, "time": 1.5 * step, "reward/mean": reward, "reward/std": 0.3,
        "accuracy": reward, "frac_reward_zero_std": 0.5 - 0.01 * step,
        "completions/mean_length": 20 + step, "completions/max_length": 48,
        "completions/clipped_ratio": 0.05, "entropy": 1.0 - 0.01 * step, "kl": 0.001 * step,
        "clip_ratio/low_mean": 0.01, "clip_ratio/high_mean": 0.02, "grad_norm": 0.5, "lr": 5e-5,
        "timing/generate": 1.0, "timing/verify": 0.1, "timing/update": 0.3, "timing/step": 1.5,
        "tokens_per_s": 900.0, "my/custom_metric": step % 3,
        "group_pass_rates": [0.0, 0.25, 0.5, 1.0, min(1.0, step / 30)],
    }


def make_run(root: Path, steps: int = 30) -> Path:
    run = root / "run"
    (run / "eval").mkdir(parents=True)
    lines = [_step(s) for s in range(1, steps + 1)]
    lines += [{"step": s, "eval/accuracy": 0.1 * s / 10, "eval/heldout_size": 50}
              for s in range(10, steps + 1, 10)]
    lines.append({"step": 12, "event": "alarm", "name": "entropy_collapse",
                  "message": "entropy < 0.1 <b>bold</b>", "action": "warn"})
    lines.append({"step": 20, "event": "alarm", "name": "kl_spike", "message": "kl > 1",
                  "action": "stop"})
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    transcripts = [{"step": s, "kind": kind, "problem_id": f"p{s}", "prompt": f"What is {s}+{s}?",
                    "completion": XSS if kind == "worst" else f"<answer>{2 * s}</answer>",
                    "reward": 1.0 if kind == "best" else 0.0, "advantage": 1.2,
                    "flags": ["no_answer"] if kind == "worst" else []}
                   for s in range(10, steps + 1, 10) for kind in ("best", "worst")]
    (run / "transcripts.jsonl").write_text("".join(json.dumps(t) + "\n" for t in transcripts))
    (run / "summary.json").write_text(json.dumps({"steps": steps, "final_accuracy": 0.3}))
    (run / "eval" / "eval.json").write_text(json.dumps(
        {"pass@1": 0.42, "maj@16": 0.55, "n": 16, "model": "tiny", "by_budget": {"64": 0.3}}))
    fig = matplotlib.figure.Figure(figsize=(2, 2))
    fig.add_subplot().plot([1, 2], [3, 4])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    (run / "eval" / "accuracy_vs_budget.png").write_bytes(buf.getvalue())
    return run


class _Collect(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def _tags(page: str) -> list[tuple[str, dict]]:
    parser = _Collect()
    parser.feed(page)
    return parser.tags


def _check_self_contained(page: str) -> list[bytes]:
    tags = _tags(page)
    assert not [t for t, _ in tags if t in ("script", "link", "iframe", "object", "embed")]
    for _, attrs in tags:
        for name in ("src", "href"):
            value = attrs.get(name) or ""
            assert not re.match(r"\s*(https?:)?//", value), value
    assert "url(" not in page  # no CSS fetches either
    pngs = []
    for tag, attrs in tags:
        if tag == "img":
            prefix = "data:image/png;base64,"
            assert attrs["src"].startswith(prefix)
            data = base64.b64decode(attrs["src"][len(prefix):], validate=True)
            assert data.startswith(PNG_MAGIC)
            with Image.open(io.BytesIO(data)) as im:
                im.verify()
            with Image.open(io.BytesIO(data)) as im:
                assert im.width > 50 and im.height > 50
            pngs.append(data)
    return pngs


@pytest.fixture(scope="module")
def full_page(tmp_path_factory) -> str:
    # rendered once: drawing a dozen charts is the slow part of these tests
    root = tmp_path_factory.mktemp("report")
    out = write_report(make_run(root))
    assert out == root / "run" / "report.html"
    return out.read_text()


def test_full_report_is_self_contained_with_valid_pngs(full_page):
    page = full_page
    pngs = _check_self_contained(page)
    # reward, zero-std, length, entropy, kl, clip, heatmap, alarms, timing, optim, other, eval png
    assert len(pngs) == 12
    assert "could not be drawn" not in page and "Not logged" not in page
    assert "my/custom_metric" in page


def test_transcripts_and_messages_are_escaped(full_page):
    page = full_page
    assert XSS not in page and "<script>" not in page and "<b>bold</b>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;&lt;/pre&gt;" in page
    assert "&lt;answer&gt;60&lt;/answer&gt;" in page
    assert "&lt;b&gt;bold&lt;/b&gt;" in page
    assert not [a for t, a in _tags(page) if t == "img" and "evil" in a.get("src", "")]


def test_eval_numbers_and_summary_are_tabulated(full_page):
    page = full_page
    assert "<td>pass@1</td><td>0.42</td>" in page
    assert "<td>maj@16</td><td>0.55</td>" in page
    assert "<td>by_budget/64</td><td>0.3</td>" in page
    assert "<td>final_accuracy</td><td>0.3</td>" in page
    assert "accuracy_vs_budget.png" in page


def test_a_run_with_one_line_and_nothing_else(tmp_path):
    line = {"step": 1, "reward/mean": 0.5, "timing/generate": 2.0, "timing/step": 2.5,
            "group_pass_rates": [0.5]}
    (tmp_path / "metrics.jsonl").write_text(json.dumps(line) + "\n")
    page = write_report(tmp_path).read_text()
    assert len(_check_self_contained(page)) == 3  # reward, pass-rate heatmap, time per stage
    assert "could not be drawn" not in page
    assert "Not logged in this run." in page and "No transcripts were written." in page


def test_an_empty_run_dir(tmp_path):
    page = write_report(tmp_path).read_text()
    assert _check_self_contained(page) == []
    assert "could not be drawn" not in page


def test_nan_null_inf_and_garbage_lines_do_not_crash(tmp_path):
    rows = [json.dumps(_step(1)), json.dumps({**_step(2), "entropy": None, "kl": float("nan")}),
            '{"step": 3, "reward/mean": NaN, "kl": Infinity, "group_pass_rates": [NaN, 0.5]}',
            '{"step": 4, "reward/m', "[1, 2, 3]", "", json.dumps({"step": None, "kl": 1.0}),
            json.dumps({"step": 5, "timing/step": float("nan"), "group_pass_rates": "oops"}),
            json.dumps({"step": 6, "event": "alarm"})]
    (tmp_path / "metrics.jsonl").write_text("\n".join(rows) + "\n")
    (tmp_path / "transcripts.jsonl").write_text(json.dumps({"step": 1, "flags": "timeout"}) + "\n")
    (tmp_path / "summary.json").write_text("{not json")
    page = write_report(tmp_path).read_text()
    assert len(_check_self_contained(page)) >= 8
    assert "could not be drawn" not in page
    assert "non-finite or missing values were left out" in page


def test_series_keeps_only_finite_points():
    rows = [{"step": 1, "k": 1.0}, {"step": 2, "k": float("nan")}, {"step": 3, "k": None},
            {"step": 4}, {"step": 5, "k": True}, {"step": 6, "k": 2}]
    (xs, ys), dropped = series(rows, "k")
    assert (xs, ys, dropped) == ([1.0, 6.0], [1.0, 2.0], 3)
    assert all(math.isfinite(y) for y in ys)


def test_read_jsonl_skips_bad_lines(tmp_path):
    path = tmp_path / "m.jsonl"
    path.write_text('{"a": 1}\n\nnot json\n[1]\n{"b": 2')
    assert read_jsonl(path) == [{"a": 1}]
    assert read_jsonl(tmp_path / "missing.jsonl") == []


def test_missing_run_dir_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="not found"):
        write_report(tmp_path / "nope")


def test_an_experiment_directory_shows_its_verdict_and_figures(tmp_path):
    exp = tmp_path / "distill_vs_rl"
    (exp / "grpo_s0").mkdir(parents=True)          # arms live in subdirectories
    (exp / "verdict.md").write_text("# Distillation vs RL\n\nVerdict: grpo wins " + XSS + "\n")
    fig = matplotlib.figure.Figure(figsize=(2, 2))
    fig.add_subplot().plot([1, 2], [3, 4])
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    (exp / "curves.png").write_bytes(buf.getvalue())
    page = write_report(exp).read_text()
    assert 'id="experiment"' in page and "Verdict: grpo wins" in page
    assert XSS not in page and "&lt;script&gt;" in page
    assert buf.getvalue() in _check_self_contained(page)
    assert "curves.png" in page


def test_a_training_run_has_no_experiment_section(full_page):
    assert 'id="experiment"' not in full_page


def test_rlvr_report_accepts_an_experiment_directory_and_refuses_an_empty_one(tmp_path, capsys):
    from rlvr.cli.main import main

    exp = tmp_path / "narrow_gains"
    exp.mkdir()
    (exp / "verdict.md").write_text("Verdict: the claim does NOT hold here\n")
    assert main(["report", str(exp)]) == 0
    assert "the claim does NOT hold here" in (exp / "report.html").read_text()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["report", str(empty)]) == 2
    assert "not a run directory" in capsys.readouterr().err and not (empty / "report.html").exists()
