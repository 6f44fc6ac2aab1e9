"""oneMKL and OpenMP on a fixed thread count: the same numbers on a busy machine."""

from __future__ import annotations

import subprocess
import sys

from conftest import cli_env

PROBE = """
import os, sys
from cooper.infra.threads import fixed_math_threads
before = fixed_math_threads()  # torch not loaded: only the variables
import torch
after = fixed_math_threads()  # torch loaded: oneMKL told directly, where torch has it
mkl = torch.backends.mkl.is_available()
print(before, after, mkl, os.environ["MKL_DYNAMIC"], os.environ["OMP_DYNAMIC"])
"""


def probe(**env: str) -> list[str]:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=cli_env(**env), timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout.split()


def test_dynamic_threads_are_switched_off_for_this_process_and_its_children():
    env = cli_env()
    env.pop("MKL_DYNAMIC", None)
    env.pop("OMP_DYNAMIC", None)
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    before, after, mkl, mkl_dynamic, omp_dynamic = proc.stdout.split()
    assert (before, mkl_dynamic, omp_dynamic) == ("False", "FALSE", "FALSE")
    assert after == mkl  # told directly wherever torch was built with oneMKL


def test_a_user_who_asks_for_dynamic_threads_keeps_them():
    before, after, _, mkl_dynamic, omp_dynamic = probe(MKL_DYNAMIC="TRUE")
    assert (before, after, mkl_dynamic, omp_dynamic) == ("False", "False", "TRUE", "FALSE")


def test_torch_loaded_first_is_warned_about_with_the_fix():
    """oneMKL told at run time was not enough in a user's script under load: a call that finds
    torch loaded and MKL_DYNAMIC unset says how to set it before torch loads; set in time, none."""
    late = "import torch\nfrom cooper.infra.threads import fixed_math_threads\nfixed_math_threads()"
    env = cli_env()
    env.pop("MKL_DYNAMIC", None)
    proc = subprocess.run([sys.executable, "-c", late], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0 and "MKL_DYNAMIC=FALSE python train.py" in proc.stderr
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0 and "MKL_DYNAMIC" not in proc.stderr
