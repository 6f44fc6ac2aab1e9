"""Cooper on TRL's GRPOTrainer: the only module that knows TRL's internals.

How the pieces meet (verified on trl 1.16):

- TRL calls every reward function once per generation batch on each process, with that
  process's slice of the rollouts and every dataset column as a keyword argument, from inside
  ``_calculate_rewards``. :class:`CooperTrainer` passes two of its own methods: ``rule`` (the
  verifier) and ``reward_model``. The one not optimised gets weight 0, so it is logged but not
  trained on: every run shows the verifier next to the reward it optimises. A reward model
  passed directly in ``reward_funcs`` would never see the reference answer, hence the methods.
- Stage 1 (:meth:`~cooper.rl.step.CooperReward.score`) runs once per batch: the trainer counts
  its ``_calculate_rewards`` calls and the first reward function called in a batch scores it.
  Keyed by the call, not by the texts, so a batch that repeats an earlier one exactly is scored
  by the current reward model and gets its own Stage 2, and every process agrees on it.
- Stage 2 (:meth:`~cooper.rl.step.CooperReward.update`) runs in ``on_step_end``, after the
  policy's optimiser step and before TRL logs, so step t's rewards came from the reward model
  before its update and the update lands in step t's metrics.
- Everything is built in the constructor: the Cooper reward (its local assistant writes with
  the frozen reference policy TRL has just loaded, so it costs no extra weights), and the
  callbacks, each given the trainer itself.
- Checkpoints are staged and renamed into place (:mod:`cooper.rl.checkpoints`).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any

import torch
from transformers import PrinterCallback, ProgressCallback, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from cooper.config.train import Payer, TrainConfig
from cooper.errors import UserError
from cooper.infra.collective import Collective
from cooper.infra.models import load_causal_lm, load_tokenizer
from cooper.rl.checkpoints import COMPLETE_MARKER, STAGING, rotate, save_reward_model_state
from cooper.rl.console import ConsoleCallback
from cooper.rl.negatives import negative_writer
from cooper.rl.pairs import RolloutStats
from cooper.rl.step import CooperReward, Stage2Stats
from cooper.rl.validation import ValidationCallback
from cooper.types import Rollout
from cooper.verify.verifier import completion_text, verify_batch

log = logging.getLogger(__name__)


# GRPOConfig fields that change the advantage or the policy loss. Each is set from our settings
# (never left to TRL's default, which may change between releases), shown by
# `cooper train --print-config` and recorded in the run's config.yaml.
GRPO_PINNED = ("num_generations", "scale_rewards", "multi_objective_aggregation", "reward_weights",
               "loss_type", "beta", "epsilon", "epsilon_high", "num_iterations",
               "steps_per_generation", "importance_sampling_level", "mask_truncated_completions",
               "temperature", "top_p", "max_completion_length", "learning_rate",
               "lr_scheduler_type", "warmup_steps", "max_grad_norm")


def grpo_kwargs(cfg: TrainConfig, num_processes: int = 1) -> dict[str, Any]:
    """Every ``GRPOConfig`` argument of a run, derived from ``cfg``."""
    r, p = cfg.rollout, cfg.policy
    plan = cfg.plan()
    accumulation = cfg.derived(num_processes)["gradient_accumulation_steps"]
    return dict(
        output_dir=cfg.output_dir, seed=cfg.seed, max_steps=cfg.max_steps,
        learning_rate=p.lr, warmup_steps=p.warmup_steps, lr_scheduler_type="constant_with_warmup",
        beta=p.kl_coef, epsilon=p.clip_eps, epsilon_high=p.clip_eps, loss_type=p.loss_type,
        max_grad_norm=p.max_grad_norm, scale_rewards=p.scale_rewards,
        multi_objective_aggregation=p.reward_aggregation, num_iterations=p.num_iterations,
        importance_sampling_level=p.importance_sampling_level,
        mask_truncated_completions=p.mask_truncated_completions,
        reward_weights=reward_weights(plan.pays, plan.scores_with_rm),
        # policy.dtype is the compute precision: the weights the optimiser steps load in float32
        # (bf16=True autocasts the forward, DeepSpeed/FSDP cast and keep their own float32
        # masters); bfloat16 weights under a plain AdamW at lr 1e-6 would not move
        bf16=p.dtype == "bfloat16", gradient_checkpointing=p.gradient_checkpointing,
        model_init_kwargs={"dtype": "float32"},
        per_device_train_batch_size=r.micro_batch_size,
        gradient_accumulation_steps=accumulation,
        steps_per_generation=accumulation,  # one generation batch per optimiser step
        num_generations=r.samples_per_prompt, max_completion_length=r.max_completion_length,
        temperature=r.temperature, top_p=r.top_p,
        use_vllm=r.use_vllm, vllm_mode=r.vllm_mode, vllm_server_base_url=r.vllm_server_base_url,
        vllm_gpu_memory_utilization=r.vllm_gpu_memory_utilization,
        logging_steps=1, report_to=[x for x in cfg.report_to.split(",") if x and x != "none"] or "none",
        save_strategy="steps" if cfg.save_steps else "no", save_steps=cfg.save_steps or 500,
        save_total_limit=cfg.save_total_limit, eval_strategy="no", log_completions=False,
        disable_dropout=True, remove_unused_columns=False, dataloader_num_workers=0,
        use_cpu=not torch.cuda.is_available(),
    )


def pinned_grpo_settings(cfg: TrainConfig, num_processes: int = 1) -> dict[str, Any]:
    """The :data:`GRPO_PINNED` values of a run (printed and recorded with its settings)."""
    kw = grpo_kwargs(cfg, num_processes)
    return {k: kw[k] for k in GRPO_PINNED}


def reward_weights(pays: Payer, scores_with_rm: bool) -> list[float]:
    """Weights of the reward columns ``[rule, reward_model]`` (or ``[rule]`` alone)."""
    if not scores_with_rm:
        return [1.0]
    return [1.0, 0.0] if pays is Payer.VERIFIER else [0.0, 1.0]


def rule_column(rollouts: list[Rollout], pays: Payer) -> list[float | None]:
    """The verifier's column. When it is only logged (weight 0), a row whose reward-model
    score is not finite must be unscorable in *every* column: TRL then gives it zero advantage
    and leaves it out of its group's mean, whereas a finite verdict beside a NaN score would be
    summed into a reward of 0, the lowest a probability can be."""
    if pays is Payer.VERIFIER:
        return [float(r.correct) for r in rollouts]
    return [float(r.correct) if r.rm_score is not None and math.isfinite(r.rm_score) else None
            for r in rollouts]


def log_rollout_stats(log_metric, stats: RolloutStats, seconds: dict[str, float]) -> None:
    log_metric("reward/rule_mean", stats.rule_mean)
    if stats.rm_mean is not None:
        log_metric("reward/rm_mean", stats.rm_mean)
        log_metric("hacking/gap", stats.gap)
        log_metric("rm/agreement", stats.agreement)
    if stats.top_wrong is not None:
        log_metric("hacking/top_wrong", stats.top_wrong)
    if stats.group_auroc is not None:
        log_metric("rm/group_auroc", stats.group_auroc)
    if stats.rm_mean is not None or stats.nonfinite_scores:  # counted even when all are
        log_metric("reward/nonfinite", stats.nonfinite_scores)
    log_metric("rm/problems_with_positive", stats.problems_with_positive)
    for name, value in seconds.items():
        log_metric(f"perf/{name}", value)


def stage2_metrics(st: Stage2Stats) -> dict[str, float]:
    m = {"rm/positives": st.positives, "rm/pairs": st.pairs,
         "rm/pairs_rollout": st.pairs_rollout, "rm/pairs_assistant": st.pairs_assistant,
         "rm/negatives_ambiguous": st.negatives_ambiguous,
         "rm/valid_negatives": st.valid_negatives,
         "rm/fallback_negatives": st.fallback_negatives, "rm/dropped_pairs": st.dropped,
         "rm/updated": float(st.updated), "rm/skipped_nonfinite": float(st.skipped_nonfinite),
         "perf/negatives": st.seconds_negatives,
         "perf/negatives_total": st.seconds_negatives_total,
         "perf/rm_update": st.seconds_update}
    if st.loss is not None:
        m.update({"rm/loss": st.loss, "rm/pair_acc_before": st.pair_acc_before})
    if st.grad_norm is not None:
        m["rm/grad_norm"] = st.grad_norm
    if st.changed_fraction is not None:
        m["rm/changed_fraction"] = st.changed_fraction
    return m


# ------------------------------------------------------------------ callbacks

class Stage2Callback(TrainerCallback):
    """After each policy optimiser step: the reward-model update and its metrics."""

    def __init__(self, trainer: CooperTrainer):
        self.trainer = trainer

    def on_step_end(self, args, state, control, **kwargs):
        t = self.trainer
        st = t.cooper.update()
        if st is not None:
            t.record({**stage2_metrics(st), **t.cooper.source_metrics()})
        t.record({"perf/step": time.perf_counter() - t.step_started})


class StepTimer(TrainerCallback):
    def __init__(self, trainer: CooperTrainer):
        self.trainer = trainer

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.optimizer_step_done()


class MetricsFileCallback(TrainerCallback):
    """One JSON object per logged step in ``metrics.jsonl`` (main process only)."""

    def __init__(self, path: Path):
        self.path = path

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not (state.is_world_process_zero and logs):
            return
        numbers = {k: v for k, v in logs.items() if isinstance(v, int | float)}
        if "train_runtime" in logs:  # the end-of-training summary, not a step
            (self.path.parent / "train_summary.json").write_text(json.dumps(numbers, indent=1))
            return
        with self.path.open("a") as f:
            f.write(json.dumps({"step": state.global_step, **numbers}) + "\n")


# ------------------------------------------------------------------ the trainer

class CooperTrainer(GRPOTrainer):
    """GRPOTrainer with Cooper's reward, stage timing, atomic checkpoints and the reward
    model's state, all built from one :class:`~cooper.config.train.TrainConfig`."""

    def __init__(self, cfg: TrainConfig, *, model: str, tokenizer, train_dataset,
                 rm=None, updater=None, collective: Collective, num_processes: int = 1,
                 metrics_path: Path | None = None):
        plan = cfg.plan()
        self.step_started = time.perf_counter()
        self._stage_seconds: dict[str, float] = {}
        self._staging_root: str | None = None
        self._batches = 0  # generation batches whose rewards TRL asked for
        self._scored: tuple[int, list[Rollout]] | None = None  # Stage 1 of the current batch
        self._pays = plan.pays
        funcs = [self.rule, self.reward_model] if plan.scores_with_rm else [self.rule]
        super().__init__(model=model, reward_funcs=funcs, train_dataset=train_dataset,
                         processing_class=tokenizer,
                         args=GRPOConfig(**grpo_kwargs(cfg, num_processes)))
        self._check_trainable_precision()
        if cfg.policy.dtype == "bfloat16" and self.ref_model is not None and not self._sharded():
            self.ref_model.to(torch.bfloat16)  # only ever runs forward: half the memory
        verify = partial(verify_batch, mode=cfg.reward.verifier_mode,
                         timeout_s=cfg.reward.verifier_timeout_s)
        negatives = None
        if cfg.uses_assistant():
            negatives = negative_writer(cfg, verify, reference=self._reference_policy(cfg))
        self.cooper = CooperReward(
            cfg, rm=rm, updater=updater, verify=verify, negatives=negatives,
            verify_lenient=partial(verify_batch, mode="lenient",
                                   timeout_s=cfg.reward.verifier_timeout_s),
            collective=collective)
        self.add_callback(Stage2Callback(self))
        self.add_callback(StepTimer(self))
        # one plain line per step instead of TRL's metrics dictionary (cooper -v keeps both)
        if not logging.getLogger("cooper").isEnabledFor(logging.DEBUG):
            self.remove_callback(ProgressCallback)
            self.remove_callback(PrinterCallback)
        self.add_callback(ConsoleCallback())
        if metrics_path is not None:
            self.add_callback(MetricsFileCallback(metrics_path))
        if cfg.validation.enabled:
            self.add_callback(ValidationCallback(self, cfg.validation, cfg.reward, tokenizer))

    def _sharded(self) -> bool:
        """DeepSpeed or FSDP manages the weights (and their float32 master copies)."""
        return (getattr(self.accelerator.state, "deepspeed_plugin", None) is not None
                or getattr(self.accelerator.state, "fsdp_plugin", None) is not None)

    def _check_trainable_precision(self) -> None:
        """Refuse to step low-precision weights with a plain optimiser: an update of about the
        learning rate rounds away on most bfloat16 weights, so training would silently not
        move them."""
        low = [n for n, p in self.model.named_parameters()
               if p.requires_grad and p.dtype in (torch.bfloat16, torch.float16)]
        if low and not self._sharded():
            raise UserError(f"the policy's trainable weights are {self.model.dtype} ({low[0]}, "
                            f"...) and would be stepped by a plain optimiser, which rounds lr-sized "
                            "updates away: load them in float32 (policy.dtype=bfloat16 already "
                            "does, computing in bfloat16), or train under DeepSpeed or FSDP")

    def _reference_policy(self, cfg: TrainConfig):
        """(model, tokenizer) for a local assistant without weights of its own: the frozen
        reference policy TRL holds, or (``policy.kl_coef=0``: TRL keeps none) None, in which
        case the assistant loads its own copy."""
        a = cfg.assistant
        if a.backend != "local" or a.model:
            return None
        plugin = getattr(self.accelerator.state, "deepspeed_plugin", None)
        if plugin is not None and plugin.zero_stage == 3:
            raise UserError("with DeepSpeed ZeRO-3 the reference policy is sharded and cannot "
                            "write negatives: set assistant.backend=endpoint or rewrite, or give "
                            "the local assistant its own weights with assistant.model=PATH")
        tok = load_tokenizer(cfg.policy.model)
        if self.ref_model is not None:
            return self.accelerator.unwrap_model(self.ref_model), tok
        model = load_causal_lm(cfg.policy.model, dtype=cfg.policy.dtype)
        return model.to(self.accelerator.device), tok

    def record(self, metrics: dict[str, float]) -> None:
        """Add values to this step's logged metrics (averaged by TRL at log time)."""
        for k, v in metrics.items():
            self._metrics["train"][k].append(float(v))

    # -- the reward functions TRL calls (Stage 1 runs in whichever is called first)
    def _stage1(self, completions, problem_id, question, reference, log_metric) -> list[Rollout]:
        if self._batches == 0:
            raise RuntimeError("TRL called a reward function outside CooperTrainer."
                               "_calculate_rewards: this TRL version is not supported (see "
                               "tests/test_trl_contract.py)")
        if self._scored is None or self._scored[0] != self._batches:
            rollouts, stats, seconds = self.cooper.score(
                problem_id, question, reference, [completion_text(c) for c in completions],
                step=self.state.global_step, training=self.model.training)
            self._scored = (self._batches, rollouts)
            log_rollout_stats(log_metric, stats, seconds)
        return self._scored[1]

    def rule(self, prompts, completions, problem_id, question, reference, log_metric,
             **_: Any) -> list[float | None]:
        """The verifier's verdicts (the reward in rule mode, logged with weight 0 otherwise)."""
        rollouts = self._stage1(completions, problem_id, question, reference, log_metric)
        return rule_column(rollouts, self._pays)

    def reward_model(self, prompts, completions, problem_id, question, reference, log_metric,
                     **_: Any) -> list[float]:
        """The reward model's probabilities (the reward in rm and cooper modes)."""
        rollouts = self._stage1(completions, problem_id, question, reference, log_metric)
        return self.cooper.rewards(rollouts)

    # -- timing: generation, log-probs (reference and old), rewards, policy update
    def training_step(self, model, inputs, num_items_in_batch):
        if self._step % self.current_gradient_accumulation_steps == 0:
            self.step_started = time.perf_counter()
            self._stage_seconds = {"generation": 0.0, "rewards": 0.0, "score_total": 0.0}
        t = time.perf_counter()
        out = super().training_step(model, inputs, num_items_in_batch)
        self._stage_seconds["train_steps"] = self._stage_seconds.get("train_steps", 0.0) + (
            time.perf_counter() - t)
        return out

    def _generate(self, prompts):
        t = time.perf_counter()
        try:
            return super()._generate(prompts)
        finally:
            self._stage_seconds["generation"] += time.perf_counter() - t

    def _calculate_rewards(self, *args, **kwargs):
        self._batches += 1  # a new batch: the next reward function called runs Stage 1
        t = time.perf_counter()
        try:
            return super()._calculate_rewards(*args, **kwargs)
        finally:
            self._stage_seconds["rewards"] += time.perf_counter() - t

    def _generate_and_score_completions(self, inputs):
        t = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        s = self._stage_seconds
        s["score_total"] += time.perf_counter() - t
        self.record({"perf/generation": s["generation"],
                     "perf/logprobs": s["score_total"] - s["generation"] - s["rewards"]})
        return out

    def optimizer_step_done(self) -> None:
        s = self._stage_seconds
        # forward/backward of every micro-batch plus the optimiser step, minus rollout work
        policy = time.perf_counter() - self.step_started - s["score_total"]
        self.record({"perf/policy_update": policy})

    # -- checkpoints: staged, then renamed into place
    def _get_output_dir(self, trial):
        return self._staging_root or super()._get_output_dir(trial)

    def _save_checkpoint(self, model, trial):
        run_dir = super()._get_output_dir(trial)
        name = f"checkpoint-{self.state.global_step}"
        self._staging_root = os.path.join(run_dir, STAGING)
        staged = os.path.join(self._staging_root, name)
        try:
            # a run killed while staging this very step left files behind: start clean, so
            # none of them can end up in the new checkpoint
            if self.args.should_save and os.path.exists(staged):
                shutil.rmtree(staged)
            self.accelerator.wait_for_everyone()
            super()._save_checkpoint(model, trial)
            self.accelerator.wait_for_everyone()
            if self.args.should_save:
                save_reward_model_state(self.cooper, staged)
                (Path(staged) / COMPLETE_MARKER).write_text(json.dumps(
                    {"step": self.state.global_step, "pays": self.cooper.plan.pays.value,
                     "stage2": self.cooper.plan.stage2.value,
                     "files": sorted(p.name for p in Path(staged).iterdir())}))
                final = os.path.join(run_dir, name)
                if os.path.exists(final):  # a rerun of the same step replaces it
                    shutil.rmtree(final)
                os.replace(staged, final)
                with contextlib.suppress(OSError):  # leave no empty staging folder behind
                    os.rmdir(self._staging_root)
                rotate(run_dir, self.args.save_total_limit)
            self.accelerator.wait_for_everyone()
        finally:
            self._staging_root = None
