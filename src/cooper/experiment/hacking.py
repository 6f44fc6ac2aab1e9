"""The reward-hacking experiment: rule vs. fixed reward model vs. Cooper, side by side.

One experiment trains the same initial policy three times (the *arms*), changing only what
pays the policy (``method.md``): ``rule`` (the verifier), ``rm`` (a frozen reward model) and
``cooper`` (the same reward model, updated every step). Everything else is shared: the seed,
the training and held-out data, the initial policy, the initial reward model and the step
budget. Each arm is an ordinary ``cooper train`` run (:func:`cooper.rl.runner.run`), so the
per-step records are the trainer's own metrics (``docs/metrics.md``): the training reward,
``reward/rule_mean`` (verified accuracy of the rollouts), ``hacking/gap``, ``rm/agreement``
(the reward model against the verifier on that step's fresh rollouts) and, every
``validation.every_steps`` steps, held-out accuracy and the reward model's accuracy on a fixed
labelled probe set (``val/rm_probe_accuracy``, the paper's Figure 4).

Stages, each written into ``OUT`` and skipped when a rerun finds it complete, so an interrupted
experiment continues where it stopped (an arm also resumes from its last checkpoint):

1. setup (``OUT/setup``): the initial policy (a built tiny model is copied in), the initial
   reward model (optionally trained briefly with BCE on perturbed triples), the probe set, and
   the initial policy's benchmark scores (the "no RL" row);
2. each arm in turn (``OUT/arms/ARM``): training, then the final policy on the benchmarks.

Arms run one after another, not in parallel: on a small CPU they would only slow each other
down. ``cooper report OUT`` turns the folder into plots and a report (:mod:`cooper.report`).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from cooper.config import (
    ConfigError,
    TrainConfig,
    apply_settings,
    load_config,
    parse_overrides,
    preset_dir,
    read_settings_file,
)
from cooper.config.protocol import PAPER_TEMPERATURE, PAPER_TOP_P
from cooper.errors import UserError
from cooper.infra.environment import PACKAGES, environment, software_table
from cooper.infra.files import read_json, write_atomic, write_json

log = logging.getLogger(__name__)

ARMS = ("rule", "rm", "cooper")
TINY_NAMES = ("tiny-arith", "tiny-random")  # models built on this machine, no download
SETTINGS_FILE = "experiment.yaml"
STATUS_FILE = "experiment.json"


# ------------------------------------------------------------------ settings

@dataclass
class SetupConfig:
    policy: str = "tiny-arith"
    """initial policy: 'tiny-arith' (tiny model warm-started on arith_small), 'tiny-random', or a model name/folder"""
    reward_model: str | None = "tiny-arith"
    """initial reward model's checkpoint: 'tiny-arith' (random, the policy's tokenizer), 'tiny-random', or a folder"""


@dataclass
class RMInitConfig:
    triples: int = 0
    """perturbed triples (half gold, half wrong) the initial reward model is trained on; 0: use it as is"""
    unfinished: int = 0
    """extra wrong triples: gold solutions cut off before their final answer (as if out of tokens)"""
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


@dataclass
class ExperimentConfig:
    arms: str = ",".join(ARMS)
    """comma-separated arms to run, in order: rule, rm, cooper"""
    train_preset: str | None = None
    """`cooper train` preset the arms start from (the train section overrides it)"""
    setup: SetupConfig = field(default_factory=SetupConfig)
    rm_init: RMInitConfig = field(default_factory=RMInitConfig)
    probe: ProbeConfig = field(default_factory=ProbeConfig)
    final_eval: FinalEvalConfig = field(default_factory=FinalEvalConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    @property
    def arm_list(self) -> list[str]:
        return [a.strip() for a in self.arms.split(",") if a.strip()]

    def benchmark_list(self) -> list[tuple[str, str | None]]:
        out = []
        for item in self.final_eval.benchmarks.split(","):
            name, _, split = item.strip().partition(":")
            if name:
                out.append((name, split or None))
        return out

    def validate(self) -> ExperimentConfig:
        arms = self.arm_list
        bad = [a for a in arms if a not in ARMS]
        if bad or not arms or len(set(arms)) != len(arms):
            raise ConfigError(f"arms={self.arms!r}: list each of {', '.join(ARMS)} at most once")
        if not self.setup.reward_model:
            raise ConfigError("setup.reward_model is required (every arm gets the same initial "
                              "reward model): set setup.reward_model=DIR to a trained VerifyRM")
        if self.rm_init.unfinished < 0 or (self.rm_init.unfinished and not self.rm_init.triples):
            raise ConfigError("rm_init.unfinished needs rm_init.triples > 0 (it cuts their gold "
                              "solutions)")
        if self.rm_init.triples < 0 or self.rm_init.triples % 2:
            raise ConfigError(f"rm_init.triples must be an even number >= 0 (gold + perturbed "
                              f"pairs), got {self.rm_init.triples}")
        if not self.probe.file and (self.probe.triples < 2 or self.probe.triples % 2):
            raise ConfigError(f"probe.triples must be an even number >= 2, got {self.probe.triples}")
        if self.final_eval.backend not in ("hf", "vllm"):
            raise ConfigError(f"final_eval.backend={self.final_eval.backend!r} is not one of: hf, vllm")
        if not self.benchmark_list():
            raise ConfigError("final_eval.benchmarks is empty; name at least one DATASET[:SPLIT]")
        v = self.train.validation
        if not (v.enabled and v.every_steps > 0):
            raise ConfigError("the experiment's curves need periodic validation: set "
                              "train.validation.enabled=true and train.validation.every_steps=K")
        for arm in arms:  # each arm's settings as the runner will see them
            t = copy.deepcopy(self.train)
            t.reward.mode, t.reward.model = arm, self.setup.reward_model
            t.validate()
        return self

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def experiment_dir() -> Path:
    return preset_dir() / "experiments"


def list_experiment_presets() -> list[str]:
    return sorted(p.stem for p in experiment_dir().glob("*.yaml"))


def load_experiment(preset: str, overrides: list[str] | None = None) -> ExperimentConfig:
    """The preset (a name in ``config/presets/experiments`` or a YAML path), then ``key=value``
    overrides (``train.max_steps=10``, ``setup.policy=DIR``, ``arms=rm,cooper``)."""
    path = Path(preset).expanduser()
    if path.suffix not in (".yaml", ".yml"):
        path = experiment_dir() / f"{preset}.yaml"
    if not path.is_file():
        raise ConfigError(f"unknown experiment preset '{preset}'; presets: "
                          f"{', '.join(list_experiment_presets())} (or pass a .yaml file)")
    data = read_settings_file(path)
    tree = parse_overrides(overrides or [])
    train_data, train_over = data.pop("train", None) or {}, tree.pop("train", None) or {}
    exp = ExperimentConfig()
    apply_settings(exp, data)
    apply_settings(exp, tree)
    exp.train = load_config(exp.train_preset)  # the arms' base, then the preset's diffs
    apply_settings(exp.train, train_data, prefix="train.")
    apply_settings(exp.train, train_over, prefix="train.")
    return exp


# ------------------------------------------------------------------ stage 1: setup

@dataclass(frozen=True)
class Setup:
    """What every arm starts from (paths inside the experiment folder where built here)."""

    policy: str
    reward_model: str
    probe: str


def _tiny_model(name: str, role: str, folder: Path, seed: int) -> Path:
    """A tiny model built on this machine, copied into the experiment folder."""
    if name == "tiny-arith":
        from cooper.data.synthetic import tiny_arith_models

        src = tiny_arith_models() / ("policy" if role == "policy" else "reward")
    else:
        from cooper.infra.models import build_tiny_models

        tiny = build_tiny_models(folder / "tiny-random", seed=seed)
        src = tiny.policy if role == "policy" else tiny.reward
    dst = folder / role
    shutil.copytree(src, dst)
    return dst


def _triples_file(path: Path, dataset: str, split: str, n: int, seed: int,
                  unfinished: int = 0) -> Path:
    """Gold solutions (label 1) and perturbed copies (label 0); ``unfinished`` more label-0
    triples are gold solutions cut at a random point before their final answer."""
    from cooper.data.perturb import perturbed_triples
    from cooper.data.problems import load_problems
    from cooper.types import LabelledTriple, Triple

    rng = random.Random(seed)
    triples, _ = perturbed_triples(load_problems(dataset, split), n, rng)
    if len(triples) < n:
        raise UserError(f"{dataset}/{split} gave only {len(triples)} perturbed triples of the "
                        f"{n} asked for; lower the number")
    golds = [t for t in triples if t.label == 1]
    for i in range(unfinished):
        g = rng.choice(golds)
        gold, ref = g.triple.completion, g.triple.reference
        end = gold.rfind(ref) if ref in gold else len(gold)
        cut = gold[:rng.randint(1, max(1, end - 1))]
        triples.append(LabelledTriple(Triple(g.triple.question, ref, cut), False,
                                      f"{g.id}/unfinished-{i}", g.source))
    rng.shuffle(triples)
    path.write_text("".join(json.dumps(t.to_json()) + "\n" for t in triples))
    return path


def _train_initial_rm(exp: ExperimentConfig, base: str, data: Path, out: Path) -> dict:
    from cooper.data.triples import load_triples
    from cooper.rm.model import RewardModel
    from cooper.rm.training import TrainConfig as BCEConfig
    from cooper.rm.training import evaluate, train_bce

    r = exp.rm_init
    rows = load_triples(data).rows
    rm = RewardModel.load(base, max_length=r.max_length, dtype="float32")
    report = train_bce(rm, rows, BCEConfig(lr=r.lr, epochs=r.epochs, batch_size=r.batch_size,
                                           holdout=0.0, seed=exp.train.seed), progress=False)
    rm.save(out)
    return {"train_loss": report.epochs[-1].train_loss,
            "train_accuracy": evaluate(rm, rows).accuracy, "steps": report.optimizer_steps}


def run_setup(exp: ExperimentConfig, out: Path) -> Setup:
    """Stage 1 (skipped when ``OUT/setup/setup.json`` exists)."""
    folder = out / "setup"
    done = read_json(folder / "setup.json")
    if done:
        log.info("setup: complete, reused")
        return Setup(**done["setup"])
    if folder.exists():  # an interrupted setup: start it over (it takes seconds to minutes)
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    t0 = time.perf_counter()
    seed = exp.train.seed
    s = exp.setup
    policy = (str(_tiny_model(s.policy, "policy", folder, seed)) if s.policy in TINY_NAMES
              else s.policy)
    base = (str(_tiny_model(s.reward_model, "reward_base", folder, seed))
            if s.reward_model in TINY_NAMES else s.reward_model)
    info: dict[str, Any] = {}
    if exp.rm_init.triples:
        data = _triples_file(folder / "rm_train.jsonl", exp.rm_init.dataset, exp.rm_init.split,
                             exp.rm_init.triples, seed, exp.rm_init.unfinished)
        info["rm_init"] = _train_initial_rm(exp, base, data, folder / "reward_model")
        reward_model = str(folder / "reward_model")
    else:
        reward_model = base
    probe = exp.probe.file or str(_triples_file(folder / "probe.jsonl", exp.probe.dataset,
                                                exp.probe.split, exp.probe.triples, seed + 1))
    info["probe_accuracy"] = _probe_accuracy(reward_model, probe)
    setup = Setup(policy, reward_model, probe)
    info["initial_eval"] = evaluate_policy(exp, policy, folder / "initial_eval.json")
    write_json(folder / "setup.json", {"setup": dataclasses.asdict(setup), **info,
                                       "seconds": time.perf_counter() - t0}, default=str)
    return setup


def _probe_accuracy(reward_model: str, probe: str) -> float:
    from cooper.data.triples import load_triples
    from cooper.rm.model import RewardModel
    from cooper.rm.training import evaluate

    return evaluate(RewardModel.load(reward_model, dtype="float32"),
                    load_triples(probe).rows).accuracy


# ------------------------------------------------------------------ evaluation

def evaluate_policy(exp: ExperimentConfig, model: str, path: Path) -> dict[str, Any]:
    """The policy on every benchmark (``final_eval``); written to ``path`` and returned."""
    from cooper.data.problems import load_problems
    from cooper.eval.sampling import evaluate_problems
    from cooper.infra.generation import HFGenerator, SamplingConfig, VLLMGenerator

    e = exp.final_eval
    t0 = time.perf_counter()
    gen = (VLLMGenerator.load(model) if e.backend == "vllm"
           else HFGenerator.load(model, batch_size=e.batch_size, dtype=exp.train.policy.dtype))
    sampling = SamplingConfig(n=e.samples, temperature=e.temperature, top_p=e.top_p,
                              max_new_tokens=e.max_new_tokens, seed=exp.train.seed)
    scores: dict[str, Any] = {}
    for name, split in exp.benchmark_list():
        label = f"{name}:{split}" if split else name
        problems = list(load_problems(name, split, limit=e.limit))
        r = evaluate_problems(gen, problems, sampling, benchmark=label,
                              verify_mode=exp.train.reward.verifier_mode)
        scores[label] = {"accuracy": r.metrics.accuracy, "problems": r.metrics.num_problems,
                         "samples": r.metrics.samples_per_problem,
                         "mean_tokens": r.metrics.mean_tokens}
    result = {"benchmarks": scores,
              "average": sum(v["accuracy"] for v in scores.values()) / len(scores),
              "seconds": time.perf_counter() - t0}
    write_json(path, result, default=str)
    return result


# ------------------------------------------------------------------ stage 2: the arms

def arm_config(exp: ExperimentConfig, arm: str, out: Path, setup: Setup) -> TrainConfig:
    """The arm's ``cooper train`` settings: the shared ones with only the reward mode changed."""
    cfg = copy.deepcopy(exp.train)
    cfg.output_dir = str(out / "arms" / arm)
    cfg.reward.mode = arm
    cfg.policy.model = setup.policy
    cfg.reward.model = setup.reward_model
    cfg.reward.monitor = True  # the rule arm logs the (frozen) reward model's gap too
    cfg.validation.rm_probe = setup.probe
    return cfg.validate()


def run_arm(exp: ExperimentConfig, arm: str, out: Path, setup: Setup) -> dict[str, Any]:
    """Train one arm (resuming from its last checkpoint) and score its final policy."""
    import gc

    from cooper.rl.runner import run
    from cooper.rl.trainer import complete_checkpoints

    folder = out / "arms" / arm
    done = read_json(folder / "arm.json")
    if done:
        log.info("arm %s: complete, skipped", arm)
        return done
    trained = read_json(folder / "trained.json")
    if not trained:
        resume = bool(complete_checkpoints(folder))
        log.info("arm %s: %s", arm, "resuming" if resume else "training")
        result = run(arm_config(exp, arm, out, setup), resume=resume)
        trained = {"steps": result.steps, "seconds": result.seconds,
                   "resumed_from": str(result.resumed_from.name) if result.resumed_from else None}
        write_json(folder / "trained.json", trained, default=str)
        gc.collect()
    final = evaluate_policy(exp, str(folder / "policy"), folder / "final_eval.json")
    done = {"arm": arm, "train": trained, "final_eval": final}
    write_json(folder / "arm.json", done, default=str)
    return done


def _check_same_settings(exp: ExperimentConfig, out: Path) -> None:
    path = out / SETTINGS_FILE
    now = exp.to_dict()
    if path.is_file():
        before = yaml.safe_load(path.read_text())
        diff = _differences(before, now)
        if diff:
            raise UserError(f"{out} holds an experiment with other settings ({'; '.join(diff[:5])}"
                            f"{'; ...' if len(diff) > 5 else ''}): rerun with the same preset and "
                            "overrides to continue it, or choose another --out")
    else:
        write_atomic(path, yaml.safe_dump(now, sort_keys=False))


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            out += _differences(a.get(k), b.get(k), f"{prefix}{k}.")
        return out
    return [] if a == b else [f"{prefix.rstrip('.')}: {a!r} -> {b!r}"]


def run_experiment(exp: ExperimentConfig, out: str | os.PathLike) -> dict[str, Any]:
    """Setup, then each arm in turn; every stage is skipped when already complete."""
    exp.validate()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_settings(exp, out)
    status = read_json(out / STATUS_FILE) or {"experiment": "hacking", "sessions": []}
    status["versions"] = software_table(environment((*PACKAGES, "vllm")))
    session = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": None}
    status["sessions"].append(session)
    write_json(out / STATUS_FILE, status, default=str)
    t0 = time.perf_counter()
    setup = run_setup(exp, out)
    results = {arm: run_arm(exp, arm, out, setup) for arm in exp.arm_list}
    session["seconds"] = time.perf_counter() - t0
    write_json(out / STATUS_FILE, status, default=str)
    return results
