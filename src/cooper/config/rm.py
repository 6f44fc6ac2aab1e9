"""Settings of ``cooper rm train``: offline BCE training of the reward model.

Defaults are the released VerifyRM settings (``docs/method.md`` "VerifyRM: the reward model") where
the paper gives them and ours otherwise (marked). Values are checked when the dataclass is built; a
bad one stops with a message. The same defaults are the command line's (:mod:`cooper.cli.rm_cmd`
reads them from here), and :func:`cooper.rm.training.train_bce` takes an instance. Cooper's online
update has its own settings, ``rm_update`` in :mod:`cooper.config.reward_sections`.
"""

from __future__ import annotations

from dataclasses import dataclass

from cooper.errors import UserError


@dataclass(frozen=True)
class RMTrainConfig:
    """Settings of ``cooper rm train`` (BCE on labelled triples)."""

    lr: float = 2e-5
    """AdamW peak learning rate (released setting: 2e-5)"""
    weight_decay: float = 0.01
    """AdamW weight decay on matrices (released setting: 0.01)"""
    epochs: int = 3
    """passes over the training rows (released setting: 3)"""
    batch_size: int = 8
    """sequences per forward pass"""
    grad_accum: int = 1
    """forward passes per optimizer step"""
    warmup_ratio: float = 0.05
    """fraction of optimizer steps with a linear warm-up, then cosine decay (ours)"""
    max_grad_norm: float = 1.0
    """gradient clipping (ours)"""
    holdout: float = 0.1
    """fraction of questions held out for per-epoch metrics (0: train on everything)"""
    seed: int = 0
    """seed of the held-out split, the batch order and torch's random state while training"""
    train_layers: int | None = None
    """train only the top N decoder layers and the score head (None: all, as the paper)"""

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
