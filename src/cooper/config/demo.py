"""Settings of ``cooper demo``: small enough for minutes on a laptop CPU.

They live here, not beside the demo, so that ``cooper demo --help`` reads its defaults without
importing the training stack.
"""

from __future__ import annotations

from dataclasses import dataclass

from cooper.errors import UserError

DTYPES = ("auto", "float32", "bfloat16")
RM_RECIPES = {"bfloat16": (4, 2e-4), "float32": (4, 2e-4)}
"""(epochs, learning rate) of the reward model's training in each precision, unless set: the
same 4 epochs at 2e-4 in both. A float32 epoch takes longer (the whole demo in 10:19-11:07 on a
2-core AMD EPYC, 7:33-7:42 on a 2-core Xeon, against 5:50-6:00 and 6:12-6:22 in bfloat16); the
shorter float32 stages tried each left the reward model not trusted in a seed: 2 epochs at 3e-4,
and the top 2 layers trained instead of 4 (docs/reward_model.md, "The demo's reward model")"""


@dataclass(frozen=True)
class DemoSettings:
    """What ``cooper demo`` runs: small enough for minutes on a laptop CPU."""

    out: str = "runs/demo"
    """folder for every artefact"""
    # the recipe's 2,000 rows (docs/reward_model.md, "The demo's reward model"): with 400 the
    # model missed the bars by far in every seed; on the recipe's whole model 2,000 rows take
    # about 8 minutes to train in float32 on 2 cores, so the demo trains the embedded model's
    # first 24 layers, the top 4 of them, for 4 epochs, in bfloat16 where the CPU computes it
    # natively (RM_RECIPES)
    rm_triples: int = 2000
    """labelled rows for the reward model, from ``cooper data build``'s default mix (half
    correct: gold solutions in several forms and the embedded model's verified completions;
    half wrong: its wrong completions, changed answers, cut-off and degenerate text, another
    problem's solution, ...)"""
    rm_samples: str = "embedded"
    """the embedded model's completions in the mix: ``embedded`` (the ones that ship for the
    task), ``none`` (the gold-only mix), or a ``cooper data collect`` file"""
    rm_epochs: int | None = None
    """BCE epochs of the reward model over its rows (at a high rate for the top layers: 1 epoch
    at the library's default rate stays at chance); None: :data:`RM_RECIPES` of the precision"""
    rm_lr: float | None = None
    """reward-model learning rate; None: :data:`RM_RECIPES` of the precision"""
    rm_train_layers: int = 4
    """top decoder layers trained (the rest frozen, their output computed once)"""
    rm_trunk: int | None = 24
    """the reward model on the embedded model's first K decoder layers (of 30; the testbed's
    ``embedded-trunk-K``); None: the whole model, as the recipe"""
    dtype: str = "auto"
    """compute precision of the reward model (its training, checks and updates) and of the
    Cooper run's policy: ``auto`` takes bfloat16 where the CPU multiplies it in hardware
    (AVX512-BF16 or AMX; about 2.8 times float32's speed) and float32 elsewhere, where bfloat16
    is emulated and slower; or ``float32`` / ``bfloat16`` by name. Trained weights stay float32
    (master weights) either way"""
    rm_max_length: int = 384
    """reward-model input tokens"""
    dataset: str = "arith_small"
    """the task of every stage"""
    suite_problems: int = 40
    """test problems of the robustness suite run on the reward model before RL: every kind of
    attack gets one item per problem, so a 5% bar for a kind means at most 2 of 40"""
    warm_steps: int = 12
    """steps of the policy's warm start on the task's worked solutions (``4 + 7 = 11. The answer
    is \\boxed{11}.``) before Cooper: the embedded model as it ships is right on 2-6% of the
    stage's rollouts, too seldom for a group to hold a verified-correct one; a short warm start
    leaves it right often, not always, so that most groups hold a right and a wrong rollout.
    0: the embedded model as it ships"""
    warm_batch: int = 16
    """worked solutions per warm-start step"""
    warm_lr: float = 1e-4
    """warm-start learning rate (AdamW, constant)"""
    warm_layers: int = 4
    """top decoder layers of the policy the warm start trains (of 30)"""
    rollout_tokens: int = 48
    """tokens a rollout of the warm-started policy may take in the Cooper stage (its answers take
    about 20; a rollout still going at 48 rambles and is wrong): every step generates until its
    longest rollout stops, so the cap sets the step's time. The embedded model as it ships
    (``warm_steps`` 0) keeps the preset's 128"""
    steps: int = 6
    """Cooper steps"""
    negatives: str = "rollouts"
    """rm_update.negatives of the Cooper run: the policy's own wrong rollouts, which need no
    decoding (the paper's assistant-written negatives: ``assistant``)"""
    seed: int = 0
    """seed of the data, the reward-model training, sampling and RL"""

    def __post_init__(self):
        for name in ("rm_triples", "rm_epochs", "suite_problems", "steps", "warm_batch",
                     "warm_layers", "rollout_tokens"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise UserError(f"demo {name} must be >= 1, got {getattr(self, name)}")
        if self.warm_steps < 0:
            raise UserError(f"demo warm_steps must be >= 0 (0: no warm start), got "
                            f"{self.warm_steps}")
        if self.rm_trunk is not None and self.rm_trunk < 1:
            raise UserError(f"demo rm_trunk must be >= 1 (the embedded model's first K layers) "
                            f"or None (the whole model), got {self.rm_trunk}")
        if self.dtype not in DTYPES:
            raise UserError(f"demo dtype must be one of {', '.join(DTYPES)}, got {self.dtype!r}")
        if self.rm_triples % 2:
            raise UserError(f"rm_triples must be even (half correct, half wrong), got "
                            f"{self.rm_triples}")
        if self.negatives not in ("assistant", "rollouts", "both"):
            raise UserError(f"negatives must be assistant, rollouts or both, got "
                            f"{self.negatives!r}")
