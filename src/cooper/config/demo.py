"""Settings of ``cooper demo``: small enough for minutes on a laptop CPU.

They live here, not beside the demo, so that ``cooper demo --help`` reads its defaults without
importing the training stack.
"""

from __future__ import annotations

from dataclasses import dataclass

from cooper.errors import UserError


@dataclass(frozen=True)
class DemoSettings:
    """What ``cooper demo`` runs: small enough for minutes on a laptop CPU."""

    out: str = "runs/demo"
    """folder for every artefact"""
    rm_triples: int = 160
    """labelled triples for the reward model (half correct)"""
    # 128 small steps at a high rate for the top layers: held-out accuracy near 1.0 on this
    # task in about two minutes (1 epoch at the library's default rate stays at chance)
    rm_epochs: int = 6
    """BCE epochs of the reward model over its triples"""
    rm_lr: float = 2e-4
    """reward-model learning rate"""
    rm_train_layers: int = 4
    """top decoder layers trained (the rest frozen): minutes, not hours"""
    rm_max_length: int = 384
    """reward-model input tokens"""
    dataset: str = "arith_small"
    """the task of every stage"""
    eval_problems: int = 16
    """test problems, evaluated before and after"""
    eval_max_new_tokens: int = 128
    """generated tokens per evaluation sample"""
    steps: int = 4
    """Cooper steps"""
    seed: int = 0
    """seed of the data, the reward-model training, sampling and RL"""

    def __post_init__(self):
        for name in ("rm_triples", "rm_epochs", "eval_problems", "eval_max_new_tokens", "steps"):
            if getattr(self, name) < 1:
                raise UserError(f"demo {name} must be >= 1, got {getattr(self, name)}")
        if self.rm_triples % 2:
            raise UserError(f"rm_triples must be even (gold + perturbed pairs), got {self.rm_triples}")
