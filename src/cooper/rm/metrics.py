"""Metrics of a reward model judged as a binary classifier of "the completion is correct".

Pure Python on lists of scores (sigmoid probabilities) and labels; each metric is defined once
here and in ``docs/reward_model.md``:

* **accuracy**: fraction of items whose verdict ``score >= threshold`` equals the label
  (VerifyBench's accuracy, ``docs/method.md`` "VerifyRM: the reward model"; threshold 0.5).
* **precision / recall / F1**: with "correct" as the positive class; 0 when undefined
  (no predicted positives, no actual positives).
* **AUROC**: probability that a random correct item scores above a random wrong one, ties
  counting half (Mann-Whitney U); NaN when only one class is present. Threshold-free.
* **ECE**: expected calibration error of the score as P(correct): items in 10 equal-width
  score bins, ``sum over bins of (bin size / n) * |fraction correct - mean score|``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Confusion:
    """Counts with "correct" as the positive class."""

    tp: int
    fp: int
    tn: int
    fn: int


@dataclass(frozen=True)
class BinaryMetrics:
    """Every figure of one evaluation (see the module docstring for definitions)."""

    n: int
    accuracy: float
    precision: float
    recall: float
    f1: float
    auroc: float
    ece: float
    confusion: Confusion
    positives: int  # items labelled correct
    threshold: float

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k, v in d.items():  # JSON has no NaN: an undefined figure is null
            if isinstance(v, float) and not math.isfinite(v):
                d[k] = None
        return d


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve via average ranks (ties count half); NaN with one class."""
    n_pos = sum(1 for y in labels if y)
    n_neg = len(labels) - n_pos
    if n_pos == 0 or n_neg == 0:
        return math.nan
    order = sorted(range(len(scores)), key=lambda i: scores[i])
    ranks = [0.0] * len(scores)
    i = 0
    while i < len(order):  # give tied scores the mean of the ranks they span (1-based)
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2 + 1
        i = j + 1
    rank_sum = sum(r for r, y in zip(ranks, labels, strict=True) if y)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)


def expected_calibration_error(scores: Sequence[float], labels: Sequence[bool],
                               bins: int = 10) -> float:
    """ECE of the score read as P(correct), over ``bins`` equal-width bins of [0, 1]."""
    if not scores:
        return math.nan
    members: list[list[int]] = [[] for _ in range(bins)]
    for i, s in enumerate(scores):
        members[min(int(s * bins), bins - 1)].append(i)  # a score of 1.0 joins the last bin
    total = 0.0
    for idx in members:
        if idx:
            frac = sum(1 for i in idx if labels[i]) / len(idx)
            conf = sum(scores[i] for i in idx) / len(idx)
            total += len(idx) / len(scores) * abs(frac - conf)
    return total


def binary_metrics(scores: Sequence[float], labels: Sequence[bool], *,
                   threshold: float = 0.5, bins: int = 10) -> BinaryMetrics:
    """Accuracy, precision, recall, F1, AUROC, ECE and the confusion matrix."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    if not scores:
        raise ValueError("no items to evaluate")
    tp = fp = tn = fn = 0
    for s, y in zip(scores, labels, strict=True):
        pred = s >= threshold
        if pred and y:
            tp += 1
        elif pred:
            fp += 1
        elif y:
            fn += 1
        else:
            tn += 1
    n = len(scores)
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return BinaryMetrics(
        n=n, accuracy=(tp + tn) / n, precision=precision, recall=recall, f1=f1,
        auroc=auroc(scores, labels), ece=expected_calibration_error(scores, labels, bins),
        confusion=Confusion(tp, fp, tn, fn), positives=tp + fn, threshold=threshold)


def metrics_by_group(scores: Sequence[float], labels: Sequence[bool], groups: Sequence[str], *,
                     threshold: float = 0.5) -> dict[str, BinaryMetrics]:
    """:func:`binary_metrics` per group (e.g. per data source), groups in sorted order."""
    out = {}
    for g in sorted(set(groups)):
        idx = [i for i, x in enumerate(groups) if x == g]
        out[g] = binary_metrics([scores[i] for i in idx], [labels[i] for i in idx],
                                threshold=threshold)
    return out


def balanced_indices(labels: Sequence[bool], seed: int) -> list[int]:
    """Every index of the rarer label and as many of the other, drawn with ``seed``, in
    ascending order (file order): a label-balanced subset, on which accuracy is the mean of
    recall and specificity. A ValueError when one label is missing (nothing to balance with)."""
    by_label = {True: [i for i, y in enumerate(labels) if y],
                False: [i for i, y in enumerate(labels) if not y]}
    k = min(len(v) for v in by_label.values())
    if k == 0:
        raise ValueError(f"a balanced subset needs both labels; there are "
                         f"{len(by_label[True])} correct and {len(by_label[False])} wrong")
    rng = random.Random(seed)
    return sorted(i for v in by_label.values() for i in rng.sample(v, k))
