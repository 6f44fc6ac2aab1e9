"""What a reward-model folder says about how to read it.

A folder written by :meth:`cooper.rm.model.RewardModel.save` carries :data:`SPEC_FILE`: the input
spec (:class:`cooper.rm.template.InputSpec`), the template version it was trained with, and the
temperature :mod:`cooper.rm.calibration` fitted; :func:`read_spec` reads it back and refuses a
model trained under another template version. A folder without it that holds a one-label
sequence classifier (:func:`is_plain_classifier`), such as the paper's released VerifyRM, is read
in the released format, with the one-line notice :func:`released_notice`
(:mod:`cooper.rm.model`, "Bring your own VerifyRM"). Pure Python on files and JSON.
"""

from __future__ import annotations

import json
import logging
import math
import os
from dataclasses import fields
from pathlib import Path
from typing import Any

from cooper.errors import UserError
from cooper.rm.template import COOPER, SPEC_FILE, TEMPLATE_VERSION, InputSpec, render_released
from cooper.types import Triple

log = logging.getLogger(__name__)


def check_temperature(value: Any) -> float:
    """A usable temperature (a finite number > 0) as a float, or a UserError."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or value <= 0:
        raise UserError(f"temperature must be a finite number > 0, got {value!r}")
    return float(value)


def is_plain_classifier(path: str | os.PathLike) -> bool:
    """Whether a model folder's ``config.json`` names a one-label sequence classifier (as the
    released VerifyRM's does) rather than a causal LM."""
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(config, dict):
        return False
    archs = config.get("architectures") or []
    labels = config.get("num_labels") or len(config.get("id2label") or {0: 0, 1: 1})
    return (labels == 1 and isinstance(archs, list)
            and any(str(a).endswith("ForSequenceClassification") for a in archs))


def released_notice(path: str | os.PathLike, max_length: int) -> str:
    """The one line :meth:`RewardModel.load` logs for a folder read in the released format."""
    template = render_released(Triple("{q}", "{r}", "{c}")).replace("\n", "\\n")
    return (f"{path} has no {SPEC_FILE}: treating it as a plain sequence classifier in the "
            f"released VerifyRM format: template {template} (unescaped), tokenizer defaults "
            f"(its special tokens, truncation to {max_length} tokens from the right), "
            "temperature 1")


def read_spec(spec_path: Path, max_length: int | None) -> tuple[InputSpec, float, dict]:
    """The input spec, temperature and other keys of a saved :data:`SPEC_FILE`."""
    path = spec_path.parent
    saved = json.loads(spec_path.read_text())
    if not isinstance(saved, dict):
        raise UserError(f"{spec_path} is not a JSON object")
    version = saved.get("template_version")
    if saved.get("template", COOPER) == COOPER and version != TEMPLATE_VERSION:
        raise UserError(
            f"{path} was trained with template version {version}, this cooper-rl renders "
            f"version {TEMPLATE_VERSION}; retrain it, or use the cooper-rl release "
            "it was trained with")
    known = {f.name for f in fields(InputSpec)}
    try:
        spec = InputSpec(**{k: v for k, v in saved.items() if k in known})
        temperature = check_temperature(saved.get("temperature", 1.0))
    except (UserError, TypeError) as e:
        raise UserError(f"{spec_path}: {e}") from None
    extra = {k: v for k, v in saved.items() if k not in known and k != "temperature"}
    if max_length is not None and "max_length" in saved and max_length != spec.max_length:
        log.warning("%s was trained with max_length %d; scoring with %d", path,
                    spec.max_length, max_length)
    return spec, temperature, extra
