"""Stage 1 of the reward-hacking experiment: what every arm starts from.

Written into a seed's folder, ``OUT/seed-S/setup`` (:mod:`cooper.experiment.layout`), and
skipped when a rerun finds ``setup.json`` there (an interrupted setup starts over: it takes
seconds to minutes). Everything seeded here takes the seed's ``train.seed``: the initial reward
model's training triples and their order, the probe set, a ``tiny-random`` model, and the
sampling of the initial evaluation; so each seed is a replicate of the whole experiment. It builds, from ``setup``, ``rm_init`` and
``probe`` (:mod:`cooper.config.experiment`): the initial policy (a tiny model built on this
machine is copied in), the initial reward model (optionally trained briefly with BCE on
perturbed triples), the labelled probe set the reward model is scored on at every validation,
and the initial policy's benchmark scores (the report's "no RL" row).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import random
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooper.config.experiment import ExperimentConfig, trunk_layers
from cooper.config.rm import RMTrainConfig
from cooper.data.perturb import perturbed_triples
from cooper.data.problems import load_problems
from cooper.data.triples import load_triples
from cooper.errors import UserError
from cooper.experiment.final_eval import evaluate_policy
from cooper.experiment.layout import setup_dir
from cooper.experiment.testbed import (
    TINY_ARITH,
    TINY_ARITH_2X1,
    embedded_trunk,
    tiny_arith_models,
)
from cooper.infra.files import read_json, write_json
from cooper.infra.models import build_tiny_models
from cooper.rm.model import RewardModel
from cooper.rm.training import evaluate, train_bce
from cooper.types import LabelledTriple, Triple

log = logging.getLogger(__name__)

# models built on this machine, no download: the warm-started ones by their cache build
TINY_BUILDS = {"tiny-arith": TINY_ARITH, "tiny-arith-2x1": TINY_ARITH_2X1}
TINY_NAMES = (*TINY_BUILDS, "tiny-random")


@dataclass(frozen=True)
class Setup:
    """What every arm starts from (paths inside the experiment folder where built here)."""

    policy: str
    reward_model: str
    probe: str


def _tiny_model(name: str, role: str, folder: Path, seed: int) -> Path:
    """A tiny model built on this machine, copied into the experiment folder."""
    if name in TINY_BUILDS:
        src = tiny_arith_models(name=TINY_BUILDS[name]) / ("policy" if role == "policy" else "reward")
    else:
        tiny = build_tiny_models(folder / "tiny-random", seed=seed)
        src = tiny.policy if role == "policy" else tiny.reward
    dst = folder / role
    shutil.copytree(src, dst)
    return dst


def _reward_base(name: str | None, folder: Path, seed: int) -> str | None:
    """The initial reward model's checkpoint before any training of ours."""
    if name in TINY_NAMES:
        return str(_tiny_model(name, "reward_base", folder, seed))
    if (k := trunk_layers(name)) is not None:
        return str(embedded_trunk(k))  # read-only in the cache; the trained model is saved here
    return name


def _triples_file(path: Path, dataset: str, split: str, n: int, seed: int,
                  unfinished: int = 0, min_change: float = 0.0) -> Path:
    """Gold solutions (label 1) and perturbed copies (label 0), those answers further than
    ``min_change`` from the reference; ``unfinished`` more label-0 triples are gold solutions
    cut at a random point before their final answer."""
    rng = random.Random(seed)
    triples, _ = perturbed_triples(load_problems(dataset, split), n, rng, min_change=min_change)
    if len(triples) < n:
        raise UserError(f"{dataset}/{split} gave only {len(triples)} perturbed triples of the "
                        f"{n} asked for; lower the number"
                        + (" or rm_init.min_change" if min_change > 0 else ""))
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
    r = exp.rm_init
    rows = load_triples(data).rows
    rm = RewardModel.load(base, max_length=r.max_length, dtype="float32")
    report = train_bce(rm, rows, RMTrainConfig(lr=r.lr, epochs=r.epochs, batch_size=r.batch_size,
                                           holdout=0.0, seed=exp.train.seed,
                                           train_layers=r.train_layers), progress=False)
    rm.save(out)
    return {"train_loss": report.epochs[-1].train_loss,
            "train_accuracy": evaluate(rm, rows).accuracy, "steps": report.optimizer_steps}


def run_setup(exp: ExperimentConfig, out: Path) -> Setup:
    """Stage 1 for the seed folder ``out`` (skipped when ``out/setup/setup.json`` exists)."""
    folder = setup_dir(out)
    done = read_json(folder / "setup.json")
    if done:
        log.info("%s/setup: complete, reused", out.name)
        return Setup(**{k: _located(v, folder) for k, v in done["setup"].items()})
    if folder.exists():  # an interrupted setup: start it over (it takes seconds to minutes)
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    log.info("%s/setup: building", out.name)
    t0 = time.perf_counter()
    seed = exp.train.seed
    s = exp.setup
    policy = (str(_tiny_model(s.policy, "policy", folder, seed)) if s.policy in TINY_NAMES
              else s.policy)
    base = _reward_base(s.reward_model, folder, seed)
    info: dict[str, Any] = {}
    if exp.rm_init.triples:
        data = _triples_file(folder / "rm_train.jsonl", exp.rm_init.dataset, exp.rm_init.split,
                             exp.rm_init.triples, seed, exp.rm_init.unfinished,
                             exp.rm_init.min_change)
        info["rm_init"] = _train_initial_rm(exp, base, data, folder / "reward_model")
        reward_model = str(folder / "reward_model")
    else:
        reward_model = base
    probe = exp.probe.file or str(_triples_file(folder / "probe.jsonl", exp.probe.dataset,
                                                exp.probe.split, exp.probe.triples, seed + 1))
    info["probe_accuracy"] = _probe_accuracy(reward_model, probe)
    setup = Setup(policy, reward_model, probe)
    info["initial_eval"] = evaluate_policy(exp, policy, folder / "initial_eval.json")
    stored = {k: _stored(v, folder) for k, v in dataclasses.asdict(setup).items()}
    write_json(folder / "setup.json", {"setup": stored, **info,
                                       "seconds": time.perf_counter() - t0}, default=str)
    return setup


def _stored(path: str, folder: Path) -> str:
    """What ``setup.json`` records: a path inside the setup folder relative to it, so that a
    moved or copied experiment folder (a run brought home from a cluster, a seed's setup reused
    for a longer preset) uses its own files and not the ones where it was built; anything else
    (a model name, the user's probe file) as given."""
    try:
        return Path(path).resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return path


def _located(path: str, folder: Path) -> str:
    """The inverse of :func:`_stored`. A ``setup.json`` written before paths were relative holds
    absolute ones, which are used as they are."""
    inside = folder / path
    return str(inside) if not Path(path).is_absolute() and inside.exists() else path


def _probe_accuracy(reward_model: str, probe: str) -> float:
    return evaluate(RewardModel.load(reward_model, dtype="float32"),
                    load_triples(probe).rows).accuracy
