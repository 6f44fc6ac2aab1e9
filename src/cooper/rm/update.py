"""Cooper's online reward-model update: a pairwise step per RL step
(``docs/method.md`` "One Cooper step", step 4).

:class:`PairwiseUpdater` minimises a pairwise objective (:func:`cooper.rm.losses.pair_objective`:
Bradley-Terry by default, as the released code; the margin hinge and an anchor term are
settings) on raw logits over (positive, negative) pairs with AdamW (lr 1e-5, weight decay 0.01),
gradient clipping at 1.0 and a constant lr, for ``epochs`` passes over the step's pairs (1 in
the paper, 3 in the method summary). A pass whose loss or gradient norm is not finite is skipped
and counted. Across processes it sums gradients through a caller-given ``reduce_grads`` and
normalises by the global pair count, so every process takes the identical step.

Precision: the trainable weights are kept in float32 (a bfloat16 model's are cast on
construction) and the forward autocasts to the model's low precision, because an AdamW step of
about 1e-5 rounds away on most bfloat16 weights. ``changed_fraction`` reports how many trainable
weights an update moved, so an update that changes nothing shows.

The forward runs with dropout off (as TRL trains the policy), so the pair accuracy measured on
it before the update is the same measurement a frozen reward model gets in the other arms.

With only the top layers trained (``rm_update.train_layers``), the update runs only those on
the hidden states the step's scoring pass computed below them (:meth:`PairwiseUpdater.keeping_states`,
:class:`cooper.rm.trunk.StepStates`): the same logits and gradients, a fraction of the forward.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cooper.errors import UserError
from cooper.rm.losses import pair_objective
from cooper.rm.prefix import batch_order
from cooper.rm.training import adamw
from cooper.rm.trunk import StepStates, trained_top_layers, unsupported

if TYPE_CHECKING:
    import torch

    from cooper.config.reward_modes import RewardPlan
    from cooper.config.reward_sections import RMUpdateConfig
    from cooper.rm.model import RewardModel
    from cooper.types import Triple

log = logging.getLogger(__name__)

# changed_fraction compares at most this many trainable elements (evenly spaced in each tensor)
CHANGE_SAMPLE = 1 << 22


@dataclass(frozen=True)
class PairwiseStats:
    """What one pairwise update did (this process's pairs)."""

    loss: float  # mean loss over this process's pairs before the update (NaN when it had none)
    pair_acc_before: float  # fraction ranked right (pos > neg) before the update (NaN: none)
    grad_norm: float  # total gradient norm of the first pass, before clipping
    pairs: int  # pairs this process contributed
    skipped: bool  # True when a pass's loss or gradient norm was not finite: no update was made
    changed_fraction: float = math.nan  # trainable weights the update changed (NaN: no update)


class PairwiseUpdater:
    """Cooper's reward-model update: pairwise loss, AdamW, clipping
    (``docs/method.md`` "One Cooper step", step 4).

    Defaults are the released settings: Bradley-Terry, lr 1e-5, weight decay 0.01, clip 1.0,
    constant lr, one pass. Across processes, pass ``reduce_grads`` (sums a list of gradient
    tensors in place over all processes) and ``global_pairs`` (the pair count over all
    processes): every process then takes the same step and the weights stay identical.
    """

    def __init__(self, rm: RewardModel, lr: float = 1e-5, weight_decay: float = 0.01,
                 max_grad_norm: float = 1.0, micro_batch_size: int = 8, *,
                 loss: str = "bradley_terry", margin: float = 1.0, anchor_weight: float = 0.0,
                 epochs: int = 1):
        if not lr > 0 or weight_decay < 0 or not max_grad_norm > 0 or micro_batch_size < 1 \
                or epochs < 1:
            raise UserError("PairwiseUpdater needs lr > 0, weight_decay >= 0, max_grad_norm > 0, "
                            f"micro_batch_size >= 1 and epochs >= 1 (got {lr}, {weight_decay}, "
                            f"{max_grad_norm}, {micro_batch_size}, {epochs})")
        try:
            self.objective = pair_objective(loss, margin=margin, anchor_weight=anchor_weight)
        except ValueError as e:
            raise UserError(str(e)) from None
        self.rm, self.max_grad_norm, self.micro_batch_size = rm, max_grad_norm, micro_batch_size
        self.epochs = epochs
        cast = rm.keep_trainable_in_float32()
        if cast:
            log.info("reward model: %d trainable tensors kept in float32 (master weights); the "
                     "forward runs in %s", cast, next(p.dtype for p in rm.model.parameters()))
        self.params = [p for p in rm.model.parameters() if p.requires_grad]
        if not self.params:
            raise UserError("the reward model has no trainable parameters")
        self.optimizer = adamw(self.params, weight_decay, lr)
        # only the top layers trained: the step's scoring pass computes the rest (rm.trunk)
        top = trained_top_layers(rm)
        reason = unsupported(rm, top, 0) if top is not None else "every layer trained"
        self.step_states = StepStates(rm, top) if reason is None else None
        if top is not None and reason is not None:
            log.info("reward-model update: full forward passes (frozen layers not reused: %s)",
                     reason)
        total = sum(p.numel() for p in self.params)
        self._stride = max(1, math.ceil(total / CHANGE_SAMPLE))
        self.steps = 0  # updates applied
        self.skipped_steps = 0  # updates refused for a non-finite loss or gradient norm

    def _sample(self) -> list[torch.Tensor]:
        """Evenly spaced trainable weights (all of them for a model under CHANGE_SAMPLE)."""
        return [p.detach().reshape(-1)[::self._stride].clone() for p in self.params]

    def keeping_states(self) -> contextlib.AbstractContextManager:
        """While open, reward-model forwards keep the hidden states entering the trained layers
        for this step's update (a no-op when every layer is trained; :class:`StepStates`)."""
        return (self.step_states.keeping() if self.step_states is not None
                else contextlib.nullcontext())

    def _logits(self, ids: list[list[int]]) -> torch.Tensor:
        """Raw logits [N] with grad: from kept states when the lower layers are frozen."""
        if self.step_states is not None:
            return self.step_states.logits(ids)
        return self.rm.logits_of_ids(ids)

    def _fit(self, distinct: list[list[int]], batches: list[list[int]]) -> bool:
        """The batches, padded, hold no more tokens than 2 x micro_batch_size inputs of the
        reward model's longest (``max_length``)."""
        padded = sum(len(b) * max(len(distinct[i]) for i in b) for b in batches)
        return padded <= 2 * self.micro_batch_size * self.rm.spec.max_length

    def _batch_logits(self, distinct: list[list[int]],
                      batches: list[list[int]]) -> list[torch.Tensor]:
        """Each batch's logits [B] with grad, their graphs kept for the backward."""
        return [self._logits([distinct[i] for i in b]) for b in batches]

    def _pass(self, positives: Sequence[list[int]], negatives: Sequence[list[int]], total: int,
              reduce_grads) -> tuple[float, int, bool, float]:
        """One pass over the pairs: gradients, summed across processes, clipped.

        Each distinct input runs once, however many pairs it is in (with rollout negatives a
        prompt's hardest wrong rollout is the negative of every positive of that prompt), and the
        samples of one prompt share their prefix (:mod:`cooper.rm.prefix`). When they all fit in
        one forward of ``2 x micro_batch_size`` inputs, the loss is differentiated through it.
        Otherwise each input's d loss / d logit comes first, then each batch's forward with grad
        is differentiated against those: the same gradient (the loss depends on the weights only
        through the logits), in bounded memory. Those logits come from the batches' forwards with
        grad, their graphs kept, when the batches' padded tokens fit in ``2 x micro_batch_size``
        inputs of ``max_length`` (:meth:`_fit`: short inputs, as on the CPU testbeds, where this
        saves a quarter of the update), else from a forward without grad first.

        Returns (summed loss x total, pairs ranked right, finite, gradient norm).
        """
        import torch

        for p in self.params:  # real zeros, so a process with no pairs still sends gradients
            if p.grad is None:
                p.grad = torch.zeros_like(p)
        self.optimizer.zero_grad(set_to_none=False)
        loss_sum, right, finite = 0.0, 0, True
        if positives:
            slot: dict[tuple[int, ...], int] = {}  # token ids -> index among the distinct inputs
            pos_at = [slot.setdefault(tuple(x), len(slot)) for x in positives]  # [P]
            neg_at = [slot.setdefault(tuple(x), len(slot)) for x in negatives]  # [P]
            distinct = [list(k) for k in slot]  # [D]
            batches = batch_order(distinct, 2 * self.micro_batch_size)
            # short inputs: every batch's graph kept at once costs no more memory than one
            # forward of 2 x micro_batch_size inputs at the model's token budget, which the
            # setting already allows; then the batches' forwards with grad give the loss
            kept = (self._batch_logits(distinct, batches)
                    if len(batches) > 1 and self._fit(distinct, batches) else None)
            if len(batches) == 1:
                logits = self._logits(distinct)  # [D], with grad
            else:
                with torch.no_grad():
                    logits = torch.empty(len(distinct))  # [D]
                    for k, b in enumerate(batches):
                        logits[b] = (kept[k].detach() if kept is not None
                                     else self._logits([distinct[i] for i in b])).cpu()
                logits.requires_grad_(True)
            pos_l, neg_l = logits[pos_at], logits[neg_at]  # [P], [P]
            # summed over the pairs and divided by the global count: processes add up to the
            # mean over all pairs
            loss = self.objective(pos_l, neg_l, total)
            finite = bool(torch.isfinite(loss))
            if finite:
                loss.backward()
                if len(batches) > 1:  # d loss / d logit of each input, then through the model
                    coef = logits.grad  # [D]
                    for k, b in enumerate(batches):
                        mine = (kept[k] if kept is not None  # [B], with grad
                                else self._logits([distinct[i] for i in b]))
                        (mine * coef[b].to(mine.device)).sum().backward()
                loss_sum = loss.item() * total
                right = int((pos_l > neg_l).sum())
        grads = [p.grad for p in self.params]
        if not finite:
            # poison the gradients rather than return early: the other processes are waiting
            # in reduce_grads, and a NaN norm after the sum makes them all skip this pass too
            for g in grads:
                g.fill_(math.nan)
        if reduce_grads is not None:
            reduce_grads(grads)
        norm = float(torch.nn.utils.clip_grad_norm_(self.params, self.max_grad_norm))
        return loss_sum, right, finite, norm

    def step(self, positives: Sequence[Triple], negatives: Sequence[Triple], *,
             reduce_grads: Callable[[list[torch.Tensor]], None] | None = None,
             global_pairs: int | None = None) -> PairwiseStats:
        """``epochs`` updates on pairs ``(positives[i], negatives[i])``; may have zero local
        pairs. Loss and pair accuracy are those of the first pass, before any update."""
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
            self._forget_states()
            return PairwiseStats(math.nan, math.nan, 0.0, 0, False)

        model = self.rm.model
        was_training = model.training
        model.eval()  # dropout off: gradients still flow (see the module docstring)
        pos_ids = [self.rm.encode(t) for t in positives]  # encoded once for every epoch
        neg_ids = [self.rm.encode(t) for t in negatives]
        before = self._sample()
        first: tuple[float, int, bool, float] | None = None
        skipped = False
        for _ in range(self.epochs):
            loss_sum, right, finite, norm = self._pass(pos_ids, neg_ids, total, reduce_grads)
            first = first or (loss_sum, right, finite, norm)
            if not math.isfinite(norm):  # every process sees the same summed norm
                self.optimizer.zero_grad(set_to_none=False)
                self.skipped_steps += 1
                skipped = True
                log.warning("reward-model update skipped: gradient norm %s (%d skipped so far)",
                            norm, self.skipped_steps)
                break
            self.optimizer.step()
        if not skipped:
            self.steps += 1
        model.train(was_training)
        self._forget_states()
        after = self._sample()
        changed = sum(int((a != b).sum()) for a, b in zip(after, before, strict=True))
        sampled = sum(len(b) for b in before)
        loss_sum, right, finite, norm = first
        return PairwiseStats(
            loss=loss_sum / n if n and finite else math.nan,
            pair_acc_before=right / n if n and finite else math.nan,
            grad_norm=norm, pairs=n, skipped=skipped,
            changed_fraction=changed / sampled)

    def _forget_states(self) -> None:
        """Drop the states kept for this step's update: they belong to this step's inputs."""
        if self.step_states is not None:
            self.step_states.clear()

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


def load_reward_model(model: str | os.PathLike | RewardModel | None, *, plan: RewardPlan,
                      update: RMUpdateConfig, max_length: int | None = None,
                      dtype: str = "float32", device=None
                      ) -> tuple[RewardModel | None, PairwiseUpdater | None]:
    """The reward model (a folder, or one already loaded) and, when Stage 2 updates it, its
    updater: AdamW over the top ``update.train_layers`` layers (all when None)."""
    if model is None:
        return None, None
    from cooper.config.reward_modes import Stage2
    from cooper.rm.model import RewardModel

    rm = model if isinstance(model, RewardModel) else RewardModel.load(
        model, max_length=max_length, dtype=dtype)
    if device is not None:
        rm.model.to(device)
    if plan.stage2 is not Stage2.UPDATE:
        return rm, None
    if update.train_layers is not None:
        try:
            rm.train_top_layers(update.train_layers)
        except UserError as e:  # name the setting, not the function
            raise UserError(f"rm_update.train_layers: {e}") from e
    return rm, PairwiseUpdater(rm, lr=update.lr, weight_decay=update.weight_decay,
                               max_grad_norm=update.max_grad_norm,
                               micro_batch_size=update.micro_batch_size, loss=update.loss,
                               margin=update.margin, anchor_weight=update.anchor_weight,
                               epochs=update.epochs)
