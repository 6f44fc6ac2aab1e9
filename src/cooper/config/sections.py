"""The plain sections of ``cooper train``'s settings: ``policy``, ``data``, ``rollout``,
``assistant`` and ``validation``, one dataclass each with a docstring per field.

These sections say nothing about what pays the policy; the reward's sections are in
:mod:`cooper.config.reward_sections`, and :class:`~cooper.config.train.TrainConfig` gathers every
section and checks their values, alone and against each other. Defaults follow the Cooper paper
(``docs/method.md`` "One Cooper step").
"""

from __future__ import annotations

from dataclasses import dataclass

from cooper.infra.models import DEFAULT_MODEL
from cooper.infra.protocol import PAPER_TEMPERATURE, PAPER_TOP_P


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
    scale_rewards: str = "group"
    """advantage scaling: 'group' divides by the group's reward std, as GRPO and the paper do;
    'batch' by the batch's std; 'none' leaves the centred rewards unscaled (Dr. GRPO)"""
    reward_aggregation: str = "sum_then_normalize"
    """how reward columns combine: 'sum_then_normalize' weights them (the verifier column's weight
    is 0 when the reward model pays) and normalises the sum, so the advantage comes from the paid
    column only; 'normalize_then_sum' would normalise each column first"""
    num_iterations: int = 1
    """policy updates per generation batch (paper: 1, so the PPO ratio starts at 1)"""
    importance_sampling_level: str = "token"
    """PPO ratio per 'token' (GRPO, the paper) or per 'sequence' (GSPO)"""
    mask_truncated_completions: bool = False
    """leave completions cut at max_completion_length out of the loss (paper: no)"""
    max_grad_norm: float = 1.0
    """policy gradient clipping"""
    dtype: str = "float32"
    """compute precision of policy and reward model: float32 (CPU) or bfloat16 (GPU); weights
    that are trained stay in float32 (master weights), frozen ones are kept in this dtype"""
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

    def in_background(self) -> bool:
        """Write negatives while the policy updates: ``background``, or by default for an
        endpoint (network time overlaps the update) and not for a local model (on a CPU it would
        compete with the update for the same cores) or the rule rewrite (free)."""
        if self.backend == "rewrite":
            return False
        return self.backend == "endpoint" if self.background is None else self.background


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
    judge: str = "rule"
    """what scores held-out answers: 'rule' (the verifier, as reward.verifier_mode reads it) or 'gold' (the testbed's gold judge for integer answers; val/accuracy is then its accuracy, the strict rule's is logged beside as val/rule_accuracy, and the training rollouts log the rule's false negatives: docs/metrics.md)"""

    def verify_mode(self, verifier_mode: str) -> str:
        """The mode held-out answers are verified with, given ``reward.verifier_mode``."""
        if self.judge == "gold":
            return "gold"
        return "strict" if verifier_mode == "gold" else verifier_mode
