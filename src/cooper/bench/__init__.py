"""Performance benchmarks: each module is a ``cooper bench NAME`` command that prints and saves JSON.

A benchmark module exposes ``add_arguments(parser)`` and ``run(args) -> dict``. The command adds
the environment the figures were measured in (:func:`environment`) and writes the result to
``--out``. Benchmarks are commands, not tests: figures are measured, never asserted in the suite.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from cooper.infra.files import write_atomic

PACKAGES = ("cooper-rl", "torch", "transformers", "trl", "accelerate", "math-verify")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def environment() -> dict[str, Any]:
    """Where a figure was measured: machine, Python, package versions, torch threads."""
    import torch

    versions = {}
    for pkg in PACKAGES:
        try:
            versions[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            versions[pkg] = None
    return {
        "date": time.strftime("%Y-%m-%d"),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "cuda": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "versions": versions,
    }


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
