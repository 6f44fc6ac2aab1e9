"""Settings of ``cooper experiment hacking``: one dataclass per section, a docstring per field.

An experiment trains the same initial policy once per *arm* and seed
(:mod:`cooper.experiment.hacking`). Its settings are the arms (named sets of ``cooper train``
settings, :mod:`cooper.config.arms`), the seeds, how the shared starting point is built
(``setup``, ``rm_init``, ``probe``), how the policies are scored at the end (``final_eval``), and
the ``cooper train`` settings every arm shares (``train``, a
:class:`~cooper.config.train.TrainConfig`). A preset in ``config/presets/experiments`` lists
only what differs from the defaults below; ``key=value`` overrides come after it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cooper.config.arms import (
    LABEL,
    arm_train_config,
    declare_arms,
    mode_arms,
    select_arms,
)
from cooper.config.engine import (
    ConfigError,
    apply_settings,
    find_preset,
    parse_overrides,
    preset_dir,
    read_preset,
)
from cooper.config.train import TrainConfig, load_config
from cooper.infra.models import TRUNK_PREFIX  # setup.reward_model: embedded-trunk-K
from cooper.infra.protocol import PAPER_TEMPERATURE, PAPER_TOP_P

ARMS = ("rule", "rm", "cooper")  # the default arms: one per reward mode of the paper's table


def trunk_layers(name: str | None) -> int | None:
    """K of a setup name ``embedded-trunk-K``; None for any other name."""
    if name is None or not name.startswith(TRUNK_PREFIX):
        return None
    k = name[len(TRUNK_PREFIX):]
    if not k.isdigit() or int(k) < 1:
        raise ConfigError(f"setup.reward_model='{name}': the trunk's layer count must be a "
                          f"positive integer ({TRUNK_PREFIX}4 is the embedded model's first 4 "
                          "layers)")
    return int(k)


@dataclass
class SetupConfig:
    policy: str = "tiny-arith"
    """initial policy: 'tiny-arith' (tiny model warm-started on arith_small), 'tiny-arith-2x1' (on arith_2x1's train split), 'tiny-arith-2x1-words' (on arith_2x1_words: some answers boxed in words), 'tiny-arith-2x1-compare' (the words policy warm-started further on arith_2x1_compare: yes/no comparisons the rule never pays), 'tiny-random', or a model name/folder"""
    reward_model: str | None = "tiny-arith"
    """initial reward model's checkpoint: 'tiny-arith' (random, the policy's tokenizer), 'tiny-random', 'embedded-trunk-K' (the embedded model's first K layers, a new score head), or a folder"""
    policy_accuracy_min: float | None = None
    """lowest held-out accuracy (train.validation's problems and sampling) the initial policy may have; below it the setup stops before any arm (None: not checked)"""
    policy_accuracy_max: float | None = None
    """highest such accuracy; above it the setup stops (None: not checked)"""
    rule_missed_min: float | None = None
    """with train.validation.judge=gold: the lowest share of the initial policy's gold-correct held-out answers that the rule may reject; outside [rule_missed_min, rule_missed_max] the setup stops before any arm (None: not checked)"""
    rule_missed_max: float | None = None
    """the highest such share (None: not checked)"""


@dataclass
class RMInitConfig:
    triples: int = 0
    """perturbed triples (half gold, half wrong) the initial reward model is trained on; 0: use it as is"""
    unfinished: int = 0
    """extra wrong triples: gold solutions cut off before their final answer (as if out of tokens)"""
    min_change: float = 0.0
    """keep only wrong answers further than this from the reference (0: any change); e.g. 10 leaves the reward model without near misses"""
    dataset: str = "arith_small"
    """problems whose gold solutions and perturbed copies train the initial reward model"""
    split: str = "train"
    """split of that dataset"""
    epochs: int = 1
    """BCE epochs"""
    lr: float = 2e-5
    """BCE learning rate"""
    batch_size: int = 8
    """triples per optimiser step"""
    max_length: int = 256
    """reward-model input tokens"""
    train_layers: int | None = None
    """train only the top K decoder layers, the score head and the final norm (embeddings frozen); None: every parameter"""
    max_rounds: int = 1
    """training rounds, stopping at the first whose reward model reaches probe.min_accuracy; each round after the first starts again from setup.reward_model with another score head and data order"""
    disturb: float = 0.0
    """relative noise added to the reward model's starting weights, standing in for another machine's floating point (robustness checks of the setup; 0 in every preset)"""


@dataclass
class ProbeConfig:
    file: str | None = None
    """labelled triples file to use as the probe (e.g. VerifyBench); None: build perturbed triples"""
    dataset: str = "arith_small"
    """problems of the built probe (gold solutions and perturbed copies)"""
    split: str = "test"
    """split of that dataset"""
    triples: int = 200
    """triples in the built probe"""
    min_accuracy: float | None = None
    """bar the initial reward model's probe accuracy must reach (after at most rm_init.max_rounds rounds); below it the setup stops before any arm (None: not checked)"""
    min_recall_missed: float | None = None
    """with train.validation.judge=gold: the bar on the initial reward model's recall on the initial policy's gold-correct held-out answers that the rule rejects (probability >= 0.5); below it the setup stops (None: measured, not checked)"""


@dataclass
class FinalEvalConfig:
    benchmarks: str = "arith_small:test"
    """comma-separated DATASET[:SPLIT] the initial and final policies are scored on"""
    limit: int | None = 200
    """problems per benchmark (None: all)"""
    samples: int = 4
    """samples per problem (paper: 8)"""
    temperature: float = PAPER_TEMPERATURE
    """paper protocol: 0.7"""
    top_p: float = PAPER_TOP_P
    """paper protocol: 0.95"""
    max_new_tokens: int = 512
    """generated tokens per sample"""
    batch_size: int = 32
    """sequences per generation batch"""
    backend: str = "hf"
    """'hf' (transformers generate) or 'vllm' (GPU)"""
    policies: int = 1
    """policies scored at the end of each arm: the final one and those every `every_steps` steps before it, each on every benchmark; the report's headline is their mean, the final policy alone is in its appendix (1: the final policy alone)"""
    every_steps: int = 25
    """steps between two of those policies"""

    def steps(self, max_steps: int) -> list[int]:
        """The steps whose policies are scored, ending with ``max_steps`` (the final one)."""
        return [max_steps - self.every_steps * k for k in reversed(range(self.policies))]


@dataclass
class ExperimentConfig:
    arms: dict[str, dict[str, Any]] = field(default_factory=lambda: mode_arms(ARMS))
    """the arms, in order: NAME -> `cooper train` settings applied on top of train (dotted or nested keys, and an optional label); the string 'rule,rm,cooper' means one arm per reward mode; the override arms=NAME,NAME selects declared arms"""
    seeds: str | None = None
    """comma-separated seeds; every arm runs once per seed, each seed with its own setup (None: train.seed alone)"""
    train_preset: str | None = None
    """`cooper train` preset the arms start from (the train section overrides it)"""
    setup: SetupConfig = field(default_factory=SetupConfig)
    rm_init: RMInitConfig = field(default_factory=RMInitConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    final_eval: FinalEvalConfig = field(default_factory=FinalEvalConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @property
    def arm_list(self) -> list[str]:
        return list(self.arms)

    @property
    def seed_list(self) -> list[int]:
        """The seeds to run, in order (``train.seed`` when ``seeds`` is not set)."""
        return parse_seeds(self.seeds) if self.seeds is not None else [self.train.seed]

    def arm_train(self, arm: str) -> TrainConfig:
        """The arm's ``cooper train`` settings (before the runner fills in the setup's paths),
        resolved for its ``reward.mode`` (:meth:`TrainConfig.resolve`)."""
        return arm_train_config(self.train, arm, self.arms[arm]).resolve()

    def arm_label(self, arm: str) -> str | None:
        """The arm's display name when its settings give one (``label``)."""
        return self.arms[arm].get(LABEL)

    def for_seed(self, seed: int) -> ExperimentConfig:
        """A copy whose ``train.seed`` (the runs' and the setup's seed) is ``seed``."""
        exp = copy.deepcopy(self)
        exp.train.seed = seed
        return exp

    def held_out_mode(self) -> str:
        """How held-out answers are verified (the setup's checks, the final evaluation): as the
        arms' validation does (``train.validation.judge``)."""
        return self.train.validation.verify_mode(self.train.reward.verifier_mode)

    def benchmark_list(self) -> list[tuple[str, str | None]]:
        # as cooper.data.problems.parse_benchmark reads it (a lower stage cannot import data;
        # tests/test_eval_cli.py checks the two agree)
        out = []
        for item in self.final_eval.benchmarks.split(","):
            name, _, split = item.strip().partition(":")
            if name:
                out.append((name, split or None))
        return out

    def validate(self) -> ExperimentConfig:
        self.arms = declare_arms(self.arms)  # checks each arm (a no-op on checked arms)
        if self.seeds is not None:
            parse_seeds(self.seeds)
        if not self.setup.reward_model:
            raise ConfigError("setup.reward_model is required (every arm gets the same initial "
                              "reward model): set setup.reward_model=DIR to a trained VerifyRM")
        trunk_layers(self.setup.reward_model)  # a bad embedded-trunk-K fails before any stage
        if self.rm_init.unfinished < 0 or (self.rm_init.unfinished and not self.rm_init.triples):
            raise ConfigError("rm_init.unfinished needs rm_init.triples > 0 (it cuts their gold "
                              "solutions)")
        if not math.isfinite(self.rm_init.min_change) or self.rm_init.min_change < 0:
            raise ConfigError(f"rm_init.min_change must be a finite number >= 0 (0: any "
                              f"change), got {self.rm_init.min_change}")
        if self.rm_init.triples < 0 or self.rm_init.triples % 2:
            raise ConfigError(f"rm_init.triples must be an even number >= 0 (gold + perturbed "
                              f"pairs), got {self.rm_init.triples}")
        if self.rm_init.train_layers is not None and self.rm_init.train_layers < 1:
            raise ConfigError(f"rm_init.train_layers must be >= 1 (or null for every parameter), "
                              f"got {self.rm_init.train_layers}")
        if not self.probe.file and (self.probe.triples < 2 or self.probe.triples % 2):
            raise ConfigError(f"probe.triples must be an even number >= 2, got {self.probe.triples}")
        lo, hi = self.setup.policy_accuracy_min, self.setup.policy_accuracy_max
        missed = self.setup.rule_missed_min, self.setup.rule_missed_max
        for key, x in (("setup.policy_accuracy_min", lo), ("setup.policy_accuracy_max", hi),
                       ("probe.min_accuracy", self.probe.min_accuracy),
                       ("setup.rule_missed_min", missed[0]), ("setup.rule_missed_max", missed[1]),
                       ("probe.min_recall_missed", self.probe.min_recall_missed)):
            if x is not None and not 0.0 <= x <= 1.0:
                raise ConfigError(f"{key} is a fraction between 0 and 1 (or null), got {x}")
        for name, (a, b) in (("policy_accuracy", (lo, hi)), ("rule_missed", missed)):
            if a is not None and b is not None and a > b:
                raise ConfigError(f"setup.{name}_min={a} is above setup.{name}_max={b}")
        gold_checks = [k for k, x in (("setup.rule_missed_min", missed[0]),
                                      ("setup.rule_missed_max", missed[1]),
                                      ("probe.min_recall_missed", self.probe.min_recall_missed))
                       if x is not None]
        if gold_checks and self.train.validation.judge != "gold":
            raise ConfigError(f"{', '.join(gold_checks)} need(s) the gold judge to see what the "
                              "rule misses: set train.validation.judge=gold")
        if self.rm_init.max_rounds < 1:
            raise ConfigError(f"rm_init.max_rounds must be >= 1, got {self.rm_init.max_rounds}")
        if not math.isfinite(self.rm_init.disturb) or self.rm_init.disturb < 0:
            raise ConfigError(f"rm_init.disturb must be a finite number >= 0, got "
                              f"{self.rm_init.disturb}")
        fe = self.final_eval
        if fe.policies < 1 or fe.every_steps < 1:
            raise ConfigError(f"final_eval.policies ({fe.policies}) and final_eval.every_steps "
                              f"({fe.every_steps}) must be >= 1 (policies=1: the final one alone)")
        if self.final_eval.backend not in ("hf", "vllm"):
            raise ConfigError(f"final_eval.backend={self.final_eval.backend!r} is not one of: hf, vllm")
        if not self.benchmark_list():
            raise ConfigError("final_eval.benchmarks is empty; name at least one DATASET[:SPLIT]")
        for arm in self.arm_list:  # each arm's settings as the runner will see them
            try:
                t = self.arm_train(arm)
            except ConfigError as e:
                raise ConfigError(f"arm '{arm}': {e}") from None
            where = "train" if arm_sets(self.arms[arm], "validation.") is None else f"arms.{arm}"
            v = t.validation
            if not (v.enabled and v.every_steps > 0):
                raise ConfigError(f"the experiment's curves need periodic validation (arm "
                                  f"'{arm}'): set {where}.validation.enabled=true and "
                                  f"{where}.validation.every_steps=K")
            if fe.steps(t.max_steps)[0] < 1:
                raise ConfigError(f"arm '{arm}': final_eval.policies={fe.policies} policies "
                                  f"{fe.every_steps} steps apart do not fit in its {t.max_steps} "
                                  "steps: lower final_eval.policies or final_eval.every_steps")
            t.reward.model = self.setup.reward_model
            if t.rm_update.replay:
                # the runner gives it the setup's training rows
                if not self.rm_init.triples:
                    raise ConfigError(f"arm '{arm}' replays the initial reward model's training "
                                      f"rows (rm_update.replay={t.rm_update.replay}), but "
                                      "rm_init.triples=0 trains it on none: set rm_init.triples, "
                                      "or set rm_update.replay=0")
                t.rm_update.replay_file = "rm_train.jsonl"
            try:
                t.validate()
            except ConfigError as e:
                raise ConfigError(f"arm '{arm}': {e}") from None
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def parse_seeds(text: str) -> list[int]:
    """'0,1,2' -> [0, 1, 2]; a clear error for anything else."""
    try:
        seeds = [int(s) for s in str(text).split(",") if s.strip()]
    except ValueError:
        seeds = []
    if not seeds or len(set(seeds)) != len(seeds) or min(seeds) < 0:
        raise ConfigError(f"seeds={text!r}: list distinct integers >= 0 separated by commas, "
                          "e.g. seeds=0,1,2")
    return seeds


def arm_sets(settings: dict[str, Any], prefix: str) -> str | None:
    """The first key of an arm's settings under ``prefix`` (None: the arm leaves them shared)."""
    return next((k for k in settings if k.startswith(prefix)), None)


def experiment_dir() -> Path:
    return preset_dir() / "experiments"


def list_experiment_presets() -> list[str]:
    return sorted(p.stem for p in experiment_dir().glob("*.yaml"))


def experiment_preset_path(name: str, relative_to: Path | None = None) -> Path:
    """An experiment preset's name (shipped) or a path to a YAML file, checked to exist."""
    return find_preset(name, experiment_dir(), relative_to, what="experiment preset")


def load_experiment(preset: str, overrides: list[str] | None = None) -> ExperimentConfig:
    """The preset (a name in ``config/presets/experiments`` or a YAML path; its ``base:`` chain
    resolved, each arm merged key by key), then ``key=value`` overrides (``train.max_steps=10``,
    ``setup.policy=DIR``, ``seeds=0,1``; ``arms=rm,cooper`` selects declared arms)."""
    data = read_preset(experiment_preset_path(preset), experiment_preset_path, named=("arms",))
    tree = parse_overrides(overrides or [])
    train_data, train_over = data.pop("train", None) or {}, tree.pop("train", None) or {}
    declared, selection = data.pop("arms", None), tree.pop("arms", None)
    exp = ExperimentConfig()
    if declared is not None:
        exp.arms = declare_arms(declared)
    if selection is not None:
        exp.arms = select_arms(exp.arms, selection)
    apply_settings(exp, data)
    apply_settings(exp, tree)
    exp.train = load_config(exp.train_preset)  # the arms' base, then the preset's diffs
    apply_settings(exp.train, train_data, prefix="train.")
    apply_settings(exp.train, train_over, prefix="train.")
    return exp
