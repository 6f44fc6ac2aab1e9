"""The reward-hacking experiment: rule vs. fixed reward model vs. Cooper, side by side.

One experiment trains the same initial policy once per *arm*, changing only what the arm's settings
change (:mod:`cooper.config.arms`; ``docs/method.md`` "The paper's numbers"): typically ``rule``
(the verifier pays), ``rm`` (a frozen reward model pays) and ``cooper`` (the same reward model,
updated every step), and variants of Cooper's update. Everything else is shared: the seed, the
training and held-out data, the initial policy, the initial reward model and the step budget. Each
arm is an ordinary ``cooper train`` run (:func:`cooper.rl.runner.run`), so the per-step records are
the trainer's own metrics (``docs/metrics.md``): the training reward, ``reward/rule_mean`` (verified
accuracy of the rollouts), ``hacking/gap``, ``hacking/top_wrong``, ``rm/agreement`` and, every
``validation.every_steps`` steps, held-out accuracy and the reward model on a fixed labelled probe
set (``val/rm_probe_accuracy``, ``val/rm_probe_auroc``: the paper's Figure 4).

The whole experiment is repeated once per seed (``seeds``), each seed in its own folder
(:mod:`cooper.report.experiment_layout`) with its own setup. Stages, each written into that
folder and skipped when a rerun finds it complete, so an interrupted experiment continues where
it stopped (an arm also resumes from its last checkpoint):

1. setup (``OUT/seed-S/setup``, :mod:`cooper.experiment.setup`): the initial policy (a built tiny
   model is copied in), the initial reward model (optionally trained briefly with BCE on
   perturbed triples), the probe set, and the initial policy's benchmark scores (the "no RL"
   row);
2. each arm (``OUT/seed-S/arms/ARM``, this module): training, then the final policy on the
   benchmarks and, with ``final_eval.policies`` > 1, the policies kept at the last steps
   before it, whose mean is the report's headline (:mod:`cooper.experiment.final_eval`).

Stages run one after another, or up to ``--jobs N`` at once in worker processes
(:mod:`cooper.experiment.jobs`). The settings are
:class:`cooper.config.experiment.ExperimentConfig`; ``cooper report OUT`` turns the folder into
plots and a report (:mod:`cooper.report.experiment_report`).
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import yaml

from cooper.config.experiment import ExperimentConfig
from cooper.config.train import TrainConfig
from cooper.errors import UserError
from cooper.experiment.final_eval import evaluate_policy, last_policies
from cooper.experiment.jobs import Stages, run_stages, threads_per_job
from cooper.experiment.setup import Setup, run_setup
from cooper.infra.environment import PACKAGES, environment, software_table
from cooper.infra.files import read_json, write_atomic, write_json
from cooper.report.experiment_layout import (
    LAST_POLICIES_FILE,
    SETTINGS_FILE,
    STATUS_FILE,
    arm_dir,
    listed_seeds,
    read_settings,
    setup_dir,
)
from cooper.rl.checkpoints import complete_checkpoints, kept_policy_dir
from cooper.rl.runner import finished_steps, run

log = logging.getLogger(__name__)


# ------------------------------------------------------------------ stage 2: the arms

def arm_config(exp: ExperimentConfig, arm: str, out: Path, setup: Setup) -> TrainConfig:
    """The arm's ``cooper train`` settings: the shared ones with the arm's own on top, and the
    seed folder's setup (``out``: ``OUT/seed-S``)."""
    cfg = exp.arm_train(arm)
    cfg.output_dir = str(arm_dir(out, arm))
    cfg.policy.model = setup.policy
    cfg.reward.model = setup.reward_model
    cfg.reward.monitor = True  # the rule arm logs the (frozen) reward model's gap too
    cfg.validation.rm_probe = setup.probe
    if cfg.rm_update.replay:
        # the rows the initial reward model was trained on
        rows = setup_dir(out) / "rm_train.jsonl"
        if not rows.is_file():
            raise UserError(f"arm '{arm}' replays the reward model's training rows "
                            "(rm_update.replay), but this setup trained none: set "
                            "rm_init.triples, or set rm_update.replay=0 in the arm")
        cfg.rm_update.replay_file = str(rows)
    # the policies before the final one that the final evaluation scores
    if exp.final_eval.policies > 1:
        cfg.keep_policy_steps = ",".join(map(str, exp.final_eval.steps(cfg.max_steps)[:-1]))
    return cfg.validate()


def run_arm(exp: ExperimentConfig, arm: str, out: Path, setup: Setup) -> dict[str, Any]:
    """Train one arm in a seed's folder ``out`` (resuming from its last checkpoint) and score
    its final policy."""
    import gc

    folder = arm_dir(out, arm)
    key = f"{out.name}/{arm}"
    done = read_json(folder / "arm.json")
    if done:
        log.info("%s: complete, skipped", key)
        return done
    trained = read_json(folder / "trained.json")
    if not trained:
        resume = bool(complete_checkpoints(folder))
        if not resume and finished_steps(folder):
            # trained to the end but stopped before trained.json, with no checkpoint to resume
            # from: `cooper train` refuses such a folder, and it is this arm's own, so it is
            # trained again from step 0
            log.info("%s: training was not recorded as complete; training again", key)
            shutil.rmtree(folder)
        log.info("%s: %s", key, "resuming" if resume else "training")
        result = run(arm_config(exp, arm, out, setup), resume=resume)
        trained = {"steps": result.steps, "seconds": result.seconds,
                   "resumed_from": str(result.resumed_from.name) if result.resumed_from else None}
        write_json(folder / "trained.json", trained, default=str)
        gc.collect()
    final = evaluate_policy(exp, str(folder / "policy"), folder / "final_eval.json")
    done = {"arm": arm, "seed": exp.train.seed, "train": trained, "final_eval": final}
    if exp.final_eval.policies > 1:  # the headline: the mean over the last policies
        cfg = arm_config(exp, arm, out, setup)
        kept = {s: kept_policy_dir(folder, s) for s in cfg.policy_steps()}
        done["final_eval_last"] = last_policies(exp, kept, cfg.max_steps, final,
                                                folder / LAST_POLICIES_FILE)
    write_json(folder / "arm.json", done, default=str)
    return done


def _check_same_settings(exp: ExperimentConfig, out: Path) -> None:
    """Refuse a folder that holds an experiment with other settings. The seeds and the arms may
    differ: a rerun may add seeds (each is a replicate in its own folder) or arms (``arms=NAME``
    runs some arms now and the rest later), but an arm already there keeps its settings.
    ``experiment.yaml`` then lists every seed and arm run so far, so the report finds them all."""
    path = out / SETTINGS_FILE
    now = exp.to_dict()
    now["seeds"] = ",".join(map(str, exp.seed_list))
    if path.is_file():
        before = read_settings(out)
        arms, diff = merge_arms(before.get("arms"), now["arms"])
        diff += _differences({**before, "seeds": None, "arms": None},
                             {**now, "seeds": None, "arms": None}, ExperimentConfig().to_dict())
        if diff:
            raise UserError(f"{out} holds an experiment with other settings ({'; '.join(diff[:5])}"
                            f"{'; ...' if len(diff) > 5 else ''}): rerun with the same preset and "
                            "overrides to continue it, or choose another --out")
        seen = listed_seeds(before)
        seeds = sorted(set(seen) | set(exp.seed_list))  # replicates: listed in order on a rerun
        if seeds == seen and arms == before.get("arms"):
            return
        now["seeds"], now["arms"] = ",".join(map(str, seeds)), arms
    write_atomic(path, yaml.safe_dump(now, sort_keys=False))


def merge_arms(before: Any, now: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(every arm of both runs, differences); an arm in both must have the same settings. When
    this run adds arms, its order comes first (a full preset after ``arms=NAME`` restores the
    preset's order), then the earlier runs' arms that it leaves out. A folder written before arms
    had names (``arms: rule,rm,cooper``) continues only with the same arms."""
    if not isinstance(before, dict):
        return now, [] if before == now else [f"arms: {before!r} -> {now!r}"]
    diff = [f"arms.{name}: {before[name]!r} -> {settings!r}" for name, settings in now.items()
            if name in before and before[name] != settings]
    if set(now) <= set(before):
        return before, diff
    return {**now, **{k: v for k, v in before.items() if k not in now}}, diff


_ABSENT = object()


def _differences(a: Any, b: Any, default: Any = _ABSENT, prefix: str = "") -> list[str]:
    """Where the settings ``a`` (the folder's) and ``b`` (this run's) differ. A setting ``a``
    lacks was added to cooper-rl after the folder was written: the run then had its default's
    behaviour, so this run's value differs only if it is not the default (``default``)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b)):
            sub = default.get(k, _ABSENT) if isinstance(default, dict) else _ABSENT
            out += _differences(a.get(k, _ABSENT), b.get(k, _ABSENT), sub, f"{prefix}{k}.")
        return out
    if a is _ABSENT and default is not _ABSENT:
        a = default
    return [] if a == b else [f"{prefix.rstrip('.')}: {_shown(a)} -> {_shown(b)}"]


def _shown(value: Any) -> str:
    return "(absent)" if value is _ABSENT else repr(value)


STAGES = Stages(setup=run_setup, arm=run_arm)


def run_experiment(exp: ExperimentConfig, out: str | os.PathLike, jobs: int = 1, *,
                   setup_only: bool = False) -> dict[int, dict[str, dict[str, Any]]]:
    """Per seed: setup, then each arm (``setup_only``: the setups alone, to see where every
    seed starts before spending the arms' hour); up to ``jobs`` stages at once in worker
    processes. Every stage is skipped when already complete. Returns ``{seed: {arm: result}}``."""
    exp.validate()
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: run at least one stage at a time (--jobs 1)")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    _check_same_settings(exp, out)
    status = read_json(out / STATUS_FILE) or {"experiment": "hacking", "sessions": []}
    status["versions"] = software_table(environment((*PACKAGES, "vllm")))
    session = {"started": time.strftime("%Y-%m-%d %H:%M:%S"), "seconds": None,
               "seeds": exp.seed_list, "arms": [] if setup_only else exp.arm_list, "jobs": jobs,
               "threads_per_job": threads_per_job(jobs) if jobs > 1 else None}
    status["sessions"].append(session)
    write_json(out / STATUS_FILE, status, default=str)
    t0 = time.perf_counter()
    results = run_stages(exp, out, STAGES, jobs, arms=[] if setup_only else None)
    session["seconds"] = time.perf_counter() - t0
    write_json(out / STATUS_FILE, status, default=str)
    return results
