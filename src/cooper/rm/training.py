"""Offline reward-model training: BCE on labelled triples.

``docs/method.md`` "VerifyRM: the reward model" describes the model and its offline training.

Binary cross-entropy on the logit (:func:`cooper.rm.losses.bce_loss`), AdamW, with the settings
of :class:`cooper.config.rm.RMTrainConfig`. Defaults are the released settings (lr 2e-5, weight
decay 0.01, 3 epochs); the warm-up then cosine schedule and clipping at 1.0 are ours (the paper
does not state them). Batches are built from length-sorted chunks of a shuffled order, so a batch
holds sequences of similar length and little padding (the "group by length" sampler of
transformers' Trainer). The held-out split is taken by question, so the correct and wrong
completions of one problem never sit on both sides. When only the top layers are trained, the
frozen ones run once (:mod:`cooper.rm.trunk`).

Cooper's online pairwise update is in :mod:`cooper.rm.update`.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from cooper.errors import UserError
from cooper.rm.losses import bce_loss
from cooper.rm.metrics import BinaryMetrics, binary_metrics
from cooper.rm.model import RewardModel, progress_bar
from cooper.rm.trunk import FrozenTrunk, unsupported

if TYPE_CHECKING:
    import torch

    from cooper.config.rm import RMTrainConfig
    from cooper.types import LabelledTriple

log = logging.getLogger(__name__)


def param_groups(params: Sequence[torch.nn.Parameter], weight_decay: float) -> list[dict]:
    """AdamW groups: decay on matrices, none on vectors (norm scales, biases), as usual.

    Shared with the online update (:mod:`cooper.rm.update`), so both decay the same weights.
    """
    return [{"params": [p for p in params if p.dim() >= 2], "weight_decay": weight_decay},
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]


def adamw(params: Sequence[torch.nn.Parameter], weight_decay: float, lr: float
          ) -> torch.optim.AdamW:
    """AdamW over :func:`param_groups`, with torch's fused kernel wherever it runs (CPU and
    CUDA): one pass over every tensor instead of a loop of small operations per tensor. On the
    CPU testbed's reward model (14M trained weights) a step took 0.10 s unfused and 0.03 s fused."""
    import torch

    fused = all(p.device.type in ("cpu", "cuda") and p.dtype.is_floating_point for p in params)
    return torch.optim.AdamW(param_groups(params, weight_decay), lr=lr, fused=fused or None)


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
    cached_trunk: bool = False  # frozen layers run once, not every epoch (cooper.rm.trunk)
    optimizer_steps: int = 0
    epochs: list[EpochReport] = field(default_factory=list)


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


def _frozen_trunk(rm: RewardModel, config: RMTrainConfig, encoded: list[list[int]],
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
    diff, tolerance = trunk.agreement([encoded[i] for i in probe], [states[i] for i in probe])
    if diff > tolerance:
        log.warning("frozen-layer cache disagrees with the full model by %.2g (tolerance "
                    "%.2g); running full forward passes instead", diff, tolerance)
        return None, []
    return trunk, states


def train_bce(rm: RewardModel, rows: Sequence[LabelledTriple], config: RMTrainConfig, *,
              progress: bool = True,
              on_epoch: Callable[[EpochReport], None] | None = None) -> TrainReport:
    """Train ``rm`` in place with BCE on labelled rows; held-out metrics after each epoch."""
    import torch

    if any(r.label is None for r in rows):
        raise UserError("training needs a label on every row")
    if rm.temperature != 1.0:  # a fitted temperature belongs to the weights it was fitted on
        log.info("training resets the fitted temperature %.4g to 1; refit it afterwards with "
                 "`cooper rm calibrate`", rm.temperature)
        rm.temperature = 1.0
    train, held = split_holdout(rows, config.holdout, config.seed)
    if not train:
        raise UserError("no training rows left after the held-out split; lower holdout")
    torch.manual_seed(config.seed)
    rng = random.Random(config.seed)
    trainable = rm.train_top_layers(config.train_layers)
    # a bfloat16 model's trained weights are stepped in float32 (master weights), as the online
    # update's are (rm.update): at lr 2e-5 most bfloat16 weights would round back unchanged
    cast = rm.keep_trainable_in_float32()
    if cast:
        log.info("%d trainable tensors kept in float32 (master weights); the forward runs in %s",
                 cast, next(p.dtype for p in rm.model.parameters()))
    params = [p for p in rm.model.parameters() if p.requires_grad]
    optimizer = adamw(params, config.weight_decay, config.lr)
    encoded = [rm.encode(r.triple) for r in train]
    labels = torch.tensor([float(bool(r.label)) for r in train])  # [N]
    held_encoded = [rm.encode(r.triple) for r in held]
    # every epoch runs only the trained layers when the frozen ones can be cached (rm.trunk)
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
