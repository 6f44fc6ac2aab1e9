"""Performance benchmarks: each module is a ``cooper bench NAME`` command that prints and saves JSON.

A benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> dict``. The command adds
the environment the figures were measured in (:func:`cooper.infra.environment.environment`)
and writes the result to ``--out``. Benchmarks are commands, not tests: figures are measured,
never asserted in the suite.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cooper.infra.environment import environment
from cooper.infra.files import write_atomic


def save(result: dict[str, Any], out: str | os.PathLike | None, command: str) -> dict[str, Any]:
    """Attach the command and environment, print the JSON, and write it to ``out``."""
    full = {**result, "command": command, "environment": environment()}
    text = json.dumps(full, indent=2)
    print(text)
    if out:
        path = Path(out)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text + "\n")
    return full
