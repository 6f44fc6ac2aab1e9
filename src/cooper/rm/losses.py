"""The reward model's two objectives, as pure functions of raw logits.

* :func:`bce_loss` (``method.md``, Part 1): binary cross-entropy of a triple's logit against its
  label "the completion is correct"; what ``cooper rm train`` minimises.
* :func:`pairwise_loss` (``method.md``, Part 2, step 4): the Bradley-Terry loss
  ``-log sigmoid(pos - neg)`` of Cooper's online update, over (positive, negative) pairs.

Both take logits, not probabilities, so the sigmoid is folded into a numerically stable log.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch


def bce_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of logits [N] against labels [N] in {0, 1}."""
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))  # []


def pairwise_loss(pos_logits: torch.Tensor, neg_logits: torch.Tensor,
                  mask: torch.Tensor | None = None, *,
                  normalizer: float | None = None) -> torch.Tensor:
    """Bradley-Terry loss ``mean over valid pairs of -log sigmoid(pos - neg)`` (method.md, 4).

    pos_logits, neg_logits: [P] raw logits of each pair's positive and negative.
    mask: [P] bool, False for pairs to leave out (their logits may be anything, even NaN).
    normalizer: divide the summed loss by this instead of the local number of valid pairs
    (distributed training divides by the global count). No valid pair gives 0 with a graph.
    """
    import torch
    import torch.nn.functional as F

    if pos_logits.shape != neg_logits.shape or pos_logits.dim() != 1:
        raise ValueError(f"pos and neg logits must both be [P], got {tuple(pos_logits.shape)} "
                         f"and {tuple(neg_logits.shape)}")
    if mask is None:
        mask = torch.ones_like(pos_logits, dtype=torch.bool)  # [P]
    # zero a left-out pair's margin before logsigmoid: where() still multiplies the zero
    # upstream gradient by logsigmoid's derivative, which is NaN at a NaN margin
    margin = torch.where(mask, pos_logits - neg_logits, torch.zeros_like(pos_logits))  # [P]
    per_pair = torch.where(mask, -F.logsigmoid(margin), torch.zeros_like(margin))  # [P]
    count = float(normalizer) if normalizer is not None else float(mask.sum())
    return per_pair.sum() / max(count, 1.0)  # []
