"""What a result was produced with: the one snapshot of software and machine.

Evaluation results, experiment status files and benchmark figures all record it, so that a
number can be traced to the code, the packages and the hardware behind it. Versions come from
the installed distributions, except cooper-rl's own, which is the version of the code that
actually ran (:data:`cooper.__version__`): with a source checkout first on the path, the
installed distribution may be another copy.
"""

from __future__ import annotations

import os
import platform
import sys
import time
from collections.abc import Sequence
from importlib import metadata
from typing import Any

from cooper import __version__
from cooper.infra.allocator import ONEDNN_CACHES
from cooper.infra.cpuinfo import cpuinfo

PACKAGES = ("cooper-rl", "torch", "transformers", "trl", "accelerate", "math-verify")
"""The packages whose versions decide results; a caller adds others it uses (e.g. vllm)."""


def _cpu_model() -> str:
    return cpuinfo("model name") or platform.processor() or "unknown"


def cpu_bfloat16() -> bool:
    """Whether this CPU multiplies bfloat16 matrices in hardware (AVX512-BF16 or AMX tiles).

    Where it does, torch's bfloat16 matrix products run at about 2.8 times the speed of float32
    through MKL (one core of the 2-core AMD EPYC that `cooper demo`'s figures come from: a
    [640, 576] x [576, 1536] product in 4.7 ms against 13.2 ms), and still faster than float32
    through oneDNN (:mod:`cooper.infra.cpu_linear`: the demo's reward model trained in 181-187 s
    against 257-259 s on the same day); where it does not, they are emulated and slower than
    float32. torch exposes the check only as private functions of ``torch.cpu``, so a torch
    without them reads as False."""
    import torch

    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    try:
        return any(getattr(torch.cpu, name, lambda: False)() for name in checks)
    except RuntimeError:
        return False


def package_versions(packages: Sequence[str] = PACKAGES) -> dict[str, str | None]:
    """Each package's installed version, None where it is not installed."""
    out: dict[str, str | None] = {}
    for pkg in packages:
        if pkg == "cooper-rl":
            out[pkg] = __version__
            continue
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def environment(packages: Sequence[str] = PACKAGES, *, hardware: bool = True) -> dict[str, Any]:
    """Date, platform, Python and package versions; with ``hardware`` also the CPU, the torch
    threads, the library that float32 products of CPU linear layers go to in this process
    (:mod:`cooper.infra.cpu_linear`; bfloat16 and GPU products never do), the capacities of
    oneDNN's primitive caches where set (:func:`cooper.infra.allocator.bound_onednn_caches`) and
    the CUDA device (this imports torch, so callers that never load a model may leave it out)."""
    env: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
    }
    if hardware:
        import torch

        from cooper.infra import cpu_linear

        env.update(cpu=_cpu_model(), cpu_count=os.cpu_count(),
                   torch_threads=torch.get_num_threads(), cpu_bfloat16=cpu_bfloat16(),
                   float32_matmul="onednn" if cpu_linear.wanted() else "blas",
                   onednn_caches={name: os.environ.get(name) for name in ONEDNN_CACHES},
                   cuda=torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)
    env["versions"] = package_versions(packages)
    return env


def software_table(env: dict[str, Any]) -> dict[str, str]:
    """A hardware :func:`environment` as one flat name -> value table for a report: cooper-rl,
    Python, the installed packages and the device."""
    versions = {k: v for k, v in env["versions"].items() if v is not None}
    matmul = f", float32 matmul: {env['float32_matmul']}" if "float32_matmul" in env else ""
    device = (f"cuda ({env['cuda']})" if env["cuda"] else
              f"cpu ({env['cpu_count']} cores, {env['torch_threads']} torch threads{matmul})")
    return {"cooper-rl": versions.pop("cooper-rl", "unknown"), "python": env["python"],
            **versions, "device": device}
