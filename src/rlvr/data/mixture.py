"""The training and held-out problems a `data` config section names: one source, or a mixture.

`train_problems(data)` reads `data.train_path` (a `rlvr.data.sources` source) or every `data.mix`
entry; a mixture comes back as a `Mixture`, whose parts keep their name and weight (the sampler
draws each step's prompts from them by weight, `rlvr.sampling.mixture`). Problems of a mixture
have ids `NAME/ID` and `metadata["mix"] = NAME`, so per-source metrics and pass rates can tell them
apart. Not guaranteed: anything about how often a part is drawn (that is the sampler's business).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Sequence

from rlvr.config.checks import mix_name
from rlvr.data.sources import SourceSpec, load_problems, named_verifiers
from rlvr.types import Problem


@dataclass(frozen=True)
class Part:
    name: str
    weight: float
    problems: Sequence[Problem]


class Mixture(Sequence[Problem]):
    """The parts of `data.mix`, read as one sequence (banner, reference checks)."""

    def __init__(self, parts: list[Part]):
        self.parts = parts

    def __len__(self) -> int:
        return sum(len(p.problems) for p in self.parts)

    @property
    def verifier_names(self) -> set[str]:
        return set().union(*(named_verifiers(p.problems) for p in self.parts))

    def __iter__(self) -> Iterator[Problem]:
        for part in self.parts:
            yield from part.problems

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        for part in self.parts:
            if i < len(part.problems):
                return part.problems[i]
            i -= len(part.problems)
        raise IndexError(i)


def spec(data: Any, entry: dict | None = None, split: str | None = None) -> SourceSpec:
    """The `SourceSpec` of `data.*` keys, with a mixture entry's own keys over them."""
    e = entry or {}
    return SourceSpec(config=e.get("config", data.config), split=e.get("split", split or data.split),
                      columns=dict(e.get("columns", data.columns)),
                      extractor=e.get("reference_extractor", data.reference_extractor),
                      template=e.get("prompt_template", data.prompt_template),
                      system=e.get("system_prompt", data.system_prompt),
                      name=mix_name(e) if entry else "")


def train_problems(data: Any, default_verifier: str) -> Sequence[Problem]:
    """`data.train_path`'s problems, or a `Mixture` of `data.mix`'s."""
    if not data.mix:
        return load_problems(data.train_path, default_verifier, data.prompt_field, spec(data))
    parts = []
    for i, entry in enumerate(data.mix):
        problems = load_problems(entry["path"], entry.get("verifier", default_verifier),
                                 entry.get("prompt_field", data.prompt_field), spec(data, entry),
                                 key=f"data.mix[{i}].path")
        parts.append(Part(mix_name(entry), float(entry.get("weight", 1.0)), problems))
    return Mixture(parts)


def eval_problems(data: Any, default_verifier: str) -> Sequence[Problem]:
    if not data.eval_path:
        return []
    return load_problems(data.eval_path, default_verifier, data.prompt_field,
                         spec(data, split=data.eval_split), key="data.eval_path")
