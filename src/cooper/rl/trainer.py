"""``cooper train``: TRL's GRPOTrainer with Cooper's reward function, timing and atomic checkpoints.

One Cooper step, top to bottom (``docs/method.md`` "One Cooper step"), as this trainer runs it:

1. TRL generates the rollouts (:meth:`CooperTrainer._generate`, timed);
2. TRL asks for their rewards: the :class:`~cooper.rl.trl_reward.CooperRewardFunction` built
   here verifies them and scores them with the current reward model (Stage 1), then updates the
   reward model on the step's pairs (Stage 2), the rewards already fixed; the verifier's column
   and the reward model's column are two reward functions of TRL, the one that does not pay
   with weight 0, so every run logs the verifier next to the reward it optimises;
3. TRL takes the policy's step on those rewards (its GRPO loss; timed);
4. the :class:`~cooper.rl.trl_reward.CooperCallback`'s ``on_step_end`` (an endpoint's
   background negatives only: Stage 2 after the policy's step), then validation, the metrics
   file, every ``save_steps`` a checkpoint with the reward model inside, and at the steps of
   ``keep_policy_steps`` the policy alone.

This is the public drop-in (:mod:`cooper.rl.trl_reward`) plus what the public API cannot do;
the private parts of TRL it overrides, each for one reason (checked by
``tests/test_trl_contract.py``):

- ``_generate``, ``_generate_and_score_completions``, ``training_step``: the ``perf/*``
  seconds of each stage (TRL reports none to callbacks);
- ``_save_checkpoint``, ``_get_output_dir``: a checkpoint is written into a staging folder,
  completed with the reward model and a marker, then renamed into place, so a run killed while
  saving leaves no half-written ``checkpoint-N`` (a callback's ``on_save`` runs after TRL's
  folder is already in place);
- ``_metrics`` (read, not overridden): :meth:`CooperTrainer.record` adds values measured
  outside a reward call (timings, validation, a background Stage 2) to the step's log;
- ``ref_model`` (read): the local assistant writes negatives with the frozen reference policy.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any

import torch
from transformers import PrinterCallback, ProgressCallback, TrainerCallback
from trl import GRPOConfig, GRPOTrainer

from cooper.config.reward_modes import Payer
from cooper.config.train import TrainConfig
from cooper.errors import UserError
from cooper.infra import cpu_linear
from cooper.infra.collective import Collective
from cooper.infra.models import load_causal_lm, load_tokenizer
from cooper.rl.checkpoints import (
    COMPLETE_MARKER,
    STAGING,
    kept_policy_dir,
    rotate,
    save_reward_model_state,
)
from cooper.rl.console import ConsoleCallback
from cooper.rl.step import CooperReward
from cooper.rl.trl_reward import CooperCallback, CooperRewardFunction, check_trainable_precision
from cooper.rl.validation import ValidationCallback

log = logging.getLogger(__name__)

# TRL (1.16) reads transformers' deprecated `is_gradient_checkpointing` when it unwraps the
# policy for generation; transformers 5 warns once per run, in the middle of the progress bar.
# Harmless (the property still answers; our setting goes in under its new name,
# activation_checkpointing, below), and not ours to fix, so that one warning is not shown.
warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated",
                        category=FutureWarning)


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
        bf16=p.dtype == "bfloat16",
        # transformers 5 renamed it (the old name warns, and TRL sets it by default)
        activation_checkpointing=p.gradient_checkpointing,
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


def check_recorded_grpo(cfg: TrainConfig, recorded: Any, source: str) -> None:
    """A file's ``grpo:`` record (a run's config.yaml, ``--print-config``) against what the
    file's settings ``cfg`` give now.

    TRL's values are always derived from the settings, never read from the record, so a value
    that differs (a hand edit, or a file from another version of cooper) would be silently lost:
    it is refused, naming the setting to change instead. ``steps_per_generation`` follows the
    number of processes, which may differ from the recorded run's, and is not compared.
    """
    from cooper.config.engine import ConfigError

    if not isinstance(recorded, dict):
        raise ConfigError(f"{source}: 'grpo' should be the mapping a run records; delete it")
    now = pinned_grpo_settings(cfg)
    for key, value in recorded.items():
        if key == "steps_per_generation":
            continue
        if key not in now:
            raise ConfigError(f"{source}: grpo.{key} is not a value cooper records "
                              f"({', '.join(now)}); delete it")
        if value != now[key]:
            raise ConfigError(
                f"{source}: grpo.{key} is {value!r}, but the file's settings give {now[key]!r}. "
                "The grpo section records what a run derived from its settings and is not "
                "read: change the cooper setting it comes from (`cooper train --settings` lists "
                "them) and delete the grpo section, or delete it to use these settings as "
                "they are")


def reward_weights(pays: Payer, scores_with_rm: bool) -> list[float]:
    """Weights of the reward columns ``[rule, reward_model]`` (or ``[rule]`` alone)."""
    if not scores_with_rm:
        return [1.0]
    return [1.0, 0.0] if pays is Payer.VERIFIER else [0.0, 1.0]


# ------------------------------------------------------------------ callbacks

class StepTimer(TrainerCallback):
    """``perf/policy_update`` at the optimiser step, ``perf/step`` at the step's end."""

    def __init__(self, trainer: CooperTrainer):
        self.trainer = trainer

    def on_optimizer_step(self, args, state, control, **kwargs):
        self.trainer.optimizer_step_done()

    def on_step_end(self, args, state, control, **kwargs):
        t = self.trainer
        t.record({"perf/step": time.perf_counter() - t.step_started})


class KeptPolicies(TrainerCallback):
    """The policy alone, saved after each of the chosen steps (``keep_policy_steps``) into
    ``OUTPUT/policy-steps/step-N``; written beside it, then renamed, so a folder there is
    complete. It touches no random state: the run is the same with or without it."""

    def __init__(self, trainer: CooperTrainer, steps: list[int]):
        self.trainer, self.steps = trainer, set(steps)

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step not in self.steps:
            return
        final = kept_policy_dir(args.output_dir, state.global_step)
        partial = final.with_name(final.name + ".partial")
        if args.should_save and partial.exists():  # left by a run killed while saving
            shutil.rmtree(partial)
        self.trainer.save_model(str(partial))  # every process: sharded weights need them all
        if args.should_save:
            if final.exists():  # a resumed run redoes this step: the same policy again
                shutil.rmtree(final)
            os.replace(partial, final)
        self.trainer.accelerator.wait_for_everyone()


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
    """GRPOTrainer with Cooper's reward function, stage timing, atomic checkpoints and the
    reward model's state, all built from one :class:`~cooper.config.train.TrainConfig`."""

    def __init__(self, cfg: TrainConfig, *, model: str, tokenizer, train_dataset,
                 rm=None, updater=None, collective: Collective, num_processes: int = 1,
                 metrics_path: Path | None = None):
        plan = cfg.plan()
        self.step_started = time.perf_counter()
        self._stage_seconds: dict[str, float] = {}
        self._staging_root: str | None = None
        # the reward function's engine needs TRL's reference policy (a local assistant writes
        # with it), which exists only once GRPOTrainer is built: it is set just below
        self.reward = CooperRewardFunction.wrap(None, reference_column="reference",
                                                question_column="question",
                                                id_column="problem_id")
        funcs = [self.reward.verifier, self.reward.reward_model] if plan.scores_with_rm else [
            self.reward.verifier]
        super().__init__(model=model, reward_funcs=funcs, train_dataset=train_dataset,
                         processing_class=tokenizer,
                         args=GRPOConfig(**grpo_kwargs(cfg, num_processes)))
        check_trainable_precision(self.model, self._sharded())
        if cfg.policy.dtype == "bfloat16" and self.ref_model is not None and not self._sharded():
            self.ref_model.to(torch.bfloat16)  # only ever runs forward: half the memory
        # TRL loads the policy itself: its float32 CPU linear layers get oneDNN here
        for policy in (self.model, self.ref_model):
            if policy is not None:
                cpu_linear.apply(policy)
        # the one builder, shared with the drop-in (a local assistant writes with TRL's
        # reference policy, which exists only now)
        self.reward.cooper = CooperReward.from_config(
            cfg, rm=rm, updater=updater, collective=collective,
            reference=self._reference_policy(cfg) if cfg.uses_assistant() else None)
        # a background Stage 2 (after the policy's step) is logged in its own step
        self.reward.metrics_sink = self.record
        # checkpoints are staged by _save_checkpoint and restored by the runner
        self.add_callback(CooperCallback(self.reward, checkpoints=False))
        self.add_callback(StepTimer(self))
        # one plain line per step instead of TRL's metrics dictionary (cooper -v keeps both)
        if not logging.getLogger("cooper").isEnabledFor(logging.DEBUG):
            self.remove_callback(ProgressCallback)
            self.remove_callback(PrinterCallback)
        self.add_callback(ConsoleCallback())
        if metrics_path is not None:
            self.add_callback(MetricsFileCallback(metrics_path))
        if cfg.policy_steps():
            self.add_callback(KeptPolicies(self, cfg.policy_steps()))
        if cfg.validation.enabled:
            self.add_callback(ValidationCallback(
                cfg.validation, cfg.reward, tokenizer, policy=lambda: self.model_wrapped,
                accelerator=self.accelerator, engine=self.reward.cooper, log=self.log,
                record=self.record))

    @property
    def cooper(self) -> CooperReward:
        """The Cooper step this trainer's reward function runs."""
        return self.reward.cooper

    def _sharded(self) -> bool:
        """DeepSpeed or FSDP manages the weights (and their float32 master copies)."""
        return (getattr(self.accelerator.state, "deepspeed_plugin", None) is not None
                or getattr(self.accelerator.state, "fsdp_plugin", None) is not None)

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

    # -- timing: generation, log-probs (reference and old), policy update
    def training_step(self, model, inputs, num_items_in_batch):
        if self._step % self.current_gradient_accumulation_steps == 0:
            self.step_started = time.perf_counter()
            self._stage_seconds = {"generation": 0.0, "score_total": 0.0}
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

    def _generate_and_score_completions(self, inputs):
        t = time.perf_counter()
        out = super()._generate_and_score_completions(inputs)
        s = self._stage_seconds
        s["score_total"] += time.perf_counter() - t
        # the rest of the scoring pass: the old and reference policies' log-probabilities
        self.record({"perf/generation": s["generation"],
                     "perf/logprobs": s["score_total"] - s["generation"]
                     - self.reward.last_call_seconds})
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
