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

1. setup (``OUT/setup``, :mod:`cooper.experiment.setup`): the initial policy (a built tiny
   model is copied in), the initial reward model (optionally trained briefly with BCE on
   perturbed triples), the probe set, and the initial policy's benchmark scores (the "no RL"
   row);
2. each arm in turn (``OUT/arms/ARM``, this module): training, then the final policy on the
   benchmarks (:mod:`cooper.experiment.final_eval`).

Arms run one after another, not in parallel: on a small CPU they would only slow each other
down. The settings are :class:`cooper.config.experiment.ExperimentConfig`; ``cooper report OUT``
turns the folder into plots and a report (:mod:`cooper.experiment.report`).
"""

from __future__ import annotations

import copy
import logging
import os
import time
from pathlib import Path
from typing import Any

import yaml

from cooper.config.experiment import ExperimentConfig
from cooper.config.train import TrainConfig
from cooper.errors import UserError
from cooper.experiment.final_eval import evaluate_policy
from cooper.experiment.setup import Setup, run_setup
from cooper.infra.environment import PACKAGES, environment, software_table
from cooper.infra.files import read_json, write_atomic, write_json
from cooper.rl.checkpoints import complete_checkpoints
from cooper.rl.runner import run

log = logging.getLogger(__name__)

SETTINGS_FILE = "experiment.yaml"
STATUS_FILE = "experiment.json"


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
