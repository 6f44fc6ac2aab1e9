"""The reward's sections of ``cooper train``'s settings: ``reward`` (what pays the policy),
``rm_update`` (Stage 2, the reward model's pairwise update) and ``judge`` (who decides where the
rule cannot), one dataclass each with a docstring per field and its own checks.

A setting left at None takes ``reward.mode``'s value (:data:`~cooper.config.reward_modes.JUDGED`
in ``judged``, the paper's otherwise), decided in :meth:`RMUpdateConfig.resolved` and
:meth:`~cooper.config.train.TrainConfig.resolve`; the checks that span sections are
:class:`~cooper.config.train.TrainConfig`'s. A section's ``REMOVED`` lists its settings removed
with the variants that lost, each with the last commit that ran it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

from cooper.config.engine import ConfigError, choice
from cooper.config.reward_modes import FORMS_REMOVED_AT, JUDGED, REMOVED_AT

PAIR_LOSSES = ("bradley_terry", "margin")  # rm_update.loss (cooper.rm.losses)
NEGATIVE_SOURCES = ("assistant", "rollouts", "both")  # rm_update.negatives
JUDGE_BACKENDS = ("none", "gold", "local", "endpoint", "verifier")


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
    """pairs added to every update, cut from the step's right rollouts (the rule's, or the judge's once its "yes" was checked), each a form a policy can reach against a right answer: the answer boxed alone against its wrong twin boxed alone (an integer's right value also in another spelling against each of its slips, its last or tens digit one off), a hedge naming both against the rollout, and a reply with no final answer (its opening line, its working cut before the answer, its answer emptied, ...) against the rollout (cooper.rl.forms); any dataset, any answer type; 0 = off; None: 16 in reward.mode=judged, else 0"""

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
        :meth:`~cooper.config.train.TrainConfig.validate`)."""
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
