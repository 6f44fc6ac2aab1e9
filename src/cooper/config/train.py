"""Settings of ``cooper train``: one dataclass per section, a docstring per field.

A run is configured by a preset (a YAML file that lists only what differs from the defaults
below) plus ``section.key=value`` overrides on the command line, applied in that order. Defaults
follow the Cooper paper (``method.md``, Part 2). Every key is checked: an unknown key, a value of
the wrong type or an inconsistent combination stops with a message that names the fix. Nothing is
silently rewritten; values derived from others are computed in :meth:`TrainConfig.derived`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from cooper.config.engine import (
    ConfigError,
    apply_settings,
    choice,
    get_key,
    parse_overrides,
    preset_path,
    read_settings_file,
)
from cooper.config.engine import field_docs as engine_field_docs
from cooper.config.protocol import PAPER_TEMPERATURE, PAPER_TOP_P
from cooper.infra.models import DEFAULT_MODEL


@dataclass
class PolicyConfig:
    model: str = DEFAULT_MODEL
    """policy checkpoint: the embedded default, a local folder or a Hub id"""
    lr: float = 1e-6
    """policy learning rate (paper: 1e-6)"""
    warmup_steps: int = 20
    """linear learning-rate warm-up steps (paper: 20)"""
    kl_coef: float = 0.001
    """weight of the KL-to-reference loss term, low-variance k3 estimator (paper: 0.001)"""
    clip_eps: float = 0.2
    """PPO clip range (paper: 0.2)"""
    loss_type: str = "dapo"
    """TRL loss aggregation; 'dapo' is the token-mean over the batch that the paper uses"""
    max_grad_norm: float = 1.0
    """policy gradient clipping"""
    dtype: str = "float32"
    """weights dtype: float32 (CPU), bfloat16 (GPU)"""
    gradient_checkpointing: bool = False
    """trade compute for memory on large policies"""


@dataclass
class DataConfig:
    dataset: str = "gsm8k"
    """training problems: gsm8k, svamp, math500, or a .jsonl/.json/.parquet file"""
    split: str = "train"
    """split of a bundled dataset"""
    limit: int | None = None
    """use only the first N problems"""
    question_field: str = "question"
    """question column of a local file"""
    answer_field: str = "answer"
    """reference-answer column of a local file"""
    id_field: str | None = None
    """id column of a local file (default: row number)"""
    skip_bad: bool = False
    """skip malformed rows of a local file (counted) instead of stopping"""


@dataclass
class RolloutConfig:
    prompts_per_step: int = 4
    """B: prompts per optimiser step, over all processes (paper: 4)"""
    samples_per_prompt: int = 16
    """G: completions per prompt, the GRPO group (paper: 16)"""
    micro_batch_size: int = 8
    """completions per forward/backward pass on each process"""
    max_prompt_length: int = 512
    """prompt tokens kept (longer prompts are cut from the left by TRL)"""
    max_completion_length: int = 512
    """generated tokens per completion (paper: 512)"""
    temperature: float = 1.0
    """sampling temperature of training rollouts (paper: 1.0)"""
    top_p: float = 1.0
    """nucleus sampling of training rollouts"""
    use_vllm: bool = False
    """generate rollouts with vLLM (GPU)"""
    vllm_mode: str = "colocate"
    """'colocate' (vLLM inside each training process) or 'server' (trl vllm-serve)"""
    vllm_server_base_url: str | None = None
    """URL of a running `trl vllm-serve` in server mode"""
    vllm_gpu_memory_utilization: float = 0.3
    """GPU memory share of colocated vLLM"""


@dataclass
class RewardConfig:
    mode: str = "cooper"
    """'rule' (verifier only), 'rm' (fixed reward model) or 'cooper' (reward model updated online)"""
    model: str | None = None
    """reward-model folder (from `cooper rm train`); required in rm and cooper modes"""
    verifier_mode: str = "strict"
    """answer extraction for the verifier: 'strict' (boxed, ####, 'answer is') or 'lenient'"""
    verifier_timeout_s: float = 5.0
    """hard wall-clock limit of one verification"""
    score_batch_size: int = 16
    """reward-model scoring batch size"""
    max_length: int | None = None
    """reward-model input tokens (None: what it was trained with; the completion's end is kept)"""
    monitor: bool = True
    """in rule mode, also score with the reward model (weight 0) to log agreement and gap"""


@dataclass
class RMUpdateConfig:
    lr: float = 1e-5
    """reward-model learning rate (paper: 1e-5, constant)"""
    weight_decay: float = 0.01
    """AdamW weight decay (paper: 0.01)"""
    max_grad_norm: float = 1.0
    """reward-model gradient clipping (paper: 1.0)"""
    positives_per_prompt: int = 1
    """verified-correct completions used as positives per prompt per step (paper: 1)"""
    positive_choice: str = "first"
    """which correct completion: 'first' (released code) or 'random'"""
    max_attempts: int = 3
    """assistant attempts per negative before falling back or dropping the pair (paper: 3)"""
    micro_batch_size: int = 8
    """pairs per forward/backward of the reward-model update"""
    pair_metrics: bool = True
    """in rule and rm modes, still build the step's pairs to log the reward model's pair accuracy"""
    train_layers: int | None = None
    """update only the top k decoder layers and the score head (None = every layer, as in the
    paper); the rest stay frozen: less memory and a shorter backward pass on a laptop"""


@dataclass
class AssistantConfig:
    backend: str = "local"
    """'local' (a model on this machine), 'endpoint' (OpenAI-compatible server) or 'rewrite' (rule-based)"""
    model: str | None = None
    """local: checkpoint (None = the frozen reference policy, no extra weights); endpoint: model name"""
    base_url: str | None = None
    """endpoint URL, e.g. http://127.0.0.1:8000/v1"""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key (never logged)"""
    concurrency: int = 8
    """endpoint requests in flight"""
    timeout_s: float = 60.0
    """endpoint request timeout"""
    max_retries: int = 2
    """endpoint retries per request"""
    max_new_tokens: int = 512
    """longest negative the assistant may write"""
    temperature: float = 0.7
    """assistant sampling temperature"""
    fallback: bool = True
    """rewrite the final answer by rule when the assistant gives no valid negative"""
    attempts_per_call: int = 0
    """proposals per positive asked at once (0 = all rm_update.max_attempts for a local model,
    which decodes a small batch at little more per token than one sequence; one at a time for an
    endpoint)"""
    batch_size: int = 16
    """local assistant: sequences decoded together"""
    background: bool | None = None
    """write negatives while the policy updates instead of after it (None = an endpoint does, a
    local model does not: on a CPU it competes with the policy update for the same cores)"""


@dataclass
class ValidationConfig:
    dataset: str = "gsm8k"
    """held-out problems scored by the verifier"""
    split: str = "test"
    """split of a bundled dataset"""
    limit: int = 64
    """held-out problems per validation"""
    every_steps: int = 0
    """validate every k steps (0 = only before the first and after the last step)"""
    samples: int = 1
    """samples per problem"""
    temperature: float = PAPER_TEMPERATURE
    """paper protocol: 0.7"""
    top_p: float = PAPER_TOP_P
    """paper protocol: 0.95"""
    max_new_tokens: int = 512
    """generated tokens per validation sample"""
    enabled: bool = True
    """run validation at all"""
    rm_probe: str | None = None
    """labelled triples file scored by the current reward model at every validation (val/rm_probe_*)"""


@dataclass
class TrainConfig:
    output_dir: str = "runs/cooper"
    """run folder: metrics.jsonl, checkpoints, final policy and reward model"""
    seed: int = 0
    """seed of data order, sampling and negatives"""
    max_steps: int = 200
    """optimiser steps"""
    save_steps: int = 0
    """checkpoint every k steps (0 = only at the end)"""
    save_total_limit: int = 2
    """checkpoints kept"""
    report_to: str = "tensorboard"
    """TRL/transformers logging backends, comma-separated ('none' for only metrics.jsonl)"""
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    rm_update: RMUpdateConfig = field(default_factory=RMUpdateConfig)
    assistant: AssistantConfig = field(default_factory=AssistantConfig)
    validation: ValidationConfig = field(default_factory=ValidationConfig)

    def validate(self, num_processes: int = 1) -> TrainConfig:
        """Cross-field checks; raises :class:`ConfigError` naming the fix."""
        choice("reward.mode", self.reward.mode, ("rule", "rm", "cooper"))
        choice("reward.verifier_mode", self.reward.verifier_mode, ("strict", "lenient"))
        choice("assistant.backend", self.assistant.backend, ("local", "endpoint", "rewrite"))
        choice("rm_update.positive_choice", self.rm_update.positive_choice, ("first", "random"))
        choice("rollout.vllm_mode", self.rollout.vllm_mode, ("colocate", "server"))
        if self.reward.mode in ("rm", "cooper") and not self.reward.model:
            raise ConfigError(
                f"reward.mode={self.reward.mode} needs a reward model: set reward.model=DIR to a "
                "folder from `cooper rm train` (or any causal LM checkpoint to start from scratch)")
        if self.validation.rm_probe and not self.reward.model:
            raise ConfigError("validation.rm_probe scores the reward model, but there is none: "
                              "set reward.model=DIR or drop validation.rm_probe")
        if self.assistant.backend == "endpoint" and not (self.assistant.base_url and self.assistant.model):
            raise ConfigError("assistant.backend=endpoint needs assistant.base_url=URL and "
                              "assistant.model=NAME")
        for key in ("max_steps", "rollout.prompts_per_step", "rollout.samples_per_prompt",
                    "rollout.micro_batch_size", "rm_update.max_attempts",
                    "rm_update.positives_per_prompt", "rm_update.micro_batch_size",
                    "assistant.batch_size", "validation.samples", "validation.limit"):
            if get_key(self, key) < 1:
                raise ConfigError(f"{key} must be >= 1, got {get_key(self, key)}")
        if self.rm_update.train_layers is not None and self.rm_update.train_layers < 1:
            raise ConfigError("rm_update.train_layers must be >= 1 (or none for every layer), "
                              f"got {self.rm_update.train_layers}")
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

    def derived(self, num_processes: int = 1) -> dict[str, int]:
        """Values computed from the settings, in one place (TRL's batch arithmetic)."""
        total = self.rollout.prompts_per_step * self.rollout.samples_per_prompt
        return {"completions_per_step": total,
                "gradient_accumulation_steps": total // (self.rollout.micro_batch_size * num_processes)}

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ loading

def load_config(preset: str | None = None, overrides: list[str] | None = None) -> TrainConfig:
    """Defaults, then the preset's YAML, then ``key=value`` overrides."""
    cfg = TrainConfig()
    if preset:
        apply_settings(cfg, read_settings_file(preset_path(preset)))
    apply_settings(cfg, parse_overrides(overrides or []))
    return cfg


def field_docs() -> dict[str, str]:
    """Every ``cooper train`` setting's dotted name -> its one-line docstring."""
    return engine_field_docs(TrainConfig)
