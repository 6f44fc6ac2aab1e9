"""Arms of an experiment: named sets of ``cooper train`` settings, applied on top of its shared
``train`` section.

An experiment preset declares its arms by name, each a mapping of ``cooper train`` settings
(dotted keys such as ``rm_update.lr`` or nested mappings, mixed as one likes) and an optional
``label``, the arm's name in the report::

    arms:
      rule:   {reward.mode: rule}
      cooper: {reward.mode: cooper, rm_update.negatives: assistant, rm_update.epochs: 1}
      cooper_rollouts: {reward.mode: cooper, rm_update.negatives: rollouts, label: Cooper (rollouts)}

An arm lists only what differs from ``train``; what it leaves out (``reward.mode`` included) is
the shared value. An arm may build on another arm of the same preset: ``from: NAME`` starts from
NAME's settings (as the preset's ``base:`` chain leaves them; NAME may itself build on another)
and puts the arm's own on top, key by key; NAME's ``label`` is not inherited::

    arms:
      judged: {label: Cooper taught by a judge, reward.mode: judged, judge.backend: gold}
      judged_replay8: {from: judged, rm_update.replay: 8}

An arm is recorded with its settings resolved (no ``from``): ``experiment.yaml`` shows what it
ran, and a rerun that changes NAME changes the arms built on it too, which the rerun's check sees.

The first round's form, a comma-separated string of reward modes (``arms: rule,rm,cooper``),
means one arm per mode with only ``reward.mode`` set. On the command
line ``arms=NAME,NAME`` *selects* declared arms, in that order; a reward mode that is not
declared there (``rule``, ``rm``, ``cooper``) is the plain arm of that mode, so ``arms=rm,cooper``
works on every preset. Every arm's settings are checked by the settings engine when read: an
unknown key or a bad value fails with ``arms.NAME.KEY`` in the message.

Takes the ``arms`` value of a preset or override; hands on ``{name: {"label"?: str, dotted key:
typed value}}``, the form ``experiment.yaml`` records, and each arm's :class:`TrainConfig`.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from cooper.config.engine import (
    ConfigError,
    apply_settings,
    deep_merge,
    flat_keys,
    get_key,
    nest,
)
from cooper.config.reward_modes import MODES
from cooper.config.train import TrainConfig

LABEL = "label"  # a key of an arm that is not a `cooper train` setting: its name in the report
FROM = "from"  # nor this one: the arm it builds on, resolved when the arms are declared

# An arm's name is its run folder (OUT/seed-S/arms/NAME): a plain name on every file system.
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")

# Settings the experiment sets for every arm itself; an arm that set them would be overwritten.
RESERVED = {
    "output_dir": "each arm's run folder is OUT/seed-S/arms/NAME",
    "seed": "the experiment's seeds set it (seeds=0,1,2)",
    "policy.model": "every arm starts from the setup's initial policy (setup.policy)",
    "reward.model": "every arm starts from the setup's initial reward model (setup.reward_model)",
    "validation.rm_probe": "every arm is probed with the setup's probe set (probe.*)",
    "rm_update.replay_file": "an arm replays the rows the setup trained its reward model on",
    "reward.monitor": "every arm scores its rollouts with the reward model (the rule arm's only "
                      "watches), so every arm logs the hacking figures",
    "keep_policy_steps": "the experiment keeps the policies its final evaluation scores "
                         "(final_eval.policies)",
}


def mode_arms(modes: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
    """One arm per reward mode, named after it: the string form ``rule,rm,cooper``."""
    return {m: {"reward.mode": m} for m in modes}


def _names(value: str | list, what: str) -> list[str]:
    names = ([n.strip() for n in value.split(",")] if isinstance(value, str)
             else [str(n).strip() for n in value])
    names = [n for n in names if n]
    if not names or len(set(names)) != len(names):
        raise ConfigError(f"{what}={value!r}: name each arm once, separated by commas")
    return names


def _mapping(name: str, settings: Any) -> dict[str, Any]:
    """An arm's own settings as a mapping, checked: its name and its value's form."""
    if not NAME.match(name):
        raise ConfigError(f"arm name {name!r}: use letters, digits, '_', '-' or '.' (it names "
                          "the arm's folder)")
    if settings is None:  # `NAME:` with nothing: the shared train settings as they are
        return {}
    if not isinstance(settings, dict):
        raise ConfigError(f"arms.{name} must be a mapping of `cooper train` settings, e.g. "
                          f"{{reward.mode: cooper, rm_update.lr: 1.0e-4}}; got {settings!r}")
    return dict(settings)


def resolve_from(arms: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each arm's settings with those of the arm its ``from:`` names underneath (that arm's own
    resolved first; its label left out), as nested mappings without ``from``. An unknown name
    or arms that build on each other in a loop fail, naming the fix."""
    done: dict[str, dict[str, Any]] = {}

    def resolve(name: str, chain: tuple[str, ...]) -> dict[str, Any]:
        if name in done:
            return done[name]
        own = nest(arms[name])  # dotted and nested keys alike, so that they merge key by key
        if FROM not in own:
            done[name] = own
            return own
        parent = own.pop(FROM)
        if not isinstance(parent, str) or not parent.strip():
            raise ConfigError(f"arms.{name}.from: {parent!r} must name another arm of this "
                              "preset, whose settings this arm starts from (from: judged)")
        parent = parent.strip()
        if parent not in arms:
            raise ConfigError(f"arms.{name}.from: no arm named '{parent}' in this preset; "
                              f"declared: {', '.join(arms)}. Name one of them, or drop from: "
                              "and list the arm's settings")
        if parent == name or parent in chain:
            loop = " -> ".join([*chain, name, parent])
            raise ConfigError(f"arms.{name}.from: the arms build on each other in a loop "
                              f"({loop}); remove from: from one of them")
        inherited = {k: v for k, v in resolve(parent, (*chain, name)).items() if k != LABEL}
        done[name] = deep_merge(inherited, own)
        return done[name]

    return {name: resolve(name, ()) for name in arms}


def arm_settings(name: str, settings: Any) -> dict[str, Any]:
    """One declared arm as ``{"label"?: str, dotted key: typed value}``, checked against the
    ``cooper train`` settings (the engine's error names ``arms.NAME.KEY``); ``from:`` is
    resolved before (:func:`resolve_from`)."""
    settings = _mapping(name, settings)
    label = settings.pop(LABEL, None)
    if label is not None and not isinstance(label, str | int | float):
        raise ConfigError(f"arms.{name}.label must be text, got {label!r}")
    tree = nest(settings)
    typed = TrainConfig()  # checks every key and converts its value to the field's type
    apply_settings(typed, tree, prefix=f"arms.{name}.")
    keys = flat_keys(tree)
    for key in keys:
        if key in RESERVED:
            raise ConfigError(f"arms.{name}.{key} cannot be set per arm: {RESERVED[key]}")
    out: dict[str, Any] = {LABEL: str(label)} if label is not None else {}
    out.update({key: get_key(typed, key) for key in keys})
    return out


def declare_arms(value: Any) -> dict[str, dict[str, Any]]:
    """The arms a preset declares: a mapping ``{NAME: settings}``, or the string (or list) of
    reward modes ``rule,rm,cooper``; returned in the form :func:`arm_settings` gives."""
    if isinstance(value, str | list | tuple):
        names = _names(value if isinstance(value, str) else list(value), "arms")
        bad = [n for n in names if n not in MODES]
        if bad:
            raise ConfigError(f"arms={value!r}: {', '.join(bad)} is not a reward mode; the list "
                              f"form names modes ({', '.join(MODES)}). Declare other arms as a "
                              "mapping in the preset: arms: {NAME: {reward.mode: cooper, ...}}")
        return mode_arms(names)
    if not isinstance(value, dict) or not value:
        raise ConfigError(f"arms must map each arm's name to its `cooper train` settings, e.g. "
                          f"arms: {{rule: {{reward.mode: rule}}}}; got {value!r}")
    own = {str(name): _mapping(str(name), s) for name, s in value.items()}
    return {name: arm_settings(name, s) for name, s in resolve_from(own).items()}


def select_arms(declared: dict[str, dict[str, Any]], selection: Any) -> dict[str, dict[str, Any]]:
    """The arms named by the override ``arms=NAME,NAME``, in that order: declared arms, or a
    reward mode not declared (its plain arm)."""
    if isinstance(selection, dict):
        raise ConfigError("arms.NAME.KEY=VALUE: arms are declared in YAML. Change one in a copy "
                          "of the preset (`--print-config > my.yaml`, then --preset my.yaml), or "
                          "change every arm with train.KEY=VALUE; on the command line, "
                          "arms=NAME,NAME selects declared arms")
    out = {}
    for name in _names(selection, "arms"):
        if name in declared:
            out[name] = copy.deepcopy(declared[name])
        elif name in MODES:
            out[name] = {"reward.mode": name}
        else:
            raise ConfigError(f"arms={selection}: no arm named '{name}'; declared: "
                              f"{', '.join(declared)} (or a reward mode: {', '.join(MODES)}); "
                              "declare new arms under arms: in the preset")
    return out


def arm_train_config(train: TrainConfig, name: str, settings: dict[str, Any]) -> TrainConfig:
    """The arm's ``cooper train`` settings: a copy of ``train`` with the arm's applied."""
    cfg = copy.deepcopy(train)
    apply_settings(cfg, nest({k: v for k, v in settings.items() if k != LABEL}),
                   prefix=f"arms.{name}.")
    return cfg
