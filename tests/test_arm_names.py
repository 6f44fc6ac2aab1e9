"""The shipped experiment arms: short names and labels, no arm copied between preset files, and
docs/experiment/arm_names.md, which maps the names the committed reports ran under to today's."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from cooper.config.arms import LABEL, arm_train_config
from cooper.config.experiment import experiment_dir, list_experiment_presets, load_experiment

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "docs" / "experiment"
NAME_MAX, LABEL_MAX = 24, 60  # an arm's folder and table column; a plot's legend
# Each testbed states its plain arms itself: a base's arms come before the file's own (the
# merge keeps the base's order), so sharing these from one file would reorder the presets'
# arms and their reports' tables.
BASELINES = {"rule", "rm", "cooper_rollouts"}
# Every committed report ran before reward.mode=judged brought the check of the judge's "yes" and
# the rollouts' forms (commit a4817b8 was the last without them): its arms are read with those
# two off, as they ran, unless the arm set them itself.
PRE_DEFENCE = {"judge.counterfactual": False, "rm_update.rollout_forms": 0}


def shipped_files() -> list[Path]:
    """Every experiment preset file shipped, shared parts (arms/*.yaml) included."""
    return sorted(experiment_dir().rglob("*.yaml"))


def test_shipped_arms_have_short_names_and_labels():
    for preset in list_experiment_presets():
        for name, settings in load_experiment(preset).arms.items():
            assert len(name) <= NAME_MAX, (preset, name)
            assert len(settings.get(LABEL, "")) <= LABEL_MAX, (preset, name, settings[LABEL])


def test_no_arm_is_copied_between_preset_files():
    """An arm declared in two files' own text with the same settings is a copy: share it from
    one file (base: [..., arms/NAME.yaml]) instead."""
    where: dict[str, list[tuple[str, str]]] = {}
    for path in shipped_files():
        own = (yaml.safe_load(path.read_text()) or {}).get("arms")
        if not isinstance(own, dict):
            continue
        resolved = load_experiment(str(path)).arms  # `from:` and the file's base resolved
        for name in own:
            settings = {k: v for k, v in resolved[name].items() if k != LABEL}
            where.setdefault(repr(sorted(settings.items())), []).append(
                (path.relative_to(experiment_dir()).as_posix(), name))
    copies = [found for found in where.values() if len({f for f, _ in found}) > 1]
    assert {name for found in copies for _, name in found} <= BASELINES, copies


def test_the_shared_judged_arms_are_a_part_not_a_preset():
    part = experiment_dir() / "arms" / "judged.yaml"
    assert list(yaml.safe_load(part.read_text())) == ["arms"]  # arms only
    assert "judged" not in list_experiment_presets()  # not offered as a runnable preset
    # the package data ships it (pyproject's glob reaches the subfolder)
    data = (ROOT / "pyproject.toml").read_text()
    assert '"config/presets/**/*.yaml"' in data


def report_arms() -> dict[str, list[str]]:
    """Every arm name a committed report's experiment.yaml lists -> those reports."""
    names: dict[str, list[str]] = {}
    for path in sorted(REPORTS.glob("*/experiment.yaml")):
        arms = yaml.safe_load(path.read_text())["arms"]
        for name in arms.split(",") if isinstance(arms, str) else arms:
            names.setdefault(name.strip(), []).append(path.parent.name)
    return names


def table() -> dict[str, tuple[str, str]]:
    """arm_names.md's rows: name in the reports -> (reports, name now)."""
    rows = {}
    for line in (REPORTS / "arm_names.md").read_text().splitlines():
        m = re.match(r"\| `([^`]+)` \| ([^|]+) \| ([^|]+) \|$", line)
        if m:
            rows[m[1]] = (m[2].strip(), m[3].strip())
    return rows


def effective(cfg) -> dict:
    """A resolved arm's settings; reward.mode judged is hybrid_cooper with its settings."""
    out = cfg.resolve().to_dict()
    if out["reward"]["mode"] == "judged":
        out["reward"]["mode"] = "hybrid_cooper"
    return out


def test_arm_names_md_maps_every_name_the_reports_ran_under():
    reports, rows = report_arms(), table()
    assert set(rows) == set(reports)
    shipped = {p: load_experiment(p) for p in list_experiment_presets()}
    for old, (listed, now) in rows.items():
        assert listed == ", ".join(reports[old]), old
        m = re.match(r"`([^`]+)`", now)
        assert m or now.startswith(("removed", "not in the presets")), (old, now)
        if not m:
            continue
        declared = [exp for exp in shipped.values() if m[1] in exp.arms]
        assert declared, f"{old} -> {m[1]}: no shipped preset declares it"
        if m[1] == old:
            continue
        # a renamed arm trains as the reports' arm of the old name did
        for report in reports[old]:
            ran = yaml.safe_load((REPORTS / report / "experiment.yaml").read_text())["arms"][old]
            ran = {**PRE_DEFENCE, **ran}
            for exp in declared:
                before = arm_train_config(exp.train, old, ran)
                assert effective(exp.arm_train(m[1])) == effective(before), (old, m[1], report)


def test_every_committed_experiment_loads_or_names_the_commit_that_ran_it():
    """A committed report's experiment.yaml still loads (a removed setting at its old default
    changes nothing); one whose arm set a removed setting otherwise names the last commit that
    ran it, so the result stays reproducible from there."""
    from cooper.config.engine import ConfigError
    from cooper.config.experiment import load_experiment
    from cooper.config.reward_modes import FORMS_REMOVED_AT, REMOVED_AT

    loaded, named = [], []
    for path in sorted((ROOT / "docs" / "experiment").glob("*/experiment.yaml")):
        try:
            exp = load_experiment(str(path))
            for arm in exp.arm_list:
                exp.arm_train(arm)
            loaded.append(path.parent.name)
        except ConfigError as e:
            assert any(f"last run at commit {c}" in str(e)
                       for c in (REMOVED_AT, FORMS_REMOVED_AT)), (path, e)
            named.append(path.parent.name)
    assert "blind_cpu_replay16" in loaded and "hacking_cpu" in loaded
    assert "blind_cpu_audited" in named and len(loaded) > len(named)
