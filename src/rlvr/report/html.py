"""`write_report(run_dir)`: one self-contained HTML page with the charts of a training run.

Reads what the loop writes into RUN_DIR — metrics.jsonl (step, eval and event lines),
transcripts.jsonl, summary.json, eval/eval.json and eval/*.png — and what an experiment
(`experiments/`) writes into its directory — verdict.md and *.png such as curves.png — and writes
RUN_DIR/report.html. The reading is `rundata.load_run`'s; this module draws and writes the page.
Guaranteed: the page loads nothing from outside itself (images are base64 data URIs, CSS is
inline, there is no JavaScript); every text from the run is HTML-escaped; missing files, missing
keys, a handful of lines, malformed lines and NaN/inf/null values give a report, not a crash
(non-finite values are left out of charts and counted). With completions.parquet
(`run.log_completions`) the page lists the hardest-won and the flagged completions, each by its
row in that file. Not guaranteed: a chart for metrics the
loop never logged; only the most recent transcripts are shown, truncated.
"""

from __future__ import annotations

import base64
import html
import json
import os
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from rlvr.errors import UserError
from rlvr.report import plots
from rlvr.report.rundata import RunData, finite, load_run, series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TRANSCRIPT_STEPS = 6          # most recent steps whose transcripts are shown
TEXT_LIMIT = 3000             # characters kept of each prompt / completion
OTHER_METRICS_LIMIT = 12

# anchor: (title, what it shows, [(y label, metric keys)]) — one multi-panel chart each.
ChartSpec = tuple[str, str, list[tuple[str, tuple[str, ...]]]]
CHARTS: dict[str, ChartSpec] = {
    "reward": ("Reward and held-out accuracy",
     "Mean training reward (band: ± its std across completions), training accuracy, and greedy "
     "accuracy on the held-out set.",
     [("reward", ("reward/mean",)), ("accuracy", ("accuracy", "eval/accuracy"))]),
    "zero-std": ("Groups with no reward variance",
     "Share of groups whose completions all got the same reward: their advantages are 0, so they "
     "teach nothing. Near 1 means the problems are too easy or too hard.",
     [("share of groups", ("frac_reward_zero_std",))]),
    "length": ("Completion length",
     "Mean and max completion tokens, and the share of completions cut off at max_new_tokens.",
     [("tokens", ("completions/mean_length", "completions/max_length")),
      ("share clipped", ("completions/clipped_ratio",))]),
    "entropy": ("Entropy", "Mean per-token entropy of the policy on its own completions; a "
     "collapse towards 0 means the policy stopped exploring.", [("nats/token", ("entropy",))]),
    "kl": ("KL to the reference", "Mean per-token KL estimate between policy and reference.",
     [("kl", ("kl",))]),
    "clip": ("Clip fractions", "Share of tokens where the PPO clip is active: ratio below "
     "1−eps_low with A<0 (low) or above 1+eps_high with A>0 (high).",
     [("share of tokens", ("clip_ratio/low_mean", "clip_ratio/high_mean",
                           "clip_ratio/region_mean"))]),
    "optim": ("Optimisation", "Gradient norm before clipping, learning rate and throughput.",
     [("grad norm", ("grad_norm",)), ("learning rate", ("lr",)),
      ("tokens/s", ("tokens_per_s",))]),
}
_KNOWN = {k for *_, panels in CHARTS.values() for _, keys in panels for k in keys} | {
    "step", "time", "reward/std", "group_pass_rates", "eval/heldout_size", "event", "name",
    "message", "action"}


# ---- HTML pieces -------------------------------------------------------------------------------

def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _fmt(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, (list, dict)):
        return _esc(json.dumps(value)[:200])
    return _esc(value)


def _img(png: bytes, alt: str) -> str:
    data = base64.b64encode(png).decode("ascii")
    return f'<img alt="{_esc(alt)}" src="data:image/png;base64,{data}">'


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_esc(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_fmt(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _note(text: str) -> str:
    return f'<p class="note">{_esc(text)}</p>'


def _flatten(d: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    rows: list[tuple[str, Any]] = []
    for key, value in d.items():
        if isinstance(value, dict):
            rows += _flatten(value, f"{prefix}{key}/")
        else:
            rows.append((f"{prefix}{key}", value))
    return rows


# ---- sections: each builds the body html of one <section> --------------------------------------

def chart_section(data: RunData, title: str, about: str,
                  panel_keys: list[tuple[str, tuple[str, ...]]]) -> str:
    panels, dropped = [], 0
    for ylabel, keys in panel_keys:
        found = {}
        for key in keys:
            s, bad = series(data.records, key)
            dropped += bad
            if s[0]:
                found[key] = s
        if found:
            panels.append((ylabel, found))
    if not panels:
        return _note("Not logged in this run.")
    bands: dict[str, plots.Band] | None = None
    if "reward/mean" in panels[0][1]:
        pairs = [(finite(r.get("step")), finite(r.get("reward/mean")), finite(r.get("reward/std")))
                 for r in data.records]
        pairs = [p for p in pairs if None not in p]
        if pairs:
            xs, mu, sd = zip(*pairs)
            bands = {"± reward/std": (xs, [m - s for m, s in zip(mu, sd)],
                                      [m + s for m, s in zip(mu, sd)])}
    body = _note(about) + _img(plots.line_panels(title, panels, bands), title)
    if dropped:
        body += _note(f"{dropped} non-finite or missing values were left out.")
    return body


def pass_rate_section(data: RunData) -> str:
    steps, rates = [], []
    for r in data.records:
        step, values = finite(r.get("step")), r.get("group_pass_rates")
        if step is None or not isinstance(values, list):
            continue
        good = [v for v in map(finite, values) if v is not None and 0.0 <= v <= 1.0]
        if good:
            steps.append(step)
            rates.append(good)
    if not steps:
        return _note("Not logged in this run.")
    about = ("Each column is a range of steps; colour is the share of that range's groups whose "
             "pass rate falls in each band. Mass at 0 and 1 is wasted compute (no signal).")
    return _note(about) + _img(plots.pass_rate_heatmap(steps, rates), "pass-rate heatmap")


def alarm_section(data: RunData) -> str:
    rows = [(r.get("step"), r.get("event"), r.get("name"), r.get("message"), r.get("action"))
            for r in data.events]
    if not rows:
        return _note("No alarms were raised.")
    points = [(x, str(n or e), str(a or "")) for s, e, n, _, a in rows
              if (x := finite(s)) is not None]
    body = ""
    if points:
        reward, _ = series(data.records, "reward/mean")
        body += _img(plots.alarm_timeline(points, reward if reward[0] else None),
                     "alarm timeline")
    return body + _table(["step", "event", "name", "message", "action"], rows)


_STAGE_ORDER = ["timing/generate", "timing/verify", "timing/update"]


def timing_section(data: RunData) -> str:
    stages = sorted({k for r in data.records for k in r
                     if k.startswith("timing/") and k != "timing/step"},
                    key=lambda k: (_STAGE_ORDER.index(k) if k in _STAGE_ORDER else 99, k))
    rows = [r for r in data.records if finite(r.get("step")) is not None
            and any(k in r for k in stages + ["timing/step"])]
    if not rows:
        return _note("Not logged in this run.")
    stacks = {k.removeprefix("timing/"): [finite(r.get(k)) or 0.0 for r in rows] for k in stages}
    totals = [finite(r.get("timing/step")) for r in rows]
    if any(t is not None for t in totals):
        spent = [sum(v) for v in zip(*stacks.values())] if stacks else [0.0] * len(rows)
        stacks["other"] = [max((t or 0.0) - s, 0.0) if t is not None else 0.0
                           for t, s in zip(totals, spent)]
    steps = [float(r["step"]) for r in rows]     # finite: rows were picked for that
    about = "Seconds per step in each stage; 'other' is timing/step minus the named stages."
    return _note(about) + _img(plots.stacked("Time per stage", steps, stacks, "seconds"),
                                 "time per stage")


def other_section(data: RunData) -> str:
    keys = sorted({k for r in data.records for k, v in r.items()
                   if k not in _KNOWN and not k.startswith("timing/") and finite(v) is not None})
    found = {k: s for k in keys for s in [series(data.records, k)[0]] if s[0]}
    if not found:
        return _note("None.")
    shown = dict(list(found.items())[:OTHER_METRICS_LIMIT])
    body = _note("Metrics with no dedicated chart: " + ", ".join(shown) + ".")
    body += _img(plots.small_multiples("Other metrics", shown), "other metrics")
    if len(found) > len(shown):
        body += _note(f"Not drawn: {', '.join(list(found)[OTHER_METRICS_LIMIT:])}.")
    return body


def _figures(pngs: Sequence[tuple[str, bytes]], prefix: str) -> str:
    body = ""
    for name, png in pngs:
        if png.startswith(PNG_MAGIC):
            body += f"<figure>{_img(png, name)}<figcaption>{_esc(name)}</figcaption></figure>"
        else:
            body += _note(f"{prefix}{name} was not embedded (not a PNG, or larger than 8 MiB).")
    return body


def eval_section(data: RunData) -> str:
    if data.eval_json is None and not data.eval_pngs:
        return _note("No eval/eval.json or eval/*.png in this run directory.")
    body = ""
    if data.eval_json is not None:
        rows = [(k, v) for k, v in _flatten(data.eval_json)
                if finite(v) is not None or v is None]
        body += _table(["metric", "value"], rows) if rows else _note("eval.json has no numbers.")
    return body + _figures(data.eval_pngs, "eval/")


def experiment_section(data: RunData) -> str:
    """An experiment directory's verdict (as escaped text) and its figures."""
    if data.verdict is None and not data.figures:
        return _note("No verdict.md or *.png in this directory (not an experiment's run directory).")
    body = f'<pre class="verdict">{_esc(data.verdict)}</pre>' if data.verdict is not None else ""
    return body + _figures(data.figures or [], "")


def _clip(text: Any) -> str:
    text = "" if text is None else str(text)
    if len(text) > TEXT_LIMIT:
        text = text[:TEXT_LIMIT] + f"\n… [{len(text) - TEXT_LIMIT} more characters]"
    return _esc(text)


def transcript_section(data: RunData) -> str:
    steps = sorted({s for t in data.transcripts if (s := finite(t.get("step"))) is not None})
    recent = set(steps[-TRANSCRIPT_STEPS:])
    picked = [t for t in data.transcripts if finite(t.get("step")) in recent]
    if not picked:
        return _note("No transcripts were written.")
    parts = [_note("Best- and worst-advantage completion of the most recent logged steps.")]
    for t in reversed(picked):
        flags = t.get("flags") or []
        flags = [flags] if isinstance(flags, str) else flags
        head = (f"step {_fmt(t.get('step'))} · {_esc(t.get('kind', ''))} · problem "
                f"{_esc(t.get('problem_id', ''))} · reward {_fmt(t.get('reward'))} · advantage "
                f"{_fmt(t.get('advantage'))}"
                + (f" · flags {_esc(', '.join(map(str, flags)))}" if flags else ""))
        parts.append(f'<div class="transcript"><div class="head">{head}</div>'
                     f"<pre class=\"prompt\">{_clip(t.get('prompt'))}</pre>"
                     f"<pre class=\"completion\">{_clip(t.get('completion'))}</pre></div>")
    return "".join(parts)


COMPLETIONS_SHOWN = 5        # hardest-won and flagged completions shown from completions.parquet


def hardest_won(rows: Sequence[dict[str, Any]], n: int = COMPLETIONS_SHOWN) -> list[dict[str, Any]]:
    """Correct completions of the groups with the fewest correct ones (ties: the latest step)."""
    def group(r: dict[str, Any]) -> tuple[Any, Any]:
        return r.get("step"), r.get("group")

    wins: dict[tuple[Any, Any], int] = {}
    for r in rows:
        wins[group(r)] = wins.get(group(r), 0) + bool(r.get("correct"))
    won = [r for r in rows if r.get("correct")]
    return sorted(won, key=lambda r: (wins[group(r)], -(finite(r.get("step")) or 0)))[:n]


def completions_section(data: RunData) -> str:
    rows = data.completions or []
    if not rows:
        return _note("No completions.parquet (set run.log_completions to write every completion "
                     "of every N-th step).")
    flagged = [r for r in rows if r.get("flags")][-COMPLETIONS_SHOWN:]
    link = '<a href="completions.parquet">completions.parquet</a>'
    parts = [_note(f"{len(rows)} completions in {link}; each entry names its row there.")]
    for title, picked in (("Hardest-won: correct where the group's other samples mostly failed",
                           hardest_won(rows)), ("Flagged by a verifier (most recent)", flagged)):
        parts.append(f"<h3>{_esc(title)}</h3>" + ("" if picked else _note("none")))
        for r in picked:
            head = (f"{link} row {r['row']} · step {_fmt(r.get('step'))} · problem "
                    f"{_esc(r.get('problem_id', ''))} · reward {_fmt(r.get('reward'))} · advantage "
                    f"{_fmt(r.get('advantage'))} · {_esc(r.get('finish_reason', ''))}"
                    + (f" · flags {_esc(', '.join(map(str, r['flags'])))}" if r.get("flags") else ""))
            parts.append(f'<div class="transcript"><div class="head">{head}</div>'
                         f"<pre class=\"prompt\">{_clip(r.get('prompt'))}</pre>"
                         f"<pre class=\"completion\">{_clip(r.get('completion'))}</pre></div>")
    return "".join(parts)


def _header(data: RunData) -> str:
    steps = [s for r in data.records if (s := finite(r.get("step"))) is not None]
    facts = [("run", data.name), ("last step", int(max(steps)) if steps else None),
             ("metric lines", len(data.records)), ("events", len(data.events)),
             ("generated", datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"))]
    body = _table(["", ""], facts)
    if data.summary:
        body += "<h3>summary.json</h3>" + _table(["key", "value"], _flatten(data.summary))
    return body


def _chart(anchor: str) -> tuple[str, str, Callable[[RunData], str]]:
    title, about, panels = CHARTS[anchor]
    return anchor, title, lambda data: chart_section(data, title, about, panels)


SECTIONS: list[tuple[str, str, Callable[[RunData], str]]] = [
    ("experiment", "Experiment verdict and figures", experiment_section),
    _chart("reward"), _chart("zero-std"), _chart("length"), _chart("entropy"), _chart("kl"),
    _chart("clip"),
    ("pass-rates", "Per-group pass rates", pass_rate_section),
    ("alarms", "Alarms and events", alarm_section),
    ("timing", "Time per stage", timing_section),
    _chart("optim"),
    ("other", "Other metrics", other_section),
    ("eval", "Test-time compute (rlvr eval)", eval_section),
    ("transcripts", "Sampled transcripts", transcript_section),
    ("completions", "Logged completions: hardest-won and flagged", completions_section),
]


def _body(build: Callable[[RunData], str], data: RunData) -> str:
    # A report written at the end of a long run must not take the run down with it: a section
    # that cannot be drawn says why and the rest of the page is still written.
    try:
        return build(data)
    except Exception as exc:  # noqa: BLE001
        return _note(f"This section could not be drawn: {exc!r}")


_CSS = """body{font-family:system-ui,sans-serif;max-width:980px;margin:2em auto;padding:0 1em;
color:#222}h1{margin-bottom:.2em}section{margin:2.2em 0}img{max-width:100%;display:block}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}td,th{border:1px solid #ccc;
padding:.25em .6em;text-align:left;vertical-align:top}.note{color:#555;font-size:.92em}
nav a{margin-right:.8em}.transcript{border:1px solid #ddd;margin:1em 0;padding:.5em}
.head{font-size:.85em;color:#444}pre{white-space:pre-wrap;word-break:break-word;background:#f6f6f6;
padding:.5em;margin:.4em 0;max-height:24em;overflow:auto}pre.prompt{background:#eef3fa}"""


def render(data: RunData) -> str:
    # the experiment section only appears for an experiment's directory
    parts = [(anchor, title, _body(build, data)) for anchor, title, build in SECTIONS
             if anchor != "experiment" or data.verdict is not None or data.figures]
    nav = " ".join(f'<a href="#{a}">{_esc(t)}</a>' for a, t, _ in parts)
    body = "".join(f'<section id="{a}"><h2>{_esc(t)}</h2>{b}</section>' for a, t, b in parts)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
            f"<title>rlvr report: {_esc(data.name)}</title><style>{_CSS}</style></head><body>"
            f"<h1>rlvr report: {_esc(data.name)}</h1>{_header(data)}<nav>{nav}</nav>{body}"
            "</body></html>\n")


def write_report(run_dir: Path) -> Path:
    """Write RUN_DIR/report.html (atomically) and return its path."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise UserError(f"run directory not found: {run_dir}")
    page = render(load_run(run_dir))
    out = run_dir / "report.html"
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    tmp.write_text(page, encoding="utf-8")
    os.replace(tmp, out)
    return out
