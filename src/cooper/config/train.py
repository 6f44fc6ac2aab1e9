"""Settings of ``cooper train``: :class:`TrainConfig`, which gathers one dataclass per section.

A run is configured by a preset (a YAML file that lists only what differs from the defaults below)
plus ``section.key=value`` overrides on the command line, applied in that order. Defaults follow the
Cooper paper (``docs/method.md`` "One Cooper step"). Every key is checked: an unknown key, a value
of the wrong type or an inconsistent combination stops with a message that names the fix. Nothing is
silently rewritten; values derived from others are computed in :meth:`TrainConfig.derived`.

The sections live beside this module, each field with its docstring (which ``--help`` and the
docs show): :mod:`.sections` (policy, data, rollout, assistant, validation) and
:mod:`.reward_sections` (reward, rm_update, judge); what ``reward.mode`` means is
:mod:`.reward_modes`. The checks that span sections are here, in :class:`TrainConfig`, with the
loading of a preset (:func:`load_config`).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from typing import Any

from cooper.config.engine import (
    ConfigError,
    apply_settings,
    choice,
    get_key,
    parse_overrides,
    preset_path,
    read_preset,
)
from cooper.config.engine import field_docs as engine_field_docs
from cooper.config.reward_modes import (
    JUDGED,
    MODES,
    UPDATING_MODES,
    RewardPlan,
    Stage2,
    reward_plan,
)
from cooper.config.reward_sections import JudgeConfig, RewardConfig, RMUpdateConfig
from cooper.config.sections import (
    AssistantConfig,
    DataConfig,
    PolicyConfig,
    RolloutConfig,
    ValidationConfig,
)

# policy.loss_type: what TRL 1.16's GRPOTrainer computes (GRPOConfig.loss_type)
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")
# report_to: transformers' logging integrations (INTEGRATION_TO_CALLBACK), kept here so that
# checking settings imports no transformers
REPORT_BACKENDS = ("none", "tensorboard", "wandb", "mlflow", "comet_ml", "neptune", "trackio",
                   "azure_ml", "codecarbon", "clearml", "dagshub", "flyte", "dvclive", "swanlab",
                   "kubeflow")


@dataclass
class TrainConfig:
    output_dir: str = "runs/cooper"
    """run folder: metrics.jsonl, checkpoints, final policy and reward model"""
    seed: int = 0
    """seed of data order, sampling and negatives"""
    max_steps: int = 200
    """optimiser steps"""
    save_steps: int = 0
    """checkpoint every k steps, for --resume (0: none; the policy and reward model are saved
    at the end either way)"""
    save_total_limit: int = 2
    """checkpoints kept"""
    keep_policy_steps: str | None = None
    """comma-separated steps after which the policy alone (weights and tokenizer) is saved in OUTPUT/policy-steps/step-N and kept, e.g. to score the last steps and not only the last one; None: none"""
    report_to: str = "tensorboard"
    """TRL/transformers logging backends, comma-separated ('none' for only metrics.jsonl)"""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    rm_update: RMUpdateConfig = field(default_factory=RMUpdateConfig)
    assistant: AssistantConfig = field(default_factory=AssistantConfig)
    judge: JudgeConfig = field(default_factory=JudgeConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def policy_steps(self) -> list[int]:
        """The steps of ``keep_policy_steps``, sorted; a clear error for anything else."""
        text = self.keep_policy_steps
        if text is None or not str(text).strip():
            return []
        try:
            steps = sorted({int(s) for s in str(text).split(",") if s.strip()})
        except ValueError:
            steps = [0]
        if not 1 <= steps[0] <= steps[-1] <= self.max_steps:
            raise ConfigError(f"keep_policy_steps={text!r}: list steps between 1 and max_steps="
                              f"{self.max_steps} separated by commas, e.g. 400,450,500")
        return steps

    def resolve(self) -> TrainConfig:
        """Give the settings left at None their ``reward.mode``'s value (in place; again is a
        no-op): after it every setting holds what the run uses, as ``--print-config`` shows."""
        choice("reward.mode", self.reward.mode, MODES)
        self.rm_update = self.rm_update.resolved(self.reward.mode)
        if self.judge.counterfactual is None:
            self.judge.counterfactual = (JUDGED["judge.counterfactual"]
                                         if self.reward.mode == "judged" else False)
        if self.reward.hybrid_scores is None:
            self.reward.hybrid_scores = (JUDGED["reward.hybrid_scores"]
                                         if self.reward.mode == "judged" else "rejected")
        return self

    def check_reward(self, *, has_rm: bool, has_judge: bool = False) -> TrainConfig:
        """The checks of what pays the policy and what updates the reward model (``reward``,
        ``rm_update``, ``judge``, ``assistant``), after :meth:`resolve`: the one place both
        ``cooper train`` (:meth:`validate`) and the TRL drop-in check them. ``has_judge``: the
        caller brings a judge object (the drop-in's ``judge=Judge``) instead of ``judge.backend``."""
        self.resolve()
        choice("reward.verifier_mode", self.reward.verifier_mode, ("strict", "lenient", "gold"))
        choice("assistant.backend", self.assistant.backend, ("local", "endpoint", "rewrite"))
        self.rm_update.check()
        self.judge.check()
        plan = self.plan()  # checks reward.hybrid_scores against the mode
        if plan.pays_with_rm and not has_rm:
            raise ConfigError(
                f"reward.mode={self.reward.mode} needs a reward model: set reward.model=DIR to a "
                "folder from `cooper rm train` (or any causal LM checkpoint to start from scratch)")
        self._check_judge_uses(has_judge)
        if self.reward.monitor_every < 1:
            raise ConfigError(f"reward.monitor_every must be >= 1, got {self.reward.monitor_every}")
        return self

    def validate(self, num_processes: int = 1) -> TrainConfig:
        """Cross-field checks; raises :class:`ConfigError` naming the fix."""
        self.check_reward(has_rm=bool(self.reward.model))
        self.policy_steps()  # a bad list fails here, before any model loads
        choice("validation.judge", self.validation.judge, ("rule", "gold"))
        choice("rollout.vllm_mode", self.rollout.vllm_mode, ("colocate", "server"))
        choice("policy.dtype", self.policy.dtype, ("float32", "bfloat16", "float16"))
        choice("policy.scale_rewards", self.policy.scale_rewards, ("group", "batch", "none"))
        choice("policy.reward_aggregation", self.policy.reward_aggregation,
               ("sum_then_normalize", "normalize_then_sum"))
        choice("policy.importance_sampling_level", self.policy.importance_sampling_level,
               ("token", "sequence"))
        if self.validation.rm_probe and not self.reward.model:
            raise ConfigError("validation.rm_probe scores the reward model, but there is none: "
                              "set reward.model=DIR or drop validation.rm_probe")
        # Only where Stage 2 asks it: a preset's assistant section must not block a run whose
        # negatives are the rollouts (the judged arms on the paper's preset).
        if (self.uses_assistant() and self.assistant.backend == "endpoint"
                and not (self.assistant.base_url and self.assistant.model)):
            raise ConfigError("assistant.backend=endpoint needs assistant.base_url=URL and "
                              "assistant.model=NAME (or rm_update.negatives=rollouts, which "
                              "needs no assistant)")
        self._check_values()
        for key in ("max_steps", "policy.num_iterations", "rollout.prompts_per_step",
                    "rollout.samples_per_prompt", "rollout.micro_batch_size",
                    "rollout.max_completion_length",
                    "assistant.batch_size", "validation.samples", "validation.limit"):
            if get_key(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {get_key(self, key)}")
        if self.assistant.attempts_per_call < 0:
            raise ConfigError("assistant.attempts_per_call must be >= 0 (0 = automatic), got "
                              f"{self.assistant.attempts_per_call}")
        if self.rollout.samples_per_prompt < 2:
            raise ConfigError("rollout.samples_per_prompt must be >= 2: GRPO compares samples "
                              "within a group")
        total = self.rollout.prompts_per_step * self.rollout.samples_per_prompt
        per_pass = self.rollout.micro_batch_size * num_processes
        if total % per_pass:
            raise ConfigError(
                f"prompts_per_step x samples_per_prompt = {total} completions per step must be a "
                f"multiple of micro_batch_size x processes = {per_pass}; change "
                "rollout.micro_batch_size (or the number of processes)")
        return self

    def _check_values(self) -> None:
        """Values TRL, torch or the verifier would refuse only mid-run, with a traceback, or
        not at all (a top_p over 1 samples as 1)."""
        if not str(self.output_dir).strip():
            raise ConfigError("output_dir is empty: set output_dir=DIR, the run's folder")
        # a learning rate of 0 is allowed: the step benchmark (bench_cpu) keeps the policy fixed
        for key, zero_ok in (("policy.lr", True), ("rm_update.lr", True),
                             ("rollout.temperature", False), ("reward.verifier_timeout_s", False)):
            value = get_key(self, key)
            if not (math.isfinite(value) and (value >= 0 if zero_ok else value > 0)):
                raise ConfigError(f"{key} must be a finite number {'>=' if zero_ok else '>'} 0, "
                                  f"got {value}")
        if not 0 < self.rollout.top_p <= 1:
            raise ConfigError(f"rollout.top_p must be in (0, 1] (1 samples from every token), got "
                              f"{self.rollout.top_p}")
        choice("policy.loss_type", self.policy.loss_type, LOSS_TYPES)
        for name in filter(None, self.report_to.split(",")):  # as the trainer splits it
            if name not in REPORT_BACKENDS:
                raise ConfigError(f"report_to: {name!r} is not a logging backend; set 'none' "
                                  "(metrics.jsonl alone) or some of: "
                                  f"{', '.join(REPORT_BACKENDS[1:])}, comma-separated")

    def _check_judge_uses(self, has_judge: bool = False) -> None:
        """A judge asked for is configured, and one configured is used."""
        uses = [k for k, on in (("reward.judge_rejected", self.reward.judge_rejected),
                                ("reward.mode=judged" if self.reward.mode == "judged"
                                 else "rm_update.labels=judge", self.rm_update.labels == "judge"))
                if on]
        if uses and self.judge.backend == "none" and not has_judge:
            raise ConfigError(f"{' and '.join(uses)} ask(s) a judge, but judge.backend=none: "
                              "set judge.backend=endpoint (with judge.base_url and judge.model), "
                              "local (judge.model) or gold (testbeds); in the TRL drop-in, "
                              "judge='api:MODEL@URL', 'hf:MODEL' or 'gold'")
        if self.reward.judge_rejected and self.reward.mode != "rule":
            raise ConfigError(f"reward.judge_rejected pays where the rule says no, so it needs "
                              f"reward.mode=rule, not {self.reward.mode}; for a reward model "
                              "taught by the judge use rm_update.labels=judge")
        if self.rm_update.labels == "judge" and self.reward.mode not in UPDATING_MODES:
            raise ConfigError(f"rm_update.labels=judge labels the reward model's update, which "
                              f"reward.mode={self.reward.mode} does not run: use judged, cooper "
                              "or hybrid_cooper")
        if self.reward.judge_pays and self.rm_update.labels != "judge":
            raise ConfigError("reward.judge_pays pays the verdicts Cooper's update asks the judge "
                              "for, so it needs rm_update.labels=judge (reward.mode=judged sets "
                              "it)")
        if self.judge.asking == "adaptive" and self.rm_update.labels != "judge":
            raise ConfigError("judge.asking=adaptive chooses which answers Cooper's update asks "
                              "the judge about, so it needs rm_update.labels=judge (reward.mode="
                              "judged sets it); reward.judge_rejected asks about every rejection")
        if self.rm_update.replay and not self.rm_update.replay_file:
            judged = (" (reward.mode=judged replays 16 by default: give the file, or set "
                      "rm_update.replay=0 where those rows are not at hand)"
                      if self.reward.mode == "judged" else "")
            raise ConfigError("rm_update.replay needs rm_update.replay_file: the labelled rows "
                              "the reward model was trained on (a `cooper rm train` data file)"
                              + judged)
        if self.rm_update.replay and self.reward.mode not in UPDATING_MODES:
            raise ConfigError(f"rm_update.replay adds rows to the reward model's update, which "
                              f"reward.mode={self.reward.mode} does not run")
        if self.rm_update.rollout_forms and self.reward.mode not in UPDATING_MODES:
            raise ConfigError(f"rm_update.rollout_forms adds pairs to the reward model's update, "
                              f"which reward.mode={self.reward.mode} does not run")

    def plan(self) -> RewardPlan:
        """What pays the policy and what Stage 2 does (:func:`reward_plan`)."""
        return reward_plan(self.reward.mode, has_rm=bool(self.reward.model),
                           pair_metrics=self.rm_update.pair_metrics, monitor=self.reward.monitor,
                           hybrid_scores=self.reward.hybrid_scores,
                           judge_pays=self.reward.judge_pays,
                           rm_verdicts=self.reward.rm_verdicts)

    def uses_assistant(self) -> bool:
        """Stage 2 writes negatives from positives (``rm_update.negatives`` assistant or both)."""
        negatives = self.rm_update.resolved(self.reward.mode).negatives
        return self.plan().stage2 is not Stage2.OFF and negatives != "rollouts"

    def background_negatives(self) -> bool:
        """Write negatives while the policy updates (:meth:`AssistantConfig.in_background`)."""
        return self.assistant.in_background()

    def derived(self, num_processes: int = 1) -> dict[str, int]:
        """Values computed from the settings, in one place (TRL's batch arithmetic)."""
        total = self.rollout.prompts_per_step * self.rollout.samples_per_prompt
        return {"completions_per_step": total,
                "gradient_accumulation_steps": total // (self.rollout.micro_batch_size * num_processes)}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ loading

# A run's config.yaml, like `cooper train --print-config`, records under this key the GRPO values
# its settings give (cooper.rl.trainer.GRPO_PINNED). They are derived, not settings: a file read
# back leaves them out, and `cooper train` checks them against its settings
# (cooper.rl.trainer.check_recorded_grpo), so that an edit of the record is not silently lost.
RECORD = "grpo"


def load_config(preset: str | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Defaults, then the preset's YAML (its ``base:`` chain resolved, a ``grpo:`` record left
    out), then ``key=value`` overrides."""
    cfg = TrainConfig()
    if preset:
        settings = read_preset(preset_path(preset), preset_path)
        settings.pop(RECORD, None)
        apply_settings(cfg, settings)
    apply_settings(cfg, parse_overrides(overrides or []))
    return cfg


def recorded_grpo(preset: str | None) -> dict[str, Any] | None:
    """The ``grpo:`` record of a file that a run or ``--print-config`` wrote, if it has one."""
    if not preset:
        return None
    return read_preset(preset_path(preset), preset_path).get(RECORD)


def field_docs() -> dict[str, str]:
    """Every ``cooper train`` setting's dotted name -> its one-line docstring."""
    return engine_field_docs(TrainConfig)


def experimental_settings() -> set[str]:
    """The dotted names of the settings listed apart by ``cooper train --settings``: testbed
    stand-ins and the paper's finer choices, which a run rarely changes (each section's
    ``EXPERIMENTAL``)."""
    return {f"{f.name}.{key}" for f in dataclasses.fields(TrainConfig)
            if dataclasses.is_dataclass(f.default_factory)
            for key in getattr(f.default_factory, "EXPERIMENTAL", ())}
