"""The records every stage passes on: one definition of each.

A :class:`Problem` (data) is sampled into :class:`Rollout`\\ s (rl), which the verifier and the
reward model judge; the reward model reads a :class:`Triple`; labelled examples for training or
evaluating it are :class:`LabelledTriple`\\ s; Cooper's reward-model update learns from
:class:`Pair`\\ s. They are frozen dataclasses: plain values that cross process boundaries
(pickled by ``gather_objects``) and never change once made.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Problem:
    """One math problem with its final reference answer."""

    id: str
    question: str
    reference: str
    source: str
    solution: str | None = None  # gold worked solution, when the dataset has one


@dataclass(frozen=True)
class Triple:
    """What the reward model judges: a question, its reference answer and a completion."""

    question: str
    reference: str
    completion: str


@dataclass(frozen=True)
class LabelledTriple:
    """A triple with its correctness label (None when the file has none) and provenance."""

    triple: Triple
    label: bool | None
    id: str
    source: str
    kind: str | None = None  # how the completion was made ("gold_boxed", "answer_changed", ...)

    def to_json(self) -> dict[str, Any]:
        """The row written to a triples file (the layout ``cooper.data.triples`` reads)."""
        t = self.triple
        row = {"id": self.id, "source": self.source, "question": t.question,
               "reference": t.reference, "completion": t.completion,
               "label": None if self.label is None else int(self.label)}
        if self.kind is not None:  # files without kinds keep their old layout
            row["kind"] = self.kind
        return row


@dataclass(frozen=True)
class Rollout:
    """One sampled completion of one step, with how the verifier and the reward model saw it."""

    problem_id: str
    question: str
    reference: str
    completion: str
    correct: bool  # verifier verdict
    extracted: str | None  # the verifier's extracted final answer
    rm_score: float | None = None  # reward-model probability when it was sampled
    judged: bool | None = None  # a judge's verdict where one was asked (either use of a judge)
    paid: float | None = None  # what the policy is paid for it (cooper.rl.pay, once a step)


@dataclass(frozen=True)
class Pair:
    """A reward-model training pair: the same problem, a correct and a wrong solution."""

    problem_id: str
    question: str
    reference: str
    positive: str
    negative: str
    negative_source: str  # who wrote the negative: "assistant", "rewrite", ...
