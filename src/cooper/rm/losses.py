"""The reward model's objectives, as pure functions of raw logits.

* :func:`bce_loss` (``docs/method.md`` "VerifyRM: the reward model"): binary cross-entropy of a
  triple's logit against its label "the completion is correct"; what ``cooper rm train`` minimises.
* :func:`bradley_terry_loss` (``docs/method.md`` "One Cooper step", step 4):
  ``-log sigmoid(pos - neg)`` over (positive, negative) pairs, the loss of the paper's released
  code.
* :func:`margin_loss` (the method summary's variant, ``docs/method.md`` "The variant: pairs from the
  policy's own rollouts"): the hinge ``max(0, margin - (pos - neg))``.
* :func:`anchor_loss` (ours): binary cross-entropy on each pair's members (positive 1, negative
  0). Both pairwise losses see only the difference of two logits, so the absolute score is free
  to drift (probabilities all below 0.5, say) while the order stays right; a small anchor term
  keeps ``sigmoid(logit)`` meaning "probably correct", which ``hacking/gap`` and the validation
  probe read.

All take logits, not probabilities (the sigmoid is folded into a numerically stable log), and
return the *sum* over pairs divided by ``normalizer`` (default: the number of pairs), so
micro-batches and processes that divide by the global pair count add up to the mean.
:func:`pair_objective` composes the configured one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from cooper.config.reward_sections import PAIR_LOSSES

if TYPE_CHECKING:
    import torch

PairObjective = Callable[["torch.Tensor", "torch.Tensor", float], "torch.Tensor"]


def bce_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of logits [N] against labels [N] in {0, 1}."""
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))  # []


def _check(pos_logits: torch.Tensor, neg_logits: torch.Tensor) -> None:
    if pos_logits.shape != neg_logits.shape or pos_logits.dim() != 1:
        raise ValueError(f"pos and neg logits must both be [P], got {tuple(pos_logits.shape)} "
                         f"and {tuple(neg_logits.shape)}")


def bradley_terry_loss(pos_logits: torch.Tensor, neg_logits: torch.Tensor, *,
                       normalizer: float | None = None) -> torch.Tensor:
    """``sum over pairs of -log sigmoid(pos - neg)``, divided by ``normalizer`` (default P).

    pos_logits, neg_logits: [P] raw logits of each pair's positive and negative.
    """
    import torch.nn.functional as F

    _check(pos_logits, neg_logits)
    per_pair = -F.logsigmoid(pos_logits - neg_logits)  # [P]
    return per_pair.sum() / max(float(normalizer or len(per_pair)), 1.0)  # []


def margin_loss(pos_logits: torch.Tensor, neg_logits: torch.Tensor, margin: float = 1.0, *,
                normalizer: float | None = None) -> torch.Tensor:
    """``sum over pairs of max(0, margin - (pos - neg))``, divided by ``normalizer``."""
    _check(pos_logits, neg_logits)
    per_pair = (margin - (pos_logits - neg_logits)).clamp(min=0)  # [P]
    return per_pair.sum() / max(float(normalizer or len(per_pair)), 1.0)  # []


def anchor_loss(pos_logits: torch.Tensor, neg_logits: torch.Tensor, *,
                normalizer: float | None = None) -> torch.Tensor:
    """``sum over pairs of (BCE(pos, 1) + BCE(neg, 0)) / 2``, divided by ``normalizer``."""
    import torch.nn.functional as F

    _check(pos_logits, neg_logits)
    per_pair = (-F.logsigmoid(pos_logits) - F.logsigmoid(-neg_logits)) / 2  # [P]
    return per_pair.sum() / max(float(normalizer or len(per_pair)), 1.0)  # []


def pair_objective(loss: str = "bradley_terry", *, margin: float = 1.0,
                   anchor_weight: float = 0.0) -> PairObjective:
    """``f(pos_logits [P], neg_logits [P], normalizer) -> []``: the chosen pairwise loss, plus
    ``anchor_weight`` times :func:`anchor_loss` when it is positive."""
    if loss not in PAIR_LOSSES:
        raise ValueError(f"loss must be one of {', '.join(PAIR_LOSSES)}, got {loss!r}")
    if anchor_weight < 0:
        raise ValueError(f"anchor_weight must be >= 0, got {anchor_weight}")

    def objective(pos: torch.Tensor, neg: torch.Tensor, normalizer: float) -> torch.Tensor:
        if loss == "margin":
            value = margin_loss(pos, neg, margin, normalizer=normalizer)
        else:
            value = bradley_terry_loss(pos, neg, normalizer=normalizer)
        if anchor_weight:
            value = value + anchor_weight * anchor_loss(pos, neg, normalizer=normalizer)
        return value

    return objective
