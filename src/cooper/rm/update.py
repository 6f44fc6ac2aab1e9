"""Cooper's online reward-model update: one pairwise step per RL step (``method.md``, Part 2, 4).

:class:`PairwiseUpdater` applies the Bradley-Terry loss (:func:`cooper.rm.losses.pairwise_loss`)
on raw logits over valid (positive, negative) pairs with AdamW (lr 1e-5, weight decay 0.01),
gradient clipping at 1.0 and a constant lr; a step whose loss or gradient norm is not finite is
skipped and counted. Across processes it sums gradients through a caller-given
``reduce_grads`` and normalises by the global pair count, so every process takes the identical
step.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cooper.errors import UserError
from cooper.rm.losses import pairwise_loss
from cooper.rm.training import param_groups

if TYPE_CHECKING:
    import torch

    from cooper.rm.model import RewardModel
    from cooper.types import Triple

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PairwiseStats:
    """What one pairwise update did (this process's pairs)."""

    loss: float  # mean loss over this process's pairs (NaN when it had none)
    pair_acc_before: float  # fraction ranked right (pos > neg) before the update (NaN: none)
    grad_norm: float  # total gradient norm before clipping (0 when nothing was updated)
    pairs: int  # pairs this process contributed
    skipped: bool  # True when the loss or gradient norm was not finite: no update was made


class PairwiseUpdater:
    """Cooper's reward-model update: pairwise loss, AdamW, clipping (``method.md``, Part 2, 4).

    Defaults are the released settings: lr 1e-5, weight decay 0.01, clip 1.0, constant lr.
    Across processes, pass ``reduce_grads`` (sums a list of gradient tensors in place over
    all processes, e.g. ``dist.all_reduce`` on each) and ``global_pairs`` (the pair count over
    all processes): every process then takes the same step and the weights stay identical.
    """

    def __init__(self, rm: RewardModel, lr: float = 1e-5, weight_decay: float = 0.01,
                 max_grad_norm: float = 1.0, micro_batch_size: int = 8):
        import torch

        if not lr > 0 or weight_decay < 0 or not max_grad_norm > 0 or micro_batch_size < 1:
            raise UserError("PairwiseUpdater needs lr > 0, weight_decay >= 0, max_grad_norm > 0 "
                            f"and micro_batch_size >= 1 (got {lr}, {weight_decay}, "
                            f"{max_grad_norm}, {micro_batch_size})")
        self.rm, self.max_grad_norm, self.micro_batch_size = rm, max_grad_norm, micro_batch_size
        self.params = [p for p in rm.model.parameters() if p.requires_grad]
        if not self.params:
            raise UserError("the reward model has no trainable parameters")
        self.optimizer = torch.optim.AdamW(param_groups(self.params, weight_decay), lr=lr)
        self.steps = 0  # updates applied
        self.skipped_steps = 0  # updates refused for a non-finite loss or gradient norm

    def step(self, positives: Sequence[Triple], negatives: Sequence[Triple], *,
             reduce_grads: Callable[[list[torch.Tensor]], None] | None = None,
             global_pairs: int | None = None) -> PairwiseStats:
        """One update on pairs ``(positives[i], negatives[i])``; may have zero local pairs."""
        import torch

        n = len(positives)
        if len(negatives) != n:
            raise ValueError(f"{n} positives but {len(negatives)} negatives: pairs go together")
        if reduce_grads is not None and global_pairs is None:
            raise ValueError("reduce_grads needs global_pairs (the pair count over all "
                             "processes) so the loss is normalised the same everywhere")
        total = n if global_pairs is None else global_pairs
        if total < n:
            raise ValueError(f"global_pairs {global_pairs} is smaller than the local {n} pairs")
        if total == 0:  # no pair anywhere: every process knows it, so none calls reduce_grads
            return PairwiseStats(math.nan, math.nan, 0.0, 0, False)

        model = self.rm.model
        was_training = model.training
        model.train()
        for p in self.params:  # real zeros, so a process with no pairs still sends gradients
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.optimizer.zero_grad(set_to_none=False)
        loss_sum, right, finite = 0.0, 0, True
        for k in range(0, n, self.micro_batch_size):
            pos, neg = positives[k:k + self.micro_batch_size], negatives[k:k + self.micro_batch_size]
            logits = self.rm.logits([*pos, *neg])  # [2m]: positives then negatives
            pos_l, neg_l = logits[:len(pos)], logits[len(pos):]  # [m], [m]
            # summed over the chunk and divided by the global count: micro-batches and
            # processes add up to the mean over all pairs
            loss = pairwise_loss(pos_l, neg_l, normalizer=total)
            if not torch.isfinite(loss):
                finite = False
                break
            loss.backward()
            loss_sum += loss.item() * total
            right += int((pos_l > neg_l).sum())
        grads = [p.grad for p in self.params]
        if not finite:
            # poison the gradients rather than return early: the other processes are waiting
            # in reduce_grads, and a NaN norm after the sum makes them all skip this step too
            for g in grads:
                g.fill_(math.nan)
        if reduce_grads is not None:
            reduce_grads(grads)
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm))
        skipped = not math.isfinite(norm)
        if skipped:
            self.optimizer.zero_grad(set_to_none=False)
            self.skipped_steps += 1
            log.warning("reward-model update skipped: gradient norm %s (%d skipped so far)",
                        norm, self.skipped_steps)
        else:
            self.optimizer.step()
            self.steps += 1
        model.train(was_training)
        return PairwiseStats(
            loss=loss_sum / n if n and finite else math.nan,
            pair_acc_before=right / n if n and finite else math.nan,
            grad_norm=norm, pairs=n, skipped=skipped)

    def state_dict(self) -> dict[str, Any]:
        """Optimizer state and counters (weights are saved with :meth:`RewardModel.save`).

        Holds only tensors and plain values, so ``torch.load(..., weights_only=True)`` reads it.
        """
        return {"optimizer": self.optimizer.state_dict(), "steps": self.steps,
                "skipped_steps": self.skipped_steps, "max_grad_norm": self.max_grad_norm}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.optimizer.load_state_dict(state["optimizer"])
        self.steps, self.skipped_steps = int(state["steps"]), int(state["skipped_steps"])
        self.max_grad_norm = float(state["max_grad_norm"])
