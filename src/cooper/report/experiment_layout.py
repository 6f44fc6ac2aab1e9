"""Where an experiment's files are: one folder per seed, holding its setup and one run per arm.

```
OUT/experiment.yaml        resolved settings (a rerun with other settings is refused)
OUT/experiment.json        software versions, one entry per session
OUT/seed-S/setup/          what every arm of seed S starts from (setup.json written last;
                           failed.json instead where it failed the testbed's pre-check)
OUT/seed-S/arms/ARM/       a `cooper train` run folder + trained.json, final_eval.json, arm.json
                           and, when the last policies are scored, final_eval_last.json (their
                           mean: the headline) and final_eval.step-N.json (one kept policy);
                           rm_check.json where `cooper experiment rm-check` ran
OUT/report/                written by `cooper report`
```

The writer (:mod:`cooper.experiment.hacking`) and the reader
(:mod:`cooper.report.experiment_report`) both take the paths from here, which is why this module
sits in the report stage, below the experiment. The first round's folders (one seed,
``OUT/setup`` and ``OUT/arms/ARM``, an ``experiment.yaml`` without ``seeds``) are read as one
seed, and its string of arms' modes as arms (:func:`arm_specs`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from cooper.config.engine import ConfigError
from cooper.config.experiment import parse_seeds
from cooper.errors import UserError

SETTINGS_FILE = "experiment.yaml"
STATUS_FILE = "experiment.json"
LAST_POLICIES_FILE = "final_eval_last.json"
"""an arm's headline: the mean over its last policies (``final_eval.policies``)"""
SETUP_FAILED_FILE = "failed.json"
"""a seed's setup that failed the testbed's pre-check (``SetupCheckError``): its message, so that
the report leaves the seed out and says why, instead of calling it unfinished"""
RM_CHECK_FILE = "rm_check.json"
"""an arm's reward model before and after, on the same answers (``cooper experiment rm-check``)"""


def seed_dir(out: str | Path, seed: int) -> Path:
    """The folder of one seed: its setup and its arms."""
    return Path(out) / f"seed-{seed}"


def arm_dir(seed_folder: Path, arm: str) -> Path:
    """One arm's ``cooper train`` run folder inside a seed's folder."""
    return seed_folder / "arms" / arm


def setup_dir(seed_folder: Path) -> Path:
    return seed_folder / "setup"


def read_settings(out: str | Path) -> dict[str, Any]:
    """The ``experiment.yaml`` of folder ``out``, checked: the file may have been edited by hand,
    so empty, malformed or unreadable settings and seeds get an error that names it."""
    path = Path(out) / SETTINGS_FILE
    try:
        settings = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        mark = getattr(e, "problem_mark", None)  # YAML syntax: say where, in one line
        why = f"{e.problem}, line {mark.line + 1}" if mark and getattr(e, "problem", None) else e
        raise UserError(f"{path} cannot be read ({why}); restore it, or run the experiment into "
                        "another --out") from e
    if not isinstance(settings, dict) or not isinstance(settings.get("train"), dict):
        raise UserError(f"{path} holds no experiment settings (a mapping with a 'train' "
                        "section); restore it, or run the experiment into another --out")
    try:
        listed_seeds(settings)
    except (ConfigError, KeyError) as e:
        raise UserError(f"{path}: {e}") from e
    return settings


def listed_seeds(settings: dict[str, Any]) -> list[int]:
    """The seeds run so far in the experiment whose ``experiment.yaml`` is ``settings``: its
    ``seeds``, or ``train.seed`` for a first-round folder (no ``seeds`` setting)."""
    seeds = settings.get("seeds")
    return parse_seeds(seeds if seeds is not None else settings["train"]["seed"])


JUDGE_PAID = "rule_judge"
"""the report's mode of an arm paid by the rule and, where it rejects, a judge
(``reward.mode=rule`` with ``reward.judge_rejected``: TinyV's design): judged like the arms paid
by a reward model, not a reference"""


def arm_specs(settings: dict[str, Any]) -> list[tuple[str, str | None, str, dict[str, Any]]]:
    """(name, label, reward mode, own settings) of each arm that ``experiment.yaml`` lists: the
    mapping form, or the first round's string of modes. An arm whose rejections a judge pays
    has the mode :data:`JUDGE_PAID`."""
    arms, reward = settings["arms"], settings["train"]["reward"]
    if isinstance(arms, str):
        return [(n, None, n, {"reward.mode": n}) for n in (a.strip() for a in arms.split(","))
                if n]
    out = []
    for name, s in arms.items():
        mode = s.get("reward.mode", reward["mode"])
        if mode == "rule" and s.get("reward.judge_rejected", reward.get("judge_rejected")):
            mode = JUDGE_PAID
        out.append((name, s.get("label"), mode, s))
    return out


def pays_by_gold(settings: dict[str, Any], own: dict[str, Any]) -> bool:
    """Whether an arm's verifier is the gold judge (the ceiling of a blind-rule testbed)."""
    return own.get("reward.verifier_mode", settings["train"]["reward"].get("verifier_mode")) == "gold"


def seed_folders(out: str | Path, settings: dict[str, Any]) -> list[tuple[int, Path]]:
    """(seed, folder) for each seed of the experiment whose ``experiment.yaml`` is
    ``settings``; a first-round folder (no ``seeds`` setting) is one seed at ``out`` itself."""
    if "seeds" not in settings:
        return [(listed_seeds(settings)[0], Path(out))]
    return [(s, seed_dir(out, s)) for s in listed_seeds(settings)]
