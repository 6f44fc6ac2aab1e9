"""Where an experiment's files are: one folder per seed, holding its setup and one run per arm.

```
OUT/experiment.yaml        resolved settings (a rerun with other settings is refused)
OUT/experiment.json        software versions, one entry per session
OUT/seed-S/setup/          what every arm of seed S starts from (setup.json written last)
OUT/seed-S/arms/ARM/       a `cooper train` run folder + trained.json, final_eval.json, arm.json
OUT/report/                written by `cooper report`
```

The writer (:mod:`cooper.experiment.hacking`) and the reader (:mod:`cooper.experiment.report`)
both take the paths from here. The first round's folders (one seed, ``OUT/setup`` and
``OUT/arms/ARM``, an ``experiment.yaml`` without ``seeds``) are read as one seed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cooper.config.experiment import parse_seeds

SETTINGS_FILE = "experiment.yaml"
STATUS_FILE = "experiment.json"


def seed_dir(out: str | Path, seed: int) -> Path:
    """The folder of one seed: its setup and its arms."""
    return Path(out) / f"seed-{seed}"


def arm_dir(seed_folder: Path, arm: str) -> Path:
    """One arm's ``cooper train`` run folder inside a seed's folder."""
    return seed_folder / "arms" / arm


def setup_dir(seed_folder: Path) -> Path:
    return seed_folder / "setup"


def seed_folders(out: str | Path, settings: dict[str, Any]) -> list[tuple[int, Path]]:
    """(seed, folder) for each seed of the experiment whose ``experiment.yaml`` is
    ``settings``; a first-round folder (no ``seeds`` setting) is one seed at ``out`` itself."""
    if "seeds" not in settings:
        return [(int(settings["train"]["seed"]), Path(out))]
    seeds = (parse_seeds(settings["seeds"]) if settings["seeds"] is not None
             else [int(settings["train"]["seed"])])
    return [(s, seed_dir(out, s)) for s in seeds]
