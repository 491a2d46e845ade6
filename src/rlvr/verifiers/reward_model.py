"""A reward model as a verifier (registry name "reward_model"): a Hugging Face
sequence-classification checkpoint scores each (prompt, response); the reward is its logit.

    {verifier: reward_model, weight: 0.5, options: {path: runs/rm, batch_size: 16}}

The model loads once, in this process, from a local folder in the hub's layout (`path`), on
`device` (default: the first CUDA device when there is one, else the CPU, i.e. the trainer's
device in a one-device run), in eval mode, and scores in batches of `batch_size` under no_grad.
The text is the tokenizer's chat template over [user: prompt, assistant: response] when it has one,
else prompt + response; it is cut to `max_length` tokens from the left (keeping the response's
end). A checkpoint with several labels gives the logit of `label`. `correct` is logit > 0.

Hack resistance: as a judge (see `judge.py`), a reward model is a model a policy can learn to
please beyond what is right; its score is unbounded, so weight it, or use
`grpo.reward_norm: per_term` so its spread does not drown the rule-based terms.
Not guaranteed: bitwise-equal scores across devices or batch sizes (padding changes the sums).
"""

from __future__ import annotations

from typing import Any, Sequence

from rlvr.types import Problem, Score


class RewardModelVerifier:
    name = "reward_model"
    judged_by_model = True

    def __init__(self, *, path: str, batch_size: int = 16, max_length: int = 1024, label: int = 0,
                 device: str | None = None):
        import torch
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        if not 0 <= label < self.model.config.num_labels:
            raise ValueError(f"reward_model {path}: label {label} but the model has "
                             f"{self.model.config.num_labels} labels")
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model.config.pad_token_id = self.tokenizer.pad_token_id
        self.tokenizer.truncation_side = "left"
        self.device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
        self.model.to(self.device)
        self.batch_size, self.max_length, self.label = batch_size, max_length, label

    def check_reference(self, problem: Problem) -> None:
        return None

    def _text(self, response: str, problem: Problem) -> str:
        messages: list[dict[str, Any]] = (list(problem.prompt) if isinstance(problem.prompt, list)
                                          else [{"role": "user", "content": str(problem.prompt)}])
        if getattr(self.tokenizer, "chat_template", None):
            return str(self.tokenizer.apply_chat_template(
                messages + [{"role": "assistant", "content": response}], tokenize=False))
        return "".join(str(m.get("content", "")) for m in messages) + response

    def logits(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[float]:
        import torch

        out: list[float] = []
        texts = [self._text(r, p) for r, p in zip(responses, problems)]
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(texts[start:start + self.batch_size], return_tensors="pt",
                                   padding=True, truncation=True, max_length=self.max_length)
            with torch.no_grad():
                logits = self.model(**batch.to(self.device)).logits   # [B, num_labels]
            out += logits[:, self.label].float().cpu().tolist()
        return out

    def score_batch(self, responses: Sequence[str], problems: Sequence[Problem]) -> list[Score]:
        return [Score(v, v > 0) for v in self.logits(responses, problems)]

    def close(self) -> None:
        self.model.to("cpu")
