"""How the math and constraint verifiers read a real model's answers (issue: real model, item 3).

Two parts, both on SmolLM2-135M-Instruct's own outputs:

`math RUN_DIR...`: reads the real-model quickstart's `quickstart_eval/{before,after}.jsonl` (every
held-out response with the `math` verifier's extraction and the format-blind "last number" verdict)
and counts, per file and mode: responses the verifier extracts nothing from (`no_answer`), several
answers (`multiple_answers`), verdicts that differ from the format-blind check, and the kinds behind
them (an empty `\\boxed{}`, a response cut at the token limit). The kinds are read by a rule printed
beside each count; the rows are printed so a reader can check them.

`constraints OUT.jsonl`: asks the model 150 IFEval-style instructions (15 constraint types x 10
topics, greedy, 192 new tokens), scores every response with rlvr's `constraints` verifier and with
IFEval's own checker (lm-eval's copy of google-research's `instruction_following_eval`) and writes
both verdicts per row; prints agreement per type and every disagreement. IFEval's checker needs
`lm-eval`, `nltk` and `immutabledict` importable (not rlvr dependencies:
`pip download --no-deps lm-eval==0.4.13 nltk==3.10.4 immutabledict` and unzip them onto
PYTHONPATH); sentence counts are left out because IFEval's splitter needs nltk's punkt data, which
cannot be downloaded here.

    python -m experiments.verifiers_on_smollm2 math runs/quickstart-smollm2
    python -m experiments.verifiers_on_smollm2 constraints runs/constraints_smollm2.jsonl
"""

from __future__ import annotations

import collections
import json
import sys
from pathlib import Path

TOPICS = ["a rainy day", "your favourite food", "the moon", "a trip to the beach", "learning to code",
          "a lost cat", "winter mornings", "a busy market", "the ocean", "a new bicycle"]

# (instruction appended to the request, rlvr constraint, IFEval instruction id, IFEval kwargs)
CASES = [
    ("Answer in fewer than 50 words.", {"type": "word_count", "args": {"relation": "less than", "n": 50}},
     "length_constraints:number_words", {"relation": "less than", "num_words": 50}),
    ("Do not use any commas in your response.", {"type": "no_commas"}, "punctuation:no_comma", {}),
    ("Include the keywords 'sun' and 'happy' in the response.",
     {"type": "keywords_include", "args": {"keywords": ["sun", "happy"]}},
     "keywords:existence", {"keywords": ["sun", "happy"]}),
    ("Do not include the word 'very' in the response.",
     {"type": "keywords_exclude", "args": {"keywords": ["very"]}},
     "keywords:forbidden_words", {"forbidden_words": ["very"]}),
    ("Your entire response should be in English, and in all lowercase letters. No capital letters are "
     "allowed.", {"type": "letter_case", "args": {"case": "lower", "language": "en"}},
     "change_case:english_lowercase", {}),
    ("Your entire response should be in English, and in all capital letters.",
     {"type": "letter_case", "args": {"case": "upper", "language": "en"}}, "change_case:english_capital", {}),
    ("Finish your response with this exact phrase: Is there anything else I can help with?",
     {"type": "ends_with", "args": {"text": "Is there anything else I can help with?"}},
     "startend:end_checker", {"end_phrase": "Is there anything else I can help with?"}),
    ("Your answer must contain a title, wrapped in double angular brackets, such as <<poem of joy>>.",
     {"type": "title"}, "detectable_format:title", {}),
    ("Entire output should be wrapped in JSON format.", {"type": "json_format"},
     "detectable_format:json_format", {}),
    ("Your answer must contain exactly 3 bullet points. Use the markdown bullet points such as:\n* This "
     "is point 1.", {"type": "bullet_count", "args": {"relation": "exactly", "n": 3}},
     "detectable_format:number_bullet_lists", {"num_bullets": 3}),
    ("The response must contain at least 2 placeholders represented by square brackets, such as "
     "[address].", {"type": "placeholders", "args": {"n": 2}},
     "detectable_content:number_placeholders", {"num_placeholders": 2}),
    ("There should be 2 paragraphs. Paragraphs are separated with the markdown divider: ***",
     {"type": "paragraph_count", "args": {"relation": "exactly", "n": 2}},
     "length_constraints:number_paragraphs", {"num_paragraphs": 2}),
    ("In your response, the letter e should appear at least 10 times.",
     {"type": "letter_frequency", "args": {"letter": "e", "relation": "at least", "n": 10}},
     "keywords:letter_frequency", {"letter": "e", "let_relation": "at least", "let_frequency": 10}),
    ("In your response, the word 'bright' should appear at least 2 times.",
     {"type": "keyword_frequency", "args": {"keyword": "bright", "relation": "at least", "n": 2}},
     "keywords:frequency", {"keyword": "bright", "relation": "at least", "frequency": 2}),
    ("Your response must have 2 sections. Mark the beginning of each section with Section X, such as: "
     "Section 1", {"type": "section_count", "args": {"relation": "at least", "n": 2, "splitter": "Section"}},
     "detectable_format:multiple_sections", {"section_spliter": "Section", "num_sections": 2}),
]


def math_counts(run_dirs: list[str]) -> None:
    for run in run_dirs:
        for name in ("before", "after"):
            rows = [json.loads(line) for line in open(Path(run) / "quickstart_eval" / f"{name}.jsonl")]
            for mode in ("greedy", "sampled"):
                _math_table(run, name, mode, [r for r in rows if r["mode"] == mode])


def _math_table(run: str, name: str, mode: str, rows: list[dict]) -> None:
    c: collections.Counter = collections.Counter()
    odd = []
    limit = max(r["tokens"] for r in rows)
    for r in rows:
        c["correct"] += r["correct"]
        no_answer, several = "no_answer" in r["flags"], "multiple_answers" in r["flags"]
        c["no_answer"] += no_answer
        c["multiple_answers"] += several
        c["no_answer: an empty \\boxed{}"] += no_answer and "\\boxed{}" in r["response"]
        c["no_answer: cut at the token limit"] += no_answer and r["tokens"] >= limit
        if r["correct"] != r["lenient_correct"]:
            c["verdict differs from the last number"] += 1
            odd.append(r)
        if no_answer or several:
            odd.append(r)
    print(f"\n{run} {name} {mode}: {len(rows)} responses; " + ", ".join(f"{k} {v}" for k, v in c.items()))
    for r in odd:
        print(f"  ref {r['reference']} extracted {r['extracted']!r} {r['flags']} verifier {r['correct']} "
              f"last-number {r['lenient_correct']}: {r['response'][-160:]!r}")


def request(topic: str, instruction: str) -> str:
    """The user message of one (topic, constraint) prompt; experiments.public_math asks the same."""
    return f"Write a short piece about {topic}. {instruction}"


def constraint_problems():
    from rlvr.types import Problem

    out = []
    for i, (text, rule, ife_id, kwargs) in enumerate(CASES):
        for j, topic in enumerate(TOPICS):
            prompt = [{"role": "user", "content": request(topic, text)}]
            out.append(Problem(id=f"c{i}-{j}", prompt=prompt, reference=None, verifier="constraints",
                               metadata={"constraints": [rule], "ifeval": [ife_id, kwargs]}))
    return out


def ifeval_verdict(ife_id: str, kwargs: dict, response: str) -> bool:
    from lm_eval.tasks.ifeval import instructions_registry

    checker = instructions_registry.INSTRUCTION_DICT[ife_id](ife_id)
    checker.build_description(**kwargs)
    return bool(response.strip() and checker.check_following(response))


def constraint_run(out_path: str) -> None:
    from rlvr.models.device import Device
    from rlvr.models.policy import load_policy
    from rlvr.models.resolve import resolve_model_path
    from rlvr.rollout.base import SamplingParams
    from rlvr.rollout.hf import HFEngine
    from rlvr.training.setup import set_threads
    from rlvr.verifiers.constraints import ConstraintsVerifier

    set_threads(0)
    device = Device.resolve("cpu", bf16_where_native=True)   # as the quickstart samples
    model, tok = load_policy(resolve_model_path("builtin:smollm2-135m-instruct"), "float32", 0, device)
    model.eval()
    problems = constraint_problems()
    params = SamplingParams(max_new_tokens=192, greedy=True)
    groups = HFEngine(model, tok, device=device).generate(problems, 1, params, seed=0)
    texts = [g.completions[0].text for g in groups]
    scores = ConstraintsVerifier().score_batch(texts, problems)
    rows = [{"id": p.id, "type": p.metadata["constraints"][0]["type"], "prompt": p.prompt[-1]["content"],
             "response": t, "rlvr": bool(s.correct), "ifeval": ifeval_verdict(*p.metadata["ifeval"], t),
             "tokens": len(g.completions[0].token_ids)}
            for p, t, s, g in zip(problems, texts, scores, groups)]
    Path(out_path).write_text("".join(json.dumps(r) + "\n" for r in rows))
    constraint_table(rows)


def constraint_table(rows: list[dict]) -> None:
    by: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
    for r in rows:
        by[r["type"]]["n"] += 1
        by[r["type"]]["rlvr"] += r["rlvr"]
        by[r["type"]]["ifeval"] += r["ifeval"]
        by[r["type"]]["disagree"] += r["rlvr"] != r["ifeval"]
    print(f"{'type':18} {'n':>3} {'rlvr':>5} {'ifeval':>6} {'differ':>6}")
    for kind, c in by.items():
        print(f"{kind:18} {c['n']:3} {c['rlvr']:5} {c['ifeval']:6} {c['disagree']:6}")
    for r in rows:
        if r["rlvr"] != r["ifeval"]:
            print(f"\n--- {r['id']} {r['type']}: rlvr {r['rlvr']} ifeval {r['ifeval']}\n{r['response']}")


if __name__ == "__main__":
    if sys.argv[1] == "math":
        math_counts(sys.argv[2:])
    elif sys.argv[1] == "table":
        constraint_table([json.loads(line) for line in open(sys.argv[2])])
    else:
        constraint_run(sys.argv[2])
