"""Periodic validation on held-out problems, scored by the verifier, in every reward mode.

Where the testbed's rule is blind to some right answers (``validation.judge=gold``), the gold
judge scores them and the rule's accuracy is logged beside it (``val/rule_accuracy``).

The authors' release logged no validation metrics for model rewards, exactly where hacking
shows: a policy that fools its reward model keeps a high training reward while its verified
accuracy on held-out problems falls. Validation runs before the first step, every
``validation.every_steps`` steps, and after the last one, with the paper's sampling protocol.
Each process validates a disjoint share of the problems; the counts are summed.

With ``validation.rm_probe`` set, every validation also scores a fixed labelled set of triples
with the *current* reward model (``val/rm_probe_accuracy``, ``val/rm_probe_auroc``): the paper's
question of whether a reward model updated during RL forgets what it knew (its Figure 4 tracks
VerifyBench accuracy over training). In ``rule`` and ``rm`` modes the model is frozen and the
line is flat; there the probe is scored once and its figures repeated, since a function of
unchanged weights cannot change (ours: about 3 s per validation on the CPU testbed).

Validation draws its own random numbers (its samples are seeded from the step) inside a forked
random state: training after a validation continues with the random numbers it would have had
without one, so ``validation.every_steps`` changes how many points the held-out curves have,
never the training run itself (tested).
"""

from __future__ import annotations

import copy
import math
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback
from trl.models import unwrap_model_for_generation

from cooper.config.reward_sections import RewardConfig
from cooper.config.sections import ValidationConfig
from cooper.data.problems import load_problems
from cooper.data.triples import load_triples
from cooper.eval.sampling import evaluate_problems
from cooper.infra.collective import Collective
from cooper.infra.generation import HFGenerator, SamplingConfig
from cooper.rl.pairs import shard
from cooper.rm.metrics import binary_metrics

if TYPE_CHECKING:
    from cooper.rl.step import CooperReward
    from cooper.rm.model import RewardModel

Metrics = dict[str, float]


class ValidationCallback(TrainerCallback):
    """Validates at the start, every ``every_steps`` and at the end. Given only what it uses:
    the policy (a function, as the trainer may wrap it), the accelerator, the Cooper step (its
    reward model and collective), and where results go: ``log`` writes a record of its own (the
    first validation, before any step), ``record`` adds to the step's log."""

    def __init__(self, vcfg: ValidationConfig, reward_cfg: RewardConfig, tokenizer, *,
                 policy: Callable[[], Any], accelerator, engine: CooperReward,
                 log: Callable[[Metrics], None], record: Callable[[Metrics], None]):
        self.vcfg, self.reward_cfg, self.tokenizer = vcfg, reward_cfg, tokenizer
        self.policy, self.accelerator, self.engine = policy, accelerator, engine
        self.log, self.record = log, record
        self.problems = list(load_problems(vcfg.dataset, vcfg.split, limit=vcfg.limit))
        # a bad probe file stops here, before training
        self.probe = load_triples(vcfg.rm_probe).rows if vcfg.rm_probe else None
        self._frozen_probe: Metrics | None = None  # a frozen reward model's probe figures

    def validate(self, step: int) -> dict[str, float]:
        """:meth:`measure` in a forked random state (module docstring)."""
        import torch

        state = random.getstate()
        devices = [torch.cuda.current_device()] if torch.cuda.is_available() else []
        try:
            with torch.random.fork_rng(devices=devices):
                return self.measure(step)
        finally:
            random.setstate(state)

    def measure(self, step: int) -> dict[str, float]:
        """Verified accuracy of the current policy on the held-out problems."""
        c = self.engine.collective
        mine = shard(self.problems, c.rank, c.world_size)
        v = self.vcfg
        sampling = SamplingConfig(n=v.samples, temperature=v.temperature, top_p=v.top_p,
                                  max_new_tokens=v.max_new_tokens, seed=step)
        with unwrap_model_for_generation(self.policy(), self.accelerator) as model:
            was_training = model.training
            model.eval()
            try:
                result = evaluate_problems(
                    HFGenerator(model, copy.copy(self.tokenizer), batch_size=16, name="validation"),
                    mine, sampling, benchmark="validation",
                    verify_mode=v.verify_mode(self.reward_cfg.verifier_mode),
                    verify_timeout_s=self.reward_cfg.verifier_timeout_s) if mine else None
            finally:
                model.train(was_training)
        samples = result.samples if result else []
        correct, n, tokens = c.sum_floats([sum(s.correct for s in samples), len(samples),
                                           sum(s.num_tokens for s in samples)])
        out = {"val/accuracy": correct / max(n, 1), "val/samples": n,
               "val/mean_tokens": tokens / max(n, 1)}
        if v.judge == "gold":  # the gold judge scored: the rule's accuracy beside it
            (rule,) = c.sum_floats([sum(bool(s.rule_correct) for s in samples)])
            out["val/rule_accuracy"] = rule / max(n, 1)
        if self.probe and self.engine.rm is not None:
            if self.engine.updater is not None:  # updated during training: scored every time
                out.update(self.probe_metrics(self.engine.rm, c))
            else:
                self._frozen_probe = self._frozen_probe or self.probe_metrics(self.engine.rm, c)
                out.update(self._frozen_probe)
        return out

    def probe_metrics(self, rm: RewardModel, c: Collective) -> dict[str, float]:
        """The current reward model on the fixed labelled probe (each process scores a share)."""
        mine = shard(self.probe, c.rank, c.world_size)
        scores = rm.score([r.triple for r in mine], batch_size=self.reward_cfg.score_batch_size)
        scored = c.gather_objects([(s, bool(r.label)) for s, r in zip(scores, mine, strict=True)])
        m = binary_metrics([s for s, _ in scored], [y for _, y in scored])
        return {"val/rm_probe_accuracy": m.accuracy,
                "val/rm_probe_auroc": m.auroc if math.isfinite(m.auroc) else 0.5}

    def on_train_begin(self, args, state, control, **kwargs):
        if state.global_step == 0:
            self.log(self.validate(0))

    def on_step_end(self, args, state, control, **kwargs):
        every = self.vcfg.every_steps
        if state.global_step == state.max_steps or (every and state.global_step % every == 0):
            self.record(self.validate(state.global_step))
