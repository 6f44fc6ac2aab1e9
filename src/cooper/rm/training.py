"""How the reward model learns: BCE on labelled triples, and Cooper's pairwise update.

**Supervised** (``method.md``, Part 1): binary cross-entropy on the logit, AdamW. Defaults are
the released settings (lr 2e-5, weight decay 0.01, 3 epochs); the warm-up then cosine schedule
and clipping at 1.0 are ours (the paper does not state them). Batches are built from
length-sorted chunks of a shuffled order, so a batch holds sequences of similar length and
little padding (the "group by length" sampler of transformers' Trainer). The held-out split is
taken by question, so the correct and wrong completions of one problem never sit on both sides.

**Pairwise** (``method.md``, Part 2, step 4): :class:`PairwiseUpdater` applies the
Bradley-Terry loss on raw logits over valid (positive, negative) pairs with AdamW (lr 1e-5,
weight decay 0.01), gradient clipping at 1.0 and a constant lr; a step whose loss or gradient
norm is not finite is skipped and counted. Across processes it sums gradients through a
caller-given ``reduce_grads`` and normalises by the global pair count, so every process takes
the identical step.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from cooper.errors import UserError
from cooper.rm.metrics import BinaryMetrics, binary_metrics
from cooper.rm.model import RewardModel, progress_bar
from cooper.rm.trunk import FrozenTrunk, unsupported
from cooper.types import Triple

if TYPE_CHECKING:
    import torch

    from cooper.types import LabelledTriple

log = logging.getLogger(__name__)


def param_groups(params: Sequence[torch.nn.Parameter], weight_decay: float) -> list[dict]:
    """AdamW groups: decay on matrices, none on vectors (norm scales, biases), as usual."""
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


# ------------------------------------------------------------------ supervised (BCE)

@dataclass(frozen=True)
class TrainConfig:
    """Settings of ``cooper rm train``."""

    lr: float = 2e-5  # released setting
    weight_decay: float = 0.01  # released setting
    epochs: int = 3  # released setting
    batch_size: int = 8  # sequences per forward pass
    grad_accum: int = 1  # forward passes per optimizer step
    warmup_ratio: float = 0.05  # fraction of optimizer steps with a linear warm-up (ours)
    max_grad_norm: float = 1.0  # (ours)
    holdout: float = 0.1  # fraction of questions held out for per-epoch metrics
    seed: int = 0
    train_layers: int | None = None  # train only the top N decoder layers (None: all)

    def __post_init__(self) -> None:
        problems = []
        if not self.lr > 0:
            problems.append(f"lr must be positive (got {self.lr})")
        if self.weight_decay < 0:
            problems.append(f"weight_decay must be >= 0 (got {self.weight_decay})")
        if self.epochs < 1:
            problems.append(f"epochs must be at least 1 (got {self.epochs})")
        if self.batch_size < 1 or self.grad_accum < 1:
            problems.append(f"batch_size and grad_accum must be at least 1 (got "
                            f"{self.batch_size}, {self.grad_accum})")
        if not 0 <= self.warmup_ratio < 1:
            problems.append(f"warmup_ratio must be in [0, 1) (got {self.warmup_ratio})")
        if not self.max_grad_norm > 0:
            problems.append(f"max_grad_norm must be positive (got {self.max_grad_norm})")
        if not 0 <= self.holdout < 1:
            problems.append(f"holdout must be in [0, 1) (got {self.holdout}); 0 disables it")
        if problems:
            raise UserError("; ".join(problems))


@dataclass(frozen=True)
class EpochReport:
    """One epoch: mean training loss, held-out metrics (None without a held-out split)."""

    epoch: int
    train_loss: float
    seconds: float
    heldout: BinaryMetrics | None


@dataclass
class TrainReport:
    train_size: int
    heldout_size: int
    trainable_params: int
    cached_trunk: bool = False  # frozen layers run once, not every epoch (cooper.rm_trunk)
    optimizer_steps: int = 0
    epochs: list[EpochReport] = field(default_factory=list)


def bce_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean binary cross-entropy of logits [N] against labels [N] in {0, 1}."""
    import torch.nn.functional as F

    return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))


def split_holdout(rows: Sequence[LabelledTriple], fraction: float,
                  seed: int) -> tuple[list[LabelledTriple], list[LabelledTriple]]:
    """(train, held-out), whole questions on one side; at least one question held out."""
    if fraction == 0:
        return list(rows), []
    questions = sorted({r.triple.question for r in rows})
    if len(questions) < 2:
        raise UserError("a held-out split needs at least 2 distinct questions; pass holdout 0")
    random.Random(seed).shuffle(questions)
    held = set(questions[:max(1, round(fraction * len(questions)))])
    return ([r for r in rows if r.triple.question not in held],
            [r for r in rows if r.triple.question in held])


def length_grouped_batches(lengths: Sequence[int], batch_size: int, rng: random.Random,
                           chunk_batches: int = 16) -> list[list[int]]:
    """Shuffled batches of indices, each drawn from a length-sorted chunk of the shuffle."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    batches = []
    chunk = batch_size * chunk_batches
    for k in range(0, len(order), chunk):
        part = sorted(order[k:k + chunk], key=lambda i: lengths[i], reverse=True)
        batches += [part[j:j + batch_size] for j in range(0, len(part), batch_size)]
    rng.shuffle(batches)
    return batches


def lr_factor(step: int, total: int, warmup: int) -> float:
    """Linear warm-up to 1 over ``warmup`` steps, then cosine decay to 0 at ``total``."""
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


def evaluate(rm: RewardModel, rows: Sequence[LabelledTriple], *, batch_size: int = 16,
             progress: bool = False) -> BinaryMetrics:
    scores = rm.score([r.triple for r in rows], batch_size=batch_size, progress=progress)
    return binary_metrics(scores, [bool(r.label) for r in rows])


def _cached_metrics(trunk: FrozenTrunk, states: Sequence[torch.Tensor],
                    rows: Sequence[LabelledTriple], batch_size: int) -> BinaryMetrics:
    """:func:`evaluate` on frozen-layer states (the same scores, without the frozen layers)."""
    import torch

    was_training = trunk.rm.model.training
    trunk.rm.model.eval()
    scores: list[float] = []
    with torch.no_grad():
        for k in range(0, len(states), batch_size):
            scores += torch.sigmoid(trunk.logits(states[k:k + batch_size])).tolist()
    trunk.rm.model.train(was_training)
    return binary_metrics(scores, [bool(r.label) for r in rows])


def _frozen_trunk(rm: RewardModel, config: TrainConfig, encoded: list[list[int]],
                  progress: bool) -> tuple[FrozenTrunk | None, list[torch.Tensor]]:
    """Cache the frozen layers' output when that is possible and checked to be exact."""
    reason = unsupported(rm, config.train_layers, sum(map(len, encoded)))
    if reason:
        if config.train_layers is not None:
            log.info("running full forward passes (frozen layers not cached: %s)", reason)
        return None, []
    assert config.train_layers is not None
    trunk = FrozenTrunk(rm, config.train_layers)
    states = trunk.states(encoded, batch_size=2 * config.batch_size, progress=progress)
    probe = list(range(min(len(encoded), config.batch_size)))
    diff = trunk.agrees([encoded[i] for i in probe], [states[i] for i in probe])
    tolerance = 1e-3 if rm.model.dtype.itemsize >= 4 else 5e-2
    if diff > tolerance:
        log.warning("frozen-layer cache disagrees with the full model by %.2g; running full "
                    "forward passes instead", diff)
        return None, []
    return trunk, states


def train_bce(rm: RewardModel, rows: Sequence[LabelledTriple], config: TrainConfig, *,
              progress: bool = True,
              on_epoch: Callable[[EpochReport], None] | None = None) -> TrainReport:
    """Train ``rm`` in place with BCE on labelled rows; held-out metrics after each epoch."""
    import torch

    if any(r.label is None for r in rows):
        raise UserError("training needs a label on every row")
    train, held = split_holdout(rows, config.holdout, config.seed)
    if not train:
        raise UserError("no training rows left after the held-out split; lower holdout")
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    trainable = rm.train_top_layers(config.train_layers)
    params = [p for p in rm.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(param_groups(params, config.weight_decay), lr=config.lr)
    encoded = [rm.encode(r.triple) for r in train]
    labels = torch.tensor([float(bool(r.label)) for r in train])  # [N]
    held_encoded = [rm.encode(r.triple) for r in held]
    # every epoch runs only the trained layers when the frozen ones can be cached (rm_trunk)
    trunk, states = _frozen_trunk(rm, config, encoded + held_encoded, progress)
    states, held_states = states[:len(encoded)], states[len(encoded):]
    steps_per_epoch = math.ceil(math.ceil(len(train) / config.batch_size) / config.grad_accum)
    total = steps_per_epoch * config.epochs
    warmup = math.ceil(config.warmup_ratio * total)
    report = TrainReport(len(train), len(held), trainable, cached_trunk=trunk is not None)
    for epoch in range(1, config.epochs + 1):
        t0 = time.perf_counter()
        rm.model.train()
        batches = length_grouped_batches([len(e) for e in encoded], config.batch_size, rng)
        bar = progress_bar(len(train), f"epoch {epoch}/{config.epochs}", progress)
        loss_sum, seen = 0.0, 0
        for b, idx in enumerate(batches):
            if trunk is not None:
                logits = trunk.logits([states[i] for i in idx])  # [B]
            else:
                logits = rm.logits_of_ids([encoded[i] for i in idx])  # [B]
            loss = bce_loss(logits, labels[idx].to(logits.device))
            (loss / config.grad_accum).backward()
            loss_sum += loss.item() * len(idx)
            seen += len(idx)
            if (b + 1) % config.grad_accum == 0 or b + 1 == len(batches):
                for g in optimizer.param_groups:
                    g["lr"] = config.lr * lr_factor(report.optimizer_steps, total, warmup)
                torch.nn.utils.clip_grad_norm_(params, config.max_grad_norm)
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
                report.optimizer_steps += 1
            bar.update(len(idx))
            if hasattr(bar, "set_postfix"):
                bar.set_postfix(loss=f"{loss_sum / seen:.4f}", refresh=False)
        bar.close()
        if not math.isfinite(loss_sum):
            raise UserError(f"training diverged in epoch {epoch} (loss {loss_sum}); lower lr")
        metrics = None
        if held and trunk is not None:
            metrics = _cached_metrics(trunk, held_states, held, 2 * config.batch_size)
        elif held:
            metrics = evaluate(rm, held, batch_size=2 * config.batch_size)
        ep = EpochReport(epoch, loss_sum / seen, time.perf_counter() - t0, metrics)
        report.epochs.append(ep)
        if on_epoch:
            on_epoch(ep)
    rm.model.eval()
    return report


# ------------------------------------------------------------------ pairwise (Cooper, Stage 2)

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
    margin = torch.where(mask, pos_logits - neg_logits, torch.zeros_like(pos_logits))  # [P]
    per_pair = torch.where(mask, -F.logsigmoid(margin), torch.zeros_like(margin))  # [P]
    count = float(normalizer) if normalizer is not None else float(mask.sum())
    return per_pair.sum() / max(count, 1.0)


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
