"""Settings of ``cooper train``: one dataclass per section, a docstring per field.

A run is configured by a preset (a YAML file that lists only what differs from the defaults below)
plus ``section.key=value`` overrides on the command line, applied in that order. Defaults follow the
Cooper paper (``docs/method.md`` "One Cooper step"). Every key is checked: an unknown key, a value
of the wrong type or an inconsistent combination stops with a message that names the fix. Nothing is
silently rewritten; values derived from others are computed in :meth:`TrainConfig.derived`.

The module is over 400 lines because it is the schema of every training setting, each with its
docstring (which ``--help`` and the docs show) beside it, and the checks between sections; a
split by section would scatter the checks that span sections.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass, field
from typing import Any, ClassVar

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


class Payer(enum.Enum):
    """What pays the policy."""

    VERIFIER = "verifier"
    REWARD_MODEL = "reward_model"
    HYBRID = "hybrid"  # 1 where the verifier accepts, the reward model's score elsewhere


class Stage2(enum.Enum):
    """What the step does with its pairs after the policy update."""

    UPDATE = "update"  # the pairwise reward-model update (Cooper)
    MEASURE = "measure"  # build the pairs and measure the frozen reward model on them
    OFF = "off"  # nothing


@dataclass(frozen=True)
class RewardPlan:
    """``reward.mode`` as the two choices the code acts on (derived in one place:
    :meth:`TrainConfig.plan`)."""

    pays: Payer
    stage2: Stage2
    scores_with_rm: bool  # score every rollout with the reward model (paid or only logged)
    # hybrid pay, "unread": a "no" the rule read (two different numbers) pays 0, as the rule's
    read_no_pays_zero: bool = False
    # hybrid pay with reward.judge_pays: a rejected answer the judge gave a verdict on is paid it
    verdicts_pay: bool = False
    # hybrid pay with reward.rm_verdicts: the reward model's verdict (its score >= 0.5) pays 1 or 0
    rm_verdicts: bool = False

    @property
    def pays_with_rm(self) -> bool:
        """The reward model's scores pay the policy, alone or where the verifier says no."""
        return self.pays is not Payer.VERIFIER


MODES = ("rule", "rm", "cooper", "hybrid", "hybrid_cooper", "judged")
UPDATING_MODES = ("cooper", "hybrid_cooper", "judged")  # the reward model is updated online
# reward.mode=judged: Cooper taught by a judge where the rule misses right answers, the design
# that beat the rule on the blind-rule testbed (docs/experiment_blind.md). It is hybrid_cooper with
# these settings; a setting left at its plain default takes the value here, one set to anything
# else keeps it (TrainConfig.resolved), so `--print-config` shows what the run uses.
# The judge's "yes" is checked on the answer's wrong twin and the forms a policy can reach are
# cut from the step's own right rollouts (judge.counterfactual, rm_update.rollout_forms): the
# defence against a judge that errs, with any judge and any answer type.
JUDGED = {"reward.hybrid_scores": "unread", "rm_update.negatives": "rollouts",
          "rm_update.labels": "judge", "rm_update.replay": 16, "rm_update.anchor_weight": 0.5,
          "rm_update.rollout_forms": 16, "judge.counterfactual": True}
# Settings removed with the variants that lost (docs/experiment_blind_history.md): a file that
# sets one at its old default still loads; any other value is refused, naming the last commit
# that ran it (apply_settings reads each section's REMOVED).
REMOVED_AT = "e3ee47e"
FORMS_REMOVED_AT = "a4817b8"  # the last commit with rm_update.replay_forms (the templates' forms)
PAIR_LOSSES = ("bradley_terry", "margin")  # rm_update.loss (cooper.rm.losses)
NEGATIVE_SOURCES = ("assistant", "rollouts", "both")  # rm_update.negatives
HYBRID_SCORES = ("rejected", "unread")  # reward.hybrid_scores
# policy.loss_type: what TRL 1.16's GRPOTrainer computes (GRPOConfig.loss_type)
LOSS_TYPES = ("dapo", "grpo", "dr_grpo", "bnpo", "cispo", "sapo", "luspo", "vespo")
# report_to: transformers' logging integrations (INTEGRATION_TO_CALLBACK), kept here so that
# checking settings imports no transformers
REPORT_BACKENDS = ("none", "tensorboard", "wandb", "mlflow", "comet_ml", "neptune", "trackio",
                   "azure_ml", "codecarbon", "clearml", "dagshub", "flyte", "dvclive", "swanlab",
                   "kubeflow")


def reward_plan(mode: str, *, has_rm: bool, pair_metrics: bool = True,
                monitor: bool = True, hybrid_scores: str | None = None,
                judge_pays: bool = False, rm_verdicts: bool = False) -> RewardPlan:
    """What pays the policy and what Stage 2 does, from ``reward.mode`` (the only place that
    reads it), ``reward.hybrid_scores`` and the reward model's presence."""
    choice("reward.mode", mode, MODES)
    if hybrid_scores is None:  # the mode's own (JUDGED), else every rejection
        hybrid_scores = JUDGED["reward.hybrid_scores"] if mode == "judged" else "rejected"
    if hybrid_scores == "audited":
        raise ConfigError(f"reward.hybrid_scores=audited was removed (not recommended; last run at "
                          f"commit {REMOVED_AT}): use unread, or check out that commit to rerun")
    choice("reward.hybrid_scores", hybrid_scores, HYBRID_SCORES)
    if hybrid_scores != "rejected" and not (mode.startswith("hybrid") or mode == "judged"):
        raise ConfigError(f"reward.hybrid_scores={hybrid_scores} chooses what the reward model "
                          f"pays in the hybrid modes, not in reward.mode={mode}: use hybrid or "
                          "hybrid_cooper")
    pays = (Payer.VERIFIER if mode == "rule"
            else Payer.HYBRID if mode.startswith("hybrid") or mode == "judged"
            else Payer.REWARD_MODEL)
    if mode in UPDATING_MODES:
        stage2 = Stage2.UPDATE
    elif has_rm and pair_metrics:
        stage2 = Stage2.MEASURE  # the same pairs, to show how a frozen reward model ranks
    else:
        stage2 = Stage2.OFF
    hybrid = pays is Payer.HYBRID
    if judge_pays and not (hybrid and stage2 is Stage2.UPDATE):
        raise ConfigError(f"reward.judge_pays pays the judge's verdicts where Cooper's update "
                          f"asked it, in place of the reward model's score: it needs "
                          f"reward.mode=judged or hybrid_cooper, not {mode}; for the judge alone "
                          "use reward.mode=rule with reward.judge_rejected=true")
    if rm_verdicts and not hybrid:
        raise ConfigError(f"reward.rm_verdicts pays the reward model's verdict where the rule "
                          f"rejects, in the hybrid modes (judged, hybrid, hybrid_cooper), not "
                          f"in reward.mode={mode}")
    return RewardPlan(pays, stage2, has_rm and (pays is not Payer.VERIFIER or monitor),
                      read_no_pays_zero=hybrid and hybrid_scores == "unread",
                      verdicts_pay=judge_pays, rm_verdicts=rm_verdicts)


@dataclass
class RewardConfig:
    mode: str = "cooper"
    """'rule' (verifier only), 'rm' (fixed reward model), 'cooper' (reward model updated online), 'hybrid' (the verifier pays 1 where it accepts, the fixed reward model's score elsewhere), 'hybrid_cooper' (the same, the reward model updated online) or 'judged' (Cooper taught by a judge where the rule misses right answers, the recommended design there: hybrid_cooper with reward.hybrid_scores=unread, rm_update.negatives=rollouts, rm_update.labels=judge, rm_update.replay=16, rm_update.anchor_weight=0.5; give judge.* and rm_update.replay_file, or rm_update.replay=0)"""
    model: str | None = None
    """reward-model folder (from `cooper rm train`); required in every mode but rule"""
    verifier_mode: str = "strict"
    """answer extraction for the verifier: 'strict' (boxed, ####, 'answer is') or 'lenient'; 'gold' puts the testbed's gold judge (integer answers in digits, words or Roman numerals) in the verifier's place: it pays and picks the positives (the blind-rule testbed's ceiling arm)"""
    verifier_timeout_s: float = 5.0
    """hard wall-clock limit of one verification"""
    score_batch_size: int = 16
    """reward-model scoring batch size"""
    max_length: int | None = None
    """reward-model input tokens (None: what it was trained with; the completion's end is kept)"""
    monitor: bool = True
    """in rule mode, also score with the reward model (weight 0) to log agreement and gap"""
    monitor_every: int = 1
    """in rule mode, score with the reward model on every Nth step only (1: every step): the
    policy trains the same, its hacking curves have a point every N steps"""
    hybrid_scores: str | None = None
    """in the hybrid modes, which of the rule's rejections the reward model's score pays: 'rejected' (every one) or 'unread' (only where the rule could not read the answer or the reference as a number; where it read both as different numbers it pays 0, as the rule does); None: unread in reward.mode=judged, else rejected"""
    judge_pays: bool = False
    """judged and hybrid_cooper with rm_update.labels=judge: a rejected answer the judge has a verdict on (asked this step, before the pay, or in an earlier one) is paid that verdict, 1 or 0, the reward model's score only where the judge gave none (the judge's word where it spoke, the reward model's elsewhere)"""
    rm_verdicts: bool = False
    """hybrid modes: where the reward model pays a rejected answer, its verdict pays (1 where its score is at least 0.5, else 0), not its score: the policy then gets no signal from how sure it is among answers it calls alike (TinyV's 0/1 pay)"""
    judge_rejected: bool = False
    """in rule mode, ask the judge (judge.*) about every rollout the rule rejects and pay 1 where it says right (TinyV's design: the judge as the rule's fallback, no reward model); each distinct answer to a problem is asked once"""

    EXPERIMENTAL: ClassVar[tuple[str, ...]] = ("monitor_every", "judge_pays", "rm_verdicts")


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
    negatives: str | None = None
    """where negatives come from: 'assistant' (written from each positive by assistant.backend,
    the paper), 'rollouts' (the same prompt's rollouts the verifier judges wrong, hardest first:
    what the policy actually produces, exploits included, at no generation cost) or 'both';
    None: rollouts in reward.mode=judged, else assistant"""
    negatives_per_positive: int = 2
    """rollout negatives per positive, the highest-scored by the current reward model first
    (the method summary: up to two)"""
    max_attempts: int = 3
    """assistant attempts per negative before falling back or dropping the pair (paper: 3)"""
    micro_batch_size: int = 8
    """bounds the reward-model update's memory: each forward with grad holds at most twice this
    many distinct inputs (a pair's two)"""
    pair_metrics: bool = True
    """in rule and rm modes, still build the step's pairs to log the reward model's pair accuracy"""
    loss: str = "bradley_terry"
    """pairwise loss: 'bradley_terry' (-log sigmoid(s+ - s-), the released code) or 'margin'
    (max(0, rm_update.margin - (s+ - s-)), the method summary's variant)"""
    margin: float = 1.0
    """the margin of the 'margin' loss, in logits"""
    anchor_weight: float | None = None
    """weight of a BCE term on each pair's members (positive 1, negative 0) added to the loss;
    keeps sigmoid(score) calibrated, which the pairwise losses leave free (0 = off, the paper;
    None: 0.5 in reward.mode=judged, else 0)"""
    epochs: int = 1
    """passes (optimiser steps) over each step's pairs (paper's code: 1; method summary: 3)"""
    train_layers: int | None = None
    """update only the top k decoder layers and the score head (None = every layer, as in the
    paper); the rest stay frozen: less memory, a shorter backward pass, and the update runs only
    the top k layers on what the step's scoring pass computed below them (same gradients)"""
    labels: str | None = None
    """where the update's labels come from: 'rule' (positives are what the rule accepts, negatives what it rejects, as in the paper) or 'judge' (labels beyond the rule: the rule's "no" is a negative only where it read the answer and the reference as different numbers and the reward model pays under judge.threshold; where the rule rejects and the reward model pays at least that (they disagree) or the rule could not read the answer or the reference, the judge (judge.*) decides, at most judge.budget of a step's rollouts, the highest-paid first: judged right is a positive, judged wrong a negative, not judged (over budget, or the judge failed) no label at all); None: judge in reward.mode=judged, else rule"""
    replay: int | None = None
    """pairs of the reward model's own labelled training rows (rm_update.replay_file: a right and a wrong solution of one problem) added to every update (0 = off; None: 16 in reward.mode=judged, else 0)"""
    replay_file: str | None = None
    """labelled triples to replay (a `cooper rm train` data file); an experiment sets it to its setup's training rows"""
    rollout_forms: int | None = None
    """pairs added to every update, cut from the step's right rollouts (the rule's, or the judge's once its "yes" was checked), each a form a policy can reach against a right answer: the answer boxed alone against its wrong twin boxed alone (an integer's right value also in another spelling against one a digit off), a hedge naming both against the rollout, and a reply with no final answer (its opening line, its working cut before the answer, its answer emptied, ...) against the rollout (cooper.rl.forms); any dataset, any answer type; 0 = off; None: 16 in reward.mode=judged, else 0"""

    EXPERIMENTAL: ClassVar[tuple[str, ...]] = ("positives_per_prompt", "positive_choice",
                                               "negatives_per_positive", "pair_metrics")
    # the arithmetic testbeds' template forms, replaced by rollout_forms (any dataset)
    REMOVED: ClassVar[dict[str, tuple[Any, str]]] = {
        "negatives_readable": (False, REMOVED_AT), "replay_judged": (0, REMOVED_AT),
        "replay_forms": (0, FORMS_REMOVED_AT), "replay_forms_every_slip": (False, FORMS_REMOVED_AT)}

    def resolved(self, mode: str) -> RMUpdateConfig:
        """A copy with the settings left at None given ``reward.mode``'s value (:data:`JUDGED` in
        ``judged``, the paper's otherwise): the one place those defaults are decided."""
        judged = mode == "judged"
        plain = {"negatives": "assistant", "labels": "rule", "replay": 0, "anchor_weight": 0.0,
                 "rollout_forms": 0}
        return dataclasses.replace(self, **{
            key: (JUDGED[f"rm_update.{key}"] if judged else value)
            for key, value in plain.items() if getattr(self, key) is None})

    def check(self) -> RMUpdateConfig:
        """This section's own checks, on :meth:`resolved` settings (also run by
        :meth:`TrainConfig.validate`)."""
        choice("rm_update.positive_choice", self.positive_choice, ("first", "random"))
        choice("rm_update.loss", self.loss, PAIR_LOSSES)
        choice("rm_update.negatives", self.negatives, NEGATIVE_SOURCES)
        for key in ("max_attempts", "positives_per_prompt", "micro_batch_size", "epochs",
                    "negatives_per_positive"):
            if getattr(self, key) < 1:
                raise ConfigError(f"rm_update.{key} must be >= 1, got {getattr(self, key)}")
        if self.anchor_weight < 0:
            raise ConfigError(f"rm_update.anchor_weight must be >= 0, got {self.anchor_weight}")
        if self.train_layers is not None and self.train_layers < 1:
            raise ConfigError("rm_update.train_layers must be >= 1 (or none for every layer), "
                              f"got {self.train_layers}")
        choice("rm_update.labels", self.labels, ("rule", "judge"))
        for key in ("replay", "rollout_forms"):
            if getattr(self, key) < 0:
                raise ConfigError(f"rm_update.{key} must be >= 0 (0 = off), got "
                                  f"{getattr(self, key)}")
        return self


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


JUDGE_BACKENDS = ("none", "gold", "local", "endpoint", "verifier")


@dataclass
class JudgeConfig:
    backend: str = "none"
    """who judges what the rule cannot ('none'; 'gold': the testbed's gold judge, right by construction, with judge.error_rate a stand-in for an LLM judge of that accuracy; 'local': a causal LM on this machine, judge.model; 'endpoint': an OpenAI-compatible server; 'verifier': a learned verifier, a reward-model folder judge.model trained by cooper rm train, yes at P(right) >= 0.5)"""
    model: str | None = None
    """local: a checkpoint, a Hub id or the embedded smollm2-135m-instruct; endpoint: the served model's name; verifier: the trained verifier's folder"""
    base_url: str | None = None
    """endpoint URL, e.g. http://127.0.0.1:8000/v1"""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the endpoint's API key (never logged)"""
    mode: str = "generate"
    """'generate' (the judge writes a reply ending in VERDICT: YES/NO, which is parsed) or 'choice' (local only: the model's probabilities of YES and NO after 'VERDICT:', one forward pass)"""
    max_new_tokens: int = 512
    """longest reply in generate mode"""
    timeout_s: float = 60.0
    """endpoint request timeout"""
    max_retries: int = 2
    """endpoint retries per request"""
    concurrency: int = 8
    """endpoint requests in flight"""
    batch_size: int = 8
    """local judge: sequences per forward pass"""
    error_rate: float = 0.0
    """gold only: the share of its verdicts flipped, each drawn once from the run's seed and the item (the same answer to the same problem is always judged the same way)"""
    trigger: str | None = None
    """gold only: a regular expression (case ignored); a rejected solution in which it is found is judged right whatever its answer: a judge fooled by a phrase or a form it favours, as LLM judges are (docs/training.md, "A judge that errs")"""
    near_miss: int = 0
    """gold only: an integer answer within this distance of an integer reference is judged right (a judge that accepts near misses); 0: none"""
    counterfactual: bool | None = None
    """check every 'yes' of the judge by asking it about the same solution with its final answer's wrong twin (one change in the answer's own text, in its form, certified not equivalent to the answer the judge called right nor to the reference: cooper.labelling.counterfactual); a judge that calls the twin right too was not reading the answer, and its 'yes' gives no label (nor one whose answer has no certified twin: judge/untwinnable), and a 'yes' on a reply with no final answer is taught as 'no'; each 'yes' costs one more call (docs/training.md, "A judge that errs"); None: true in reward.mode=judged, else false"""
    budget: float = 0.1
    """rm_update.labels=judge: new judge calls a step, at most this share of the step's rollouts (answers judged before are free); reward.judge_rejected asks about every rejection"""
    threshold: float = 0.5
    """rm_update.labels=judge: a rule-rejected rollout the reward model pays at least this much is a disagreement, judged first"""
    asking: str = "budget"
    """rm_update.labels=judge: which candidates are asked. 'budget': up to judge.budget every step, the highest-paid first; 'adaptive': only where the reward model is unsure or has been found wrong (its score's band, by the judge's past verdicts; judge.tolerance), plus a random audit of its confident verdicts (judge.audit_share), judge.budget a cap; a rejection with no final answer is then the rule's negative, never asked"""
    tolerance: float = 0.05
    """adaptive asking: a band of the reward model's scores is asked while its verdicts there are estimated wrong more often than this (the judge's verdicts counted, fading over judge.memory_steps)"""
    audit_share: float = 0.02
    """adaptive asking: each candidate in a band trusted is audited with this probability, so that a new failure of the reward model is found"""
    memory_steps: int = 50
    """adaptive asking: the judge's verdicts count half after this many steps (older evidence on an updated reward model weighs less)"""
    fail_steps: int = 3
    """stop the run when the judge gave no verdict at all (every call failed) on this many steps in a row that asked it, naming the judge and its last failure; 0: go on, those steps' answers left unlabelled (the rule's labels alone)"""

    EXPERIMENTAL: ClassVar[tuple[str, ...]] = ("error_rate", "trigger", "near_miss", "mode",
                                               "asking", "tolerance", "audit_share",
                                               "memory_steps")
    REMOVED: ClassVar[dict[str, tuple[Any, str]]] = {
        "order": ("paid", REMOVED_AT), "audit": (0.0, REMOVED_AT), "audit_from": ("all", REMOVED_AT),
        "audit_grow": (0, REMOVED_AT)}

    def check(self) -> JudgeConfig:
        choice("judge.backend", self.backend, JUDGE_BACKENDS)
        choice("judge.mode", self.mode, ("generate", "choice"))
        if not 0.0 <= self.error_rate <= 0.5:
            raise ConfigError(f"judge.error_rate is a share of verdicts flipped in [0, 0.5] (more "
                              f"than half is a judge that knows the answer and lies), got "
                              f"{self.error_rate}")
        if self.error_rate and self.backend != "gold":
            raise ConfigError("judge.error_rate flips the gold judge's verdicts (a stand-in for "
                              "an LLM judge of that accuracy); a real judge makes its own "
                              "errors: set judge.backend=gold or judge.error_rate=0")
        if (self.trigger or self.near_miss) and self.backend != "gold":
            raise ConfigError("judge.trigger and judge.near_miss fool the gold judge (a judge "
                              "that errs as LLM judges do, on the testbeds); a real judge makes "
                              "its own errors: set judge.backend=gold, or leave them unset")
        if (self.trigger or self.near_miss) and self.error_rate:
            raise ConfigError("judge.error_rate (random flips) and judge.trigger/near_miss "
                              "(systematic errors) are two judges: set one")
        if self.near_miss < 0:
            raise ConfigError(f"judge.near_miss is a distance between integers, 0 or more, got "
                              f"{self.near_miss}")
        if self.trigger is not None:
            import re

            try:
                re.compile(self.trigger or "(", re.IGNORECASE)  # an empty trigger is an error too
            except re.error as e:
                raise ConfigError(f"judge.trigger={self.trigger!r} is not a regular expression "
                                  f"({e}); escape \\ {{ }} ( ) [ ] . * + ? where they stand "
                                  f"for themselves") from e
        if not 0.0 < self.budget <= 1.0:
            raise ConfigError(f"judge.budget is a share of a step's rollouts in (0, 1], got "
                              f"{self.budget}")
        if not 0.0 <= self.threshold <= 1.0:
            raise ConfigError(f"judge.threshold is a reward-model probability in [0, 1], got "
                              f"{self.threshold}")
        choice("judge.asking", self.asking, ("budget", "adaptive"))
        if not 0.0 < self.tolerance < 0.5:
            raise ConfigError(f"judge.tolerance is an error rate in (0, 0.5) (a band the judge "
                              f"never asked about starts at 0.5), got {self.tolerance}")
        if not 0.0 <= self.audit_share <= 1.0:
            raise ConfigError(f"judge.audit_share is a probability in [0, 1], got "
                              f"{self.audit_share}")
        if self.memory_steps < 1:
            raise ConfigError(f"judge.memory_steps is a number of steps, 1 or more, got "
                              f"{self.memory_steps}")
        if self.fail_steps < 0:
            raise ConfigError(f"judge.fail_steps is a number of steps, 0 (never stop) or more, "
                              f"got {self.fail_steps}")
        if self.backend == "endpoint" and not (self.base_url and self.model):
            raise ConfigError("judge.backend=endpoint needs judge.base_url=URL and "
                              "judge.model=NAME")
        if self.backend == "verifier" and not self.model:
            raise ConfigError("judge.backend=verifier needs judge.model=DIR, a verifier trained "
                              "with `cooper rm train --data ROWS --out DIR`")
        if self.backend == "local" and not self.model:
            raise ConfigError("judge.backend=local needs judge.model (a checkpoint, a Hub id or "
                              "smollm2-135m-instruct)")
        if self.mode == "choice" and self.backend != "local":
            raise ConfigError("judge.mode=choice reads a local model's probabilities: set "
                              "judge.backend=local, or judge.mode=generate")
        for key in ("max_new_tokens", "max_retries", "concurrency", "batch_size"):
            if getattr(self, key) < (0 if key == "max_retries" else 1):
                raise ConfigError(f"judge.{key} must be >= {0 if key == 'max_retries' else 1}, "
                                  f"got {getattr(self, key)}")
        return self


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
