"""Benchmark: rlvr's constraint checks and language ID, with baselines measured in the same run.

Three parts, one JSON object per line, the last line a summary:

1. accuracy: each paragraph of tests/unit/data/language_paragraphs.json (IFEval's 30 response
   languages + zh, hand-written) identified by rlvr (`detect_language`: fastText lid.176, langdetect
   where fastText is unsure), by langdetect seeded (IFEval's detector), and by a script-only reader
   (the majority script names the language). Then accuracy on word prefixes of the paragraphs, by
   letter count, no minimum length applied: rlvr, fastText alone, langdetect alone (what
   `MIN_LETTERS` and `CONFIDENT` are chosen from).
2. language check per row on training-sized completions (~33 tokens: P x G = 16 x 8 = 128 a step,
   reasoning in <think> plus an answer): `language` constraint and `language_consistency` reward,
   rlvr vs langdetect vs script-only. Cold = first sight of each text (the training loop's case; the
   memo caches are cleared per repeat).
3. all constraint types per row (a mixed workload: 17 types, one list of 3 constraints a row),
   rlvr as shipped vs the same verifier with its language check swapped for langdetect.
4. (--train-steps N > 0) real GRPO steps on the built-in tiny Llama, 16 prompts x 8 samples x 33
   new tokens, one thread: once with a plain reward ("1" in the text), once with the same reward
   plus both language checks (the `language` constraint and `language_consistency`) on every
   completion. Median seconds per step and in the verify phase, steps after the first.

    PYTHONPATH=src .venv/bin/python bench/verify_constraints.py [--rows 2000] [--repeats 5] [--seed 0]
        [--train-steps 6]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from pathlib import Path

from rlvr.types import Problem
from rlvr.verifiers import constraints as C
from rlvr.verifiers import language as L
from rlvr.verifiers.shaping import language_consistency

DATA = Path(__file__).resolve().parent.parent / "tests" / "unit" / "data" / "language_paragraphs.json"
SCRIPT_LANGUAGE = {"CYRILLIC": "ru", "ARABIC": "ar", "DEVANAGARI": "hi", "HANGUL": "ko", "THAI": "th",
                   "HEBREW": "he", "GREEK": "el", "CJK": "zh", "HIRAGANA": "ja", "KATAKANA": "ja"}


def script_only(text: str) -> str:
    """The old idea: the majority script names the language (Latin: English)."""
    counts = L.script_counts(text)
    if not counts:
        return ""
    script = max(counts, key=counts.__getitem__)
    return SCRIPT_LANGUAGE.get(script, "en" if script == "LATIN" else script.lower())


def script_share(text: str, lang: str) -> float:
    """The old consistency reward: share of letters in the language's script."""
    counts = L.script_counts(text)
    return sum(n for s, n in counts.items() if s in L.scripts_of(lang)) / max(1, sum(counts.values()))


def langdetect_fn():
    from langdetect import DetectorFactory, detect
    DetectorFactory.seed = 0

    def run(text: str) -> str:
        try:
            return detect(text).split("-")[0]
        except Exception:  # langdetect raises on text without features
            return ""
    return run


def accuracy(paragraphs: dict[str, list[str]], detectors: dict) -> dict:
    out = {}
    for name, fn in detectors.items():
        wrong = [(lang, fn(t)) for lang, ts in paragraphs.items() for t in ts if fn(t) != lang]
        out[name] = {"right": sum(map(len, paragraphs.values())) - len(wrong), "wrong": wrong}
    return out


def prefix_accuracy(paragraphs: dict[str, list[str]], detect) -> dict[str, float]:
    buckets: dict[int, list[int]] = {}
    for lang, texts in paragraphs.items():
        for text in texts:
            words = text.split()
            for k in range(1, len(words) + 1):
                prefix = " ".join(words[:k])
                n = sum(L.script_counts(prefix).values())
                buckets.setdefault(min(n // 10 * 10, 60), []).append(detect(prefix) == lang)
    return {f"{b}-{b + 9}" if b < 60 else "60+": round(sum(v) / len(v), 3) for b, v in sorted(buckets.items())}


def completions(paragraphs: dict[str, list[str]], n: int, rng: random.Random) -> list[tuple[str, str]]:
    """(~33-token completion, its language): a reasoning sentence or two in <think>, then an answer."""
    out = []
    for _ in range(n):
        lang = rng.choice(sorted(paragraphs))
        text = rng.choice(paragraphs[lang])
        cut = text[: rng.randint(90, 140)] if lang in ("zh", "ja", "th", "ko") else " ".join(text.split()[:18])
        out.append((f"<think>{cut} 3 + 4 = 7, 7 * 2 = 14.</think> {rng.randint(0, 99)}", lang))
    return out


def per_row_us(fn, rows, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        L.detect_language.cache_clear()
        L._model_scores.cache_clear()
        L._identify.cache_clear()
        t0 = time.perf_counter()
        for row in rows:
            fn(*row)
        times.append((time.perf_counter() - t0) / len(rows))
    return statistics.median(times) * 1e6


def confusable_ab(rows, repeats: int) -> dict[str, float]:
    """Both language checks per row, shipped vs `CONFUSABLE_SURE` = `CONFIDENT` (the check before the
    confusable groups: fastText alone from p = 0.5), interleaved in one process."""
    shipped, out = L.CONFUSABLE_SURE, {}
    try:
        for name, th in (("before_groups", L.CONFIDENT), ("shipped", shipped)) * 2:
            L.CONFUSABLE_SURE = th
            out[f"{name}_constraint"] = per_row_us(lambda t, lang: L.detect_language(t) == lang, rows, repeats)
            out[f"{name}_consistency"] = per_row_us(language_consistency, rows, repeats)
    finally:
        L.CONFUSABLE_SURE = shipped
    return {**{k: round(v, 1) for k, v in out.items()},
            "ratio_constraint": round(out["shipped_constraint"] / out["before_groups_constraint"], 2),
            "ratio_consistency": round(out["shipped_consistency"] / out["before_groups_consistency"], 2)}


def constraint_rows(paragraphs, rows: int, rng: random.Random):
    langs = sorted(paragraphs)
    specs = [{"type": "word_count", "args": {"relation": "at least", "n": 20}},
             {"type": "sentence_count", "args": {"relation": "less than", "n": 4}},
             {"type": "paragraph_count", "args": {"relation": "exactly", "n": 2}},
             {"type": "json_format"}, {"type": "keywords_include", "args": {"keywords": ["the", "day"]}},
             {"type": "keywords_exclude", "args": {"keywords": ["cat"]}},
             {"type": "keyword_frequency", "args": {"keyword": "we", "relation": "at least", "n": 2}},
             {"type": "letter_frequency", "args": {"letter": "e", "relation": "at least", "n": 5}},
             {"type": "letter_case", "args": {"case": "lower"}},
             {"type": "starts_with", "args": {"text": "The"}}, {"type": "ends_with", "args": {"text": "?"}},
             {"type": "bullet_count", "args": {"relation": "exactly", "n": 3}},
             {"type": "section_count", "args": {"relation": "at least", "n": 2}}, {"type": "no_commas"},
             {"type": "placeholders", "args": {"n": 1}}, {"type": "title"}]
    out = []
    for i in range(rows):
        lang = rng.choice(langs)
        body = rng.choice(paragraphs[lang])
        body = rng.choice([body, f"<<Title>>\n{body}", f"* {body}\n* b\n* c", f"{body}\n***\n{body}",
                           json.dumps({"answer": body}), f"SECTION 1\n{body}\nSECTION 2\n[name]"])
        chosen = rng.sample(specs, 2) + [{"type": "language", "args": {"language": rng.choice(langs)}}]
        out.append((body, Problem(f"r{i}", "", None, "constraints", {"constraints": chosen})))
    return out


def train_steps(steps: int, with_language: bool) -> dict[str, float]:
    import tempfile

    import torch

    from rlvr import config as config_mod
    from rlvr.monitor.log import read_metrics
    from rlvr.train import train
    from rlvr.verifiers.base import CallableVerifier, register_verifier

    def reward(completions, **_):
        out = [float("1" in c) for c in completions]
        if with_language:
            out = [r + float(C.CHECKS["language"](c, language="en")) + language_consistency(c, "en")
                   for r, c in zip(out, completions)]
        return out

    torch.set_num_threads(1)
    name = f"bench_lang_{int(with_language)}"
    register_verifier(name, lambda **_: CallableVerifier(reward, name))
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "train.jsonl"
        data.write_text("".join(json.dumps({"prompt": f"{i}+{i}=", "reference": str(2 * i), "verifier": name})
                                + "\n" for i in range(32)))
        cfg = config_mod.load(None, [
            "model.path=builtin:tiny-llama", f"run.dir={tmp}/run", "data.task=", f"data.train_path={data}",
            f"grpo.steps={steps}", "grpo.group_size=8", "grpo.prompts_per_step=16",
            "rollout.max_new_tokens=33", "run.eval_every=0", "run.progress=false", "run.report=false",
            "run.threads=1", "run.transcripts_every=0", "data.heldout_size=0"])
        train(cfg)
        rows = [r for r in read_metrics(Path(tmp) / "run") if "timing/step" in r][1:]
    return {"step_s": round(statistics.median(r["timing/step"] for r in rows), 3),
            "verify_s": round(statistics.median(r.get("timing/verify", 0.0) for r in rows), 4)}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train-steps", type=int, default=0, help="GRPO steps per arm of part 4 (0: skip)")
    args = ap.parse_args(argv)
    paragraphs = json.loads(DATA.read_text(encoding="utf-8"))["paragraphs"]
    rng = random.Random(args.seed)
    ld = langdetect_fn()
    detectors = {"rlvr": L.detect_language, "langdetect": ld, "script_only": script_only}
    acc = accuracy(paragraphs, detectors)
    print(json.dumps({"part": "accuracy", **acc}, ensure_ascii=False))
    for name, fn in (("rlvr", L._identify), ("fasttext_alone", L._model_language), ("langdetect", ld)):
        print(json.dumps({"part": f"{name}_accuracy_on_prefixes_by_letters", **prefix_accuracy(paragraphs, fn)}))

    rows = completions(paragraphs, 128, rng)
    L.detect_language("warm up the model once")
    ld("warm up the profiles once")
    step = {"rlvr_constraint": per_row_us(lambda t, lang: L.detect_language(t) == lang, rows, args.repeats),
            "rlvr_consistency": per_row_us(language_consistency, rows, args.repeats),
            "langdetect_constraint": per_row_us(lambda t, lang: ld(t) == lang, rows, args.repeats),
            "script_only_constraint": per_row_us(lambda t, lang: script_only(t) == lang, rows, args.repeats),
            "script_only_consistency": per_row_us(script_share, rows, args.repeats)}
    per_step_ms = {k: round(v * 128 / 1000, 2) for k, v in step.items()}
    def unsure(text: str) -> bool:  # what _identify sends to langdetect
        lang, p = L._model_scores(text)[0]
        return p < (L.CONFUSABLE_SURE if lang in L._CONFUSABLE else L.CONFIDENT)
    unsure = sum(unsure(t) for t, _ in rows) / len(rows)
    print(json.dumps({"part": "language_check_per_row_us", **{k: round(v, 1) for k, v in step.items()},
                      "share_sent_to_langdetect": round(unsure, 3),
                      "per_step_ms_128_rows": per_step_ms}))

    print(json.dumps({"part": "confusable_groups_cost_us", **confusable_ab(rows, args.repeats)}))

    crow = constraint_rows(paragraphs, args.rows, rng)
    verifier = C.ConstraintsVerifier(reward="fraction")

    def score_all():
        for response, problem in crow:
            verifier.score_batch([response], [problem])
    rlvr_us = per_row_us(lambda: score_all(), [()], args.repeats) / len(crow)
    shipped = C.detect_language
    C.detect_language = ld  # the same verifier, with IFEval's detector for the language check
    try:
        ld_us = per_row_us(lambda: score_all(), [()], args.repeats) / len(crow)
    finally:
        C.detect_language = shipped
    print(json.dumps({"part": "constraints_per_row_us", "rlvr": round(rlvr_us, 1),
                      "with_langdetect": round(ld_us, 1), "rows": len(crow)}))
    summary = {}
    if args.train_steps:
        plain, lang = train_steps(args.train_steps, False), train_steps(args.train_steps, True)
        print(json.dumps({"part": "grpo_step", "plain": plain, "with_language_checks": lang}))
        summary["tiny_model_step_overhead"] = round((lang["verify_s"] - plain["verify_s"]) / plain["step_s"], 4)
        # The tiny model's text is mostly too short to reach the detector; real-language rows are
        # the worst case: both checks on 128 of them, against the measured step.
        summary["real_language_checks_share_of_step"] = round(
            (step["rlvr_constraint"] + step["rlvr_consistency"]) * 128 / 1e6 / plain["step_s"], 3)
    print(json.dumps({"summary": True, **summary,
                      "paragraphs_right": {k: v["right"] for k, v in acc.items()},
                      "language_check_ratio_vs_langdetect": round(step["langdetect_constraint"] / step["rlvr_constraint"], 1),
                      "constraints_ratio_vs_langdetect": round(ld_us / rlvr_us, 2),
                      "language_checks_per_step_ms": per_step_ms["rlvr_constraint"] + per_step_ms["rlvr_consistency"]}))


if __name__ == "__main__":
    main()
