"""An LLM judge as a verifier (registry name "judge"): an OpenAI-compatible chat endpoint scores
each response through a prompt template and a verdict parser.

    {verifier: judge, weight: 0.5, options: {url: "http://127.0.0.1:8000/v1", model: judge-model,
     template: "Question: {prompt}\\nReference: {reference}\\nAnswer: {response}\\nCorrect? yes or no.",
     verdict: yes_no}}

Each response is one `POST {url}/chat/completions` request ({"model", "messages": [one user
message: the rendered template], "max_tokens", "temperature": 0}), at most `concurrency` at a
time, each with `timeout_s` and up to `retries` retries; the reply is `choices[0].message.content`.
Verdicts: `yes_no` (the first "yes" or "no" of the reply: 1 or 0), `score` (the first number after
"score" or "rating", divided by `max_score`), or any other string: a regular expression whose first
group is a number, divided by `max_score`. A reply with no verdict scores 0 with the flag
`no_verdict`; a request that still fails after its retries scores 0 and reports the failure as the
term's error (`details["term_error"]`: the `reward_crash` path of `data.reward_funcs`).

Hack resistance: a judge is a model, and a policy trained against it learns what the judge likes,
which is not always what is right (flattery, length, confident tone, text that addresses the
judge). Rule-based terms cannot be argued with; a judge can. Keep a rule-based term beside a judge
where one exists, read the transcripts, and heed the doctor's `judge_rise` alarm (a model term's
reward rising while the rule-based terms' stays flat). Not guaranteed: the same verdict twice
(a served model at temperature 0 may still differ between batches).
"""

from __future__ import annotations

import json
import os
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence
from urllib.parse import urlsplit

from rlvr.types import Problem, Score
from rlvr.verifiers.service import ServiceError, request_json, with_retries

DEFAULT_TEMPLATE = ("Question:\n{prompt}\n\nReference answer: {reference}\n\nProposed answer:\n{response}\n\n"
                    "Is the proposed answer correct? Reply yes or no.")
_YES_NO = re.compile(r"\b(yes|no)\b", re.IGNORECASE)
_SCORE = r"(?i)(?:score|rating)\W{0,3}(-?\d+(?:\.\d+)?)"


def parse_verdict(reply: str, verdict: str, max_score: float) -> float | None:
    """The reward a reply states, or None when it states none."""
    if verdict == "yes_no":
        m = _YES_NO.search(reply)
        return None if m is None else float(m.group(1).lower() == "yes")
    m = re.search(_SCORE if verdict == "score" else verdict, reply)
    try:
        return None if m is None else float(m.group(1)) / max_score
    except (IndexError, ValueError):
        return None


def render(template: str, response: str, problem: Problem) -> str:
    prompt = problem.prompt if isinstance(problem.prompt, str) else "\n".join(
        str(m.get("content", "")) for m in problem.prompt)
    return template.format(prompt=prompt, response=response, reference=problem.reference)


class JudgeVerifier:
    name = "judge"
    judged_by_model = True   # the doctor's judge_rise alarm compares these terms with the others

    def __init__(self, *, url: str, model: str = "judge", template: str = DEFAULT_TEMPLATE,
                 verdict: str = "yes_no", max_score: float = 10.0, max_tokens: int = 64,
                 timeout_s: float = 60.0, concurrency: int = 8, retries: int = 1,
                 token_env: str = "RLVR_JUDGE_TOKEN"):
        self.parts = urlsplit(url)
        if self.parts.scheme not in ("http", "https") or not self.parts.hostname:
            raise ValueError(f"judge url {url!r}: expected http://host:port/v1")
        render(template, "", Problem("-", ""))   # a bad placeholder fails at build, not per call
        if verdict not in ("yes_no", "score"):
            re.compile(verdict)
        self.url, self.model, self.template, self.verdict = url, model, template, verdict
        self.max_score, self.max_tokens, self.timeout_s = max_score, max_tokens, timeout_s
        self.concurrency, self.retries = concurrency, retries
        self.token = os.environ.get(token_env, "")

    def check_reference(self, problem: Problem) -> None:
        return None

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        with ThreadPoolExecutor(max(1, min(self.concurrency, len(responses)))) as ex:
            return list(ex.map(self._judge, responses, problems))

    def _judge(self, response: str, problem: Problem) -> Score:
        message = {"role": "user", "content": render(self.template, response, problem)}
        body = json.dumps({"model": self.model, "max_tokens": self.max_tokens, "temperature": 0,
                           "messages": [message]})
        path = f"{self.parts.path.rstrip('/')}/chat/completions"
        try:
            reply = with_retries(lambda: request_json(self.parts, "POST", path, body.encode(),
                                                      self.timeout_s, self.token), self.retries)
            text = reply["choices"][0]["message"]["content"] or ""
        except ServiceError as exc:
            error = {"error": f"{self.url}: {exc}"[:500], "traceback": "", "flag": exc.flag}
            return Score(0.0, False, (exc.flag,), details={"term_error": error, "error": error["error"]})
        except (KeyError, IndexError, TypeError):
            error = {"error": f"{self.url}: no choices[0].message.content in {str(reply)[:120]}",
                     "traceback": "", "flag": "crash"}
            return Score(0.0, False, ("crash",), details={"term_error": error, "error": error["error"]})
        reward = parse_verdict(str(text), self.verdict, self.max_score)
        if reward is None:
            return Score(0.0, False, ("no_verdict",), details={"judge": str(text)[:300]})
        return Score(reward, reward > 0, (), details={"judge": str(text)[:300]})
