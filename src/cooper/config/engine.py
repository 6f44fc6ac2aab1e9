"""The settings engine: YAML files and ``key=value`` overrides applied to settings dataclasses.

Every settings family (:mod:`cooper.config.train`, :mod:`cooper.config.rm`,
:mod:`cooper.config.experiment`, ...) is a tree of dataclasses whose fields carry a type and a
one-line docstring below them. This module reads a preset (a YAML mapping that lists only what
differs from the defaults) and ``section.key=value`` overrides, and applies them field by field:
an unknown key, a value of the wrong type or a section given a scalar stops with a
:class:`ConfigError` that names the fix. Values are converted to the declared type; nothing is
silently rewritten.

A preset may start from another of its family: ``base: NAME`` (a shipped preset's name, or a path
to a .yaml file, relative to the folder of the file that names it) reads NAME first, then the
file's own keys on top (:func:`read_preset`); mappings merge key by key, any other value replaces.
``base: [NAME, NAME]`` reads each in order (each with its own ``base:``), a later one on top of an
earlier one, then the file's own keys: so presets share a part (an experiment's arms) from one
file instead of copies.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import inspect
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from cooper.errors import UserError


class ConfigError(UserError):
    """A bad configuration key or value."""


def choice(key: str, value: str, allowed: tuple[str, ...]) -> None:
    """Raise unless ``value`` is one of ``allowed``."""
    if value not in allowed:
        raise ConfigError(f"{key}={value!r} is not one of: {', '.join(allowed)}")


def _fields(obj: Any) -> dict[str, dataclasses.Field]:
    return {f.name: f for f in dataclasses.fields(obj)}


def coerce(key: str, value: Any, annotation: Any) -> Any:
    """Convert a YAML or command-line value to the field's declared type, or explain why not."""
    tp = annotation
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null", "")):
            return None
        return coerce(key, value, args[0])
    try:
        if tp is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "yes", "1", "on"):
                return True
            if isinstance(value, str) and value.lower() in ("false", "no", "0", "off"):
                return False
            raise ValueError
        if tp is int:
            if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
                raise ValueError
            return int(value)
        if tp is float:
            if isinstance(value, bool):
                raise ValueError
            return float(value)
        if tp is str:
            if isinstance(value, dict | list):
                raise ValueError
            return str(value)
    except (TypeError, ValueError):
        pass
    else:
        return value
    name = getattr(tp, "__name__", str(tp))
    raise ConfigError(f"{key}={value!r} is not a valid {name}")


def apply_settings(obj: Any, mapping: dict[str, Any], prefix: str = "") -> None:
    """Set ``obj``'s fields (recursively into sections) from a nested mapping, typed by field."""
    hints = typing.get_type_hints(type(obj))
    fields = _fields(obj)
    for key, value in mapping.items():
        full = f"{prefix}{key}"
        removed = getattr(type(obj), "REMOVED", {})  # {key: (its old default, last commit)}
        if key not in fields and key in removed:
            old, commit = removed[key]
            if coerce(full, value, type(old)) != old:
                raise ConfigError(f"'{full}' was removed (a variant that lost; last run at commit "
                                  f"{commit}): drop it, or check out that commit to rerun")
            continue  # at its old default it changed nothing: an old file still loads
        if key not in fields:
            close = difflib.get_close_matches(key, fields, n=1)
            hint = f" (did you mean '{prefix}{close[0]}'?)" if close else ""
            raise ConfigError(f"unknown setting '{full}'{hint}; settings here: "
                              f"{', '.join(prefix + f for f in fields)}")
        current = getattr(obj, key)
        if dataclasses.is_dataclass(current):
            if not isinstance(value, dict):
                raise ConfigError(f"'{full}' is a section; set its keys, e.g. {full}.KEY=VALUE")
            apply_settings(current, value, prefix=f"{full}.")
        else:
            setattr(obj, key, coerce(full, value, hints[key]))


def get_key(cfg: Any, dotted: str) -> Any:
    """``cfg.a.b`` for ``"a.b"``."""
    for part in dotted.split("."):
        cfg = getattr(cfg, part)
    return cfg


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """['a.b=1', 'c=x'] -> {'a': {'b': '1'}, 'c': 'x'} (values typed later, by field)."""
    pairs = []
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override '{item}' must look like section.key=value")
        key, value = item.split("=", 1)
        pairs.append((key, value))
    return nest(pairs)


def nest(items: Mapping[str, Any] | Iterable[tuple[str, Any]],
         into: dict[str, Any] | None = None) -> dict[str, Any]:
    """Dotted keys (``'a.b': 1``) and nested mappings (``{'a': {'b': 1}}``), mixed as the user
    likes, as one nested mapping for :func:`apply_settings`; values are kept as given. A later
    key wins over an earlier one."""
    tree: dict[str, Any] = {} if into is None else into
    for key, value in (items.items() if isinstance(items, Mapping) else items):
        parts = str(key).strip().split(".")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"'{key}' sets a key inside a value")
        if isinstance(value, Mapping):
            sub = node.setdefault(parts[-1], {})
            if not isinstance(sub, dict):
                raise ConfigError(f"'{key}' is given both a value and keys")
            nest(value, into=sub)
        else:
            node[parts[-1]] = value
    return tree


def flat_keys(tree: Mapping[str, Any], prefix: str = "") -> list[str]:
    """The dotted names of a nested mapping's values: {'a': {'b': 1}, 'c': 2} -> ['a.b', 'c']."""
    out: list[str] = []
    for key, value in tree.items():
        if isinstance(value, Mapping):
            out += flat_keys(value, f"{prefix}{key}.")
        else:
            out.append(f"{prefix}{key}")
    return out


def read_settings_file(path: Path) -> dict[str, Any]:
    """A YAML file of settings as a mapping (empty file: no settings); a clear error otherwise."""
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping of settings")
    return data


def preset_dir() -> Path:
    """The folder of the presets shipped with cooper-rl."""
    return Path(str(resources.files("cooper.config") / "presets"))


def list_presets() -> list[str]:
    """Names of the shipped ``cooper train`` presets."""
    return sorted(p.stem for p in preset_dir().glob("*.yaml"))


def find_preset(name: str, folder: Path, relative_to: Path | None = None,
                what: str = "preset") -> Path:
    """A preset of the family shipped in ``folder`` (its name) or a path to a YAML file (relative
    to ``relative_to`` when given, else to the working folder), checked to exist."""
    path = Path(name).expanduser()
    if path.suffix in (".yaml", ".yml"):
        if relative_to is not None and not path.is_absolute():
            path = relative_to / path
        if not path.is_file():
            raise ConfigError(f"config file not found: {path}")
        return path
    path = folder / f"{name}.yaml"
    if not path.is_file():
        names = sorted(p.stem for p in folder.glob("*.yaml"))
        raise ConfigError(f"unknown {what} '{name}'; presets: {', '.join(names)} "
                          "(or pass a path to a .yaml file)")
    return path


def preset_path(name: str, relative_to: Path | None = None) -> Path:
    """A ``cooper train`` preset name (shipped) or a path to a YAML file, checked to exist."""
    return find_preset(name, preset_dir(), relative_to)


BASE = "base"  # the key of a preset that names the preset it starts from


def deep_merge(base: Mapping[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over`` on top: mappings merge key by key, recursively; any other value of
    ``over`` replaces ``base``'s."""
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def nest_settings(data: Mapping[str, Any], named: Iterable[str] = ()) -> dict[str, Any]:
    """A preset's settings as one nested mapping (:func:`nest`), so that dotted and nested keys
    merge alike; the value of each key in ``named`` is a mapping NAME -> settings (an
    experiment's ``arms``) whose names stay keys (a name may hold a '.') and whose settings are
    nested in turn."""
    data = dict(data)
    groups = {key: data.pop(key) for key in named if key in data}
    tree = nest(data)
    for key, value in groups.items():
        if key in tree:
            raise ConfigError(f"'{key}' is given both as '{key}:' and as dotted keys "
                              f"'{key}.NAME'; declare every one under '{key}:'")
        if isinstance(value, Mapping):
            value = {name: nest(s) if isinstance(s, Mapping) else s for name, s in value.items()}
        tree[key] = value
    return tree


def _base_names(path: Path, base: Any) -> list[str]:
    """The presets a file's ``base:`` names, in order: one name, or a list of them."""
    names = base if isinstance(base, list) else [base]
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise ConfigError(f"{path}: base: {base!r} must name the preset this one starts from: a "
                          "shipped preset's name (base: hacking_cpu) or a path to a .yaml file, "
                          "relative to this file's folder (base: mine.yaml); or a list of them, "
                          "read in order, a later one on top (base: [hacking_cpu, mine.yaml])")
    return [n.strip() for n in names]


def read_preset(path: Path, find: Callable[[str, Path], Path],
                named: Iterable[str] = ()) -> dict[str, Any]:
    """A preset's settings with its ``base:`` resolved: each base in order (itself read the same
    way), a later one deep-merged on top of an earlier one, then the file's own keys on top
    (:func:`deep_merge`), each file's settings nested first (:func:`nest_settings`, ``named`` as
    there). ``find(name, relative_to)`` turns a base's name into a path of the same family
    (``relative_to``: the folder of the file that names it). A file that is its own base, through
    any chain, fails naming the chain."""
    return _read_layers(path, path.stem, find, tuple(named), ())


def _read_layers(path: Path, label: str, find: Callable[[str, Path], Path],
                 named: tuple[str, ...], chain: tuple[tuple[Path, str], ...]) -> dict[str, Any]:
    """:func:`read_preset` of ``path`` (named ``label``), read from the files in ``chain``
    ((file, the name it was given by), from the first): only a file already in the chain is a
    loop; two bases may share a base of their own."""
    real = path.resolve()
    if any(real == seen for seen, _ in chain):
        loop = " -> ".join([*(name for _, name in chain), label])
        raise ConfigError(f"the presets' base: chain loops: {loop}; remove base: from one of "
                          "them")
    chain = (*chain, (real, label))
    data = read_settings_file(path)
    has_base, base = BASE in data, data.pop(BASE, None)
    try:
        own = nest_settings(data, named)
    except ConfigError as e:
        raise ConfigError(f"{path}: {e}") from None
    settings: dict[str, Any] = {}
    for name in _base_names(path, base) if has_base else []:
        try:
            found = find(name, path.parent)
        except ConfigError as e:
            raise ConfigError(f"{path}: base: {e}") from None
        settings = deep_merge(settings, _read_layers(found, name, find, named, chain))
    return deep_merge(settings, own)


def field_docs(cls: type, prefix: str = "") -> dict[str, str]:
    """Every setting's dotted name -> its one-line docstring (for --help and the docs)."""
    docs: dict[str, str] = {}
    body = ast.parse(inspect.getsource(cls)).body[0].body  # type: ignore[attr-defined]
    for node, nxt in zip(body, body[1:], strict=False):
        if isinstance(node, ast.AnnAssign) and isinstance(nxt, ast.Expr) and isinstance(
                getattr(nxt, "value", None), ast.Constant):
            docs[prefix + node.target.id] = nxt.value.value  # type: ignore[attr-defined]
    for f in dataclasses.fields(cls):
        if f.default_factory is not dataclasses.MISSING and dataclasses.is_dataclass(
                f.default_factory):
            docs.update(field_docs(f.default_factory, f"{prefix}{f.name}."))
    return docs
