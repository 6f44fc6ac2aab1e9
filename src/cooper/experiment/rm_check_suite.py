"""The robustness suite in ``cooper experiment rm-check``: what each reward model pays of it.

The project's bar: the final reward model of every run pays at most 5% of each answer-free kind
of the robustness suite (:data:`cooper.rm.robustness.DEGENERATE_KINDS`: an opener,
punctuation, another language, the question restated, empty text, an empty template, a claim
of correctness). A defended reward model was found paying a reply with an empty final answer
on every comparison, at its start and after 300 steps, and no per-arm figure showed it. So
rm-check builds the suite (:mod:`cooper.rm.robustness`, every item wrong) on the experiment's
own benchmarks (``final_eval.benchmarks``, each one's test split, the suite's first
:data:`~cooper.rm.robustness.DEFAULT_PROBLEMS` problems: the items ``cooper rm eval --suite
robustness --dataset D`` scores) and scores it with the seed's initial reward model and the
arm's final one: per kind, the items, the share each model pays (score >= 0.5, the suite's
false-positive rate) and its mean score, and per model the answer-free kinds it pays more than
5% of. Stored under ``robustness`` in ``rm_check.json``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cooper.config.experiment import ExperimentConfig
from cooper.rm.model import RewardModel
from cooper.rm.robustness import (
    DEFAULT_PROBLEMS,
    DEFAULT_SPLIT,
    DEGENERATE_KINDS,
    SUITE_KINDS,
    SUITE_VERSION,
    SuiteItems,
    build_suite,
    suite_problems,
)
from cooper.types import Triple

SUITE_THRESHOLD = 0.5  # "right": the threshold of every other rm-check figure and of the suite
SUITE_BAR = 0.05  # the acceptance bar: at most this share of each answer-free kind paid


@dataclass(frozen=True)
class SuiteSet:
    """The suite's items on the experiment's benchmarks, and what they were built on."""

    dataset: str  # "name/split", comma-joined over the benchmarks
    problems: int
    items: SuiteItems

    @property
    def triples(self) -> list[Triple]:
        return [it.triple for it in self.items.items]

    @property
    def kinds(self) -> list[str]:
        return [it.kind or "" for it in self.items.items]


def suite_set(exp: ExperimentConfig, n: int = DEFAULT_PROBLEMS) -> SuiteSet:
    """The suite on the first ``n`` test problems of each benchmark of the final evaluation
    (the test split whatever split the evaluation reads: the suite is defined on it, apart
    from any training data)."""
    names = list(dict.fromkeys(name for name, _split in exp.benchmark_list()))
    problems = [p for name in names for p in suite_problems(name, DEFAULT_SPLIT, n)]
    return SuiteSet(",".join(f"{name}/{DEFAULT_SPLIT}" for name in names), len(problems),
                    build_suite(problems))


def paid(scores: Sequence[float], threshold: float = SUITE_THRESHOLD) -> dict[str, Any]:
    """One model on one kind's items: how many it pays (score >= ``threshold``), their share
    and the mean score; a non-finite score is left out (as :func:`~cooper.experiment.rm_check.
    paired` leaves it), and with none left the share and mean are None."""
    xs = [x for x in scores if math.isfinite(x)]
    fp = sum(x >= threshold for x in xs)
    return {"false_positives": fp, "false_positive_rate": fp / len(xs) if xs else None,
            "mean_score": sum(xs) / len(xs) if xs else None}


def over_bar(kinds: dict[str, dict[str, Any]], model: str, bar: float = SUITE_BAR) -> list[str]:
    """The answer-free kinds of which ``model`` ("initial" or "final") pays more than ``bar``."""
    return [k for k in DEGENERATE_KINDS if k in kinds
            and (kinds[k][model]["false_positive_rate"] or 0.0) > bar + 1e-12]


def suite_check(kinds: Sequence[str], before: Sequence[float], after: Sequence[float], *,
                dataset: str, problems: int, excluded: dict[str, int] | None = None,
                threshold: float = SUITE_THRESHOLD, bar: float = SUITE_BAR) -> dict[str, Any]:
    """The ``robustness`` entry of ``rm_check.json`` from each item's kind and the two models'
    scores (same order): per kind (suite order) its items and each model's :func:`paid`, the
    same over every item, and per model the answer-free kinds over ``bar``."""
    if not len(kinds) == len(before) == len(after):
        raise ValueError(f"need one kind and two scores per item, got {len(kinds)} kinds, "
                         f"{len(before)} and {len(after)} scores")

    def of(scores: Sequence[float], kind: str) -> list[float]:
        return [x for x, k in zip(scores, kinds, strict=True) if k == kind]

    order = [k for k in SUITE_KINDS if k in kinds] + sorted(set(kinds) - set(SUITE_KINDS))
    by_kind = {k: {"n": len(of(before, k)), "initial": paid(of(before, k), threshold),
                   "final": paid(of(after, k), threshold)} for k in order}
    return {"suite_version": SUITE_VERSION, "dataset": dataset, "problems": problems,
            "threshold": threshold, "bar": bar, "answer_free": list(DEGENERATE_KINDS),
            "excluded": dict(excluded or {}), "kinds": by_kind,
            "overall": {"n": len(kinds), "initial": paid(before, threshold),
                        "final": paid(after, threshold)},
            "over_bar": {m: over_bar(by_kind, m, bar) for m in ("initial", "final")}}


def score_suite(suite: SuiteSet, before: Sequence[float], final: RewardModel,
                batch_size: int = 32) -> dict[str, Any]:
    """The final reward model on the suite beside the initial one's scores (``before``,
    computed once per seed, in the suite's order)."""
    after = final.score(suite.triples, batch_size=batch_size) if suite.triples else []
    excluded: dict[str, int] = {}
    for it, _reason in suite.items.excluded:
        excluded[it.kind or ""] = excluded.get(it.kind or "", 0) + 1
    return suite_check(suite.kinds, before, after, dataset=suite.dataset,
                       problems=suite.problems, excluded=excluded)
