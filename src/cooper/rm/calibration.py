"""Calibration: a fitted temperature, and the reliability bins that show whether it is needed.

The reward is read as a probability (``hacking/gap``, the validation metrics, a user's
threshold at 0.5), so a score of 0.8 should mean "correct 8 times in 10". A model trained on
one balance of labels and scored on another, or trained to near-zero loss, is sharper or
flatter than that. Temperature scaling (Guo et al., *On Calibration of Modern Neural Networks*,
2017) divides every logit by one fitted scalar ``T``: the ranking (AUROC, pair accuracy) is
untouched, only the distance from 0.5 changes, and one number cannot overfit a held-out set.

``T`` minimises the mean negative log-likelihood of ``sigmoid(logit / T)`` on labelled
held-out triples. That NLL is convex in ``b = 1 / T`` (logistic regression with one weight and
no bias), so a golden-section search over ``b`` finds the minimum; ``T`` is kept within
``[T_MIN, T_MAX]`` (a model whose scores carry no information would otherwise get
``T = inf``, and one ranking backwards a negative ``T``: both say "retrain", not "rescale").

Pure Python on lists of floats; :class:`cooper.rm.model.RewardModel` applies the result.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

T_MIN, T_MAX = 0.05, 20.0
_GOLDEN = (math.sqrt(5) - 1) / 2


def _softplus(x: float) -> float:
    """log(1 + e^x) without overflow."""
    return x + math.log1p(math.exp(-x)) if x > 0 else math.log1p(math.exp(x))


def nll(logits: Sequence[float], labels: Sequence[bool], temperature: float = 1.0) -> float:
    """Mean negative log-likelihood of ``sigmoid(logit / temperature)`` against the labels."""
    if len(logits) != len(labels):
        raise ValueError(f"{len(logits)} logits but {len(labels)} labels")
    if not logits:
        raise ValueError("no items")
    # -log sigmoid(z) = softplus(-z); -log(1 - sigmoid(z)) = softplus(z)
    return sum(_softplus(-x / temperature if y else x / temperature)
               for x, y in zip(logits, labels, strict=True)) / len(logits)


def fit_temperature(logits: Sequence[float], labels: Sequence[bool], *, t_min: float = T_MIN,
                    t_max: float = T_MAX, tol: float = 1e-6) -> float:
    """The temperature in ``[t_min, t_max]`` that minimises :func:`nll` (module docstring)."""
    if not 0 < t_min < t_max:
        raise ValueError(f"need 0 < t_min < t_max, got {t_min}, {t_max}")
    if len(set(labels)) < 2:
        raise ValueError("fitting a temperature needs both correct and wrong items")

    def loss(b: float) -> float:
        return nll(logits, labels, 1.0 / b)

    lo, hi = 1.0 / t_max, 1.0 / t_min  # search b = 1 / T, where the NLL is convex
    c, d = hi - _GOLDEN * (hi - lo), lo + _GOLDEN * (hi - lo)
    fc, fd = loss(c), loss(d)
    while hi - lo > tol * max(1.0, lo):
        if fc <= fd:
            hi, d, fd = d, c, fc
            c = hi - _GOLDEN * (hi - lo)
            fc = loss(c)
        else:
            lo, c, fc = c, d, fd
            d = lo + _GOLDEN * (hi - lo)
            fd = loss(d)
    return min(max(1.0 / ((lo + hi) / 2), t_min), t_max)


def sigmoid(x: float) -> float:
    """1 / (1 + e^-x), in two branches so a large |x| neither overflows nor loses precision."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def apply_temperature(logits: Sequence[float], temperature: float) -> list[float]:
    """Scores ``sigmoid(logit / temperature)``."""
    return [sigmoid(x / temperature) for x in logits]


@dataclass(frozen=True)
class ReliabilityBin:
    """One equal-width score bin of a reliability diagram."""

    lo: float
    hi: float
    n: int
    correct: int  # items labelled correct
    mean_score: float  # NaN when empty
    fraction_correct: float  # NaN when empty


def reliability_bins(scores: Sequence[float], labels: Sequence[bool],
                     bins: int = 10) -> list[ReliabilityBin]:
    """Items in ``bins`` equal-width score bins (the bins of the ECE in :mod:`.metrics`)."""
    if len(scores) != len(labels):
        raise ValueError(f"{len(scores)} scores but {len(labels)} labels")
    members: list[list[int]] = [[] for _ in range(bins)]
    for i, s in enumerate(scores):
        members[min(int(s * bins), bins - 1)].append(i)  # a score of 1.0 joins the last bin
    out = []
    for b, idx in enumerate(members):
        correct = sum(1 for i in idx if labels[i])
        mean = sum(scores[i] for i in idx) / len(idx) if idx else math.nan
        frac = correct / len(idx) if idx else math.nan
        out.append(ReliabilityBin(b / bins, (b + 1) / bins, len(idx), correct, mean, frac))
    return out
