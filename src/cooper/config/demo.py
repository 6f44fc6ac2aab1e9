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
    # the recipe builds 2000 rows (about 8 minutes of training alone on 2 cores); 1000 rows
    # took the demo's reward-model stages past 8 minutes and still missed two bars in seed 0
    # (docs/reward_model.md, "The demo's reward model"), so the demo keeps to its budget
    rm_triples: int = 400
    """labelled rows for the reward model, from ``cooper data build``'s default mix (half
    correct: gold solutions in several forms and the embedded model's verified completions;
    half wrong: its wrong completions, changed answers, cut-off and degenerate text, another
    problem's solution, ...)"""
    rm_samples: str = "embedded"
    """the embedded model's completions in the mix: ``embedded`` (the ones that ship for the
    task), ``none`` (the gold-only mix), or a ``cooper data collect`` file"""
    # the project's recipe on this task (docs/reward_model.md, "Measured figures"): 5 epochs
    # at a high rate for the top layers (1 epoch at the library's default rate stays at chance)
    rm_epochs: int = 5
    """BCE epochs of the reward model over its rows"""
    rm_lr: float = 2e-4
    """reward-model learning rate"""
    rm_train_layers: int = 4
    """top decoder layers trained (the rest frozen): minutes, not hours"""
    rm_max_length: int = 384
    """reward-model input tokens"""
    dataset: str = "arith_small"
    """the task of every stage"""
    suite_problems: int = 40
    """test problems of the robustness suite run on the reward model before RL: every kind of
    attack gets one item per problem, so a 5% bar for a kind means at most 2 of 40"""
    steps: int = 6
    """Cooper steps"""
    negatives: str = "rollouts"
    """rm_update.negatives of the Cooper run: the policy's own wrong rollouts, which need no
    decoding (the paper's assistant-written negatives: ``assistant``)"""
    seed: int = 0
    """seed of the data, the reward-model training, sampling and RL"""

    def __post_init__(self):
        for name in ("rm_triples", "rm_epochs", "suite_problems", "steps"):
            if getattr(self, name) < 1:
                raise UserError(f"demo {name} must be >= 1, got {getattr(self, name)}")
        if self.rm_triples % 2:
            raise UserError(f"rm_triples must be even (half correct, half wrong), got "
                            f"{self.rm_triples}")
        if self.negatives not in ("assistant", "rollouts", "both"):
            raise UserError(f"negatives must be assistant, rollouts or both, got "
                            f"{self.negatives!r}")
