"""Math libraries on a fixed thread count, so that a run's numbers do not depend on the load.

PyTorch's CPU build does its matrix products in Intel oneMKL, which by default
(``MKL_DYNAMIC=TRUE``) may use fewer threads than it was given, deciding at run time. How many
threads share a product decides how its sums are split, so a busy machine rounds differently
from an idle one: the TRL drop-in's resume test, with busy processes on every core, got a
reward model that differed from the uninterrupted run's in the ninth decimal in 2 of 3 runs (the
same rollouts, pairs and losses; only the update's rounding), and RL amplifies such differences
over steps. oneMKL's documented condition for results that repeat from run to run is a fixed
thread count with ``MKL_DYNAMIC`` and ``OMP_DYNAMIC`` false; with both false the same test
passed every time under the same load.

:func:`fixed_math_threads` sets both (unless the user set them) for this process and the ones it
starts, and switches oneMKL's dynamic adjustment off with ``MKL_Set_Dynamic(0)`` when torch is
already loaded (oneMKL reads the variable only when it starts). The ``cooper`` command calls it
at start; :class:`~cooper.rl.trl_reward.CooperRewardFunction` calls it too, for a user's own
TRL script. Elsewhere than a torch built with oneMKL it only sets the variables.

That late call is not enough: the example TRL script (``examples/cooper_grpo.py``), resumed with
two busy processes on the 2 cores, gave a reward model that differed from the uninterrupted
run's in the last digits in 10 runs of 10 with torch loaded first, and in none of 4 with the
variables set before torch loaded (as the example now does). So a call that finds torch loaded
and ``MKL_DYNAMIC`` unset warns, saying how to set it in time.
"""

from __future__ import annotations

import ctypes
import logging
import os
import sys

log = logging.getLogger(__name__)

VARIABLES = ("MKL_DYNAMIC", "OMP_DYNAMIC")


def fixed_math_threads() -> bool:
    """Ask oneMKL and OpenMP not to change their thread counts at run time; True when oneMKL
    was told so directly (torch loaded, with oneMKL), False when only the variables were set
    (they take effect when oneMKL starts) or the user asked for dynamic threads."""
    if "torch" in sys.modules and "MKL_DYNAMIC" not in os.environ:
        log.warning("torch was loaded before MKL_DYNAMIC was set: oneMKL may still change its "
                    "thread count under load, and a busy machine then rounds differently (a "
                    "resumed run can differ from an uninterrupted one in the last digits). Set "
                    "MKL_DYNAMIC=FALSE before torch loads: `MKL_DYNAMIC=FALSE python train.py`, "
                    "or at the top of the script, as examples/cooper_grpo.py does")
    for name in VARIABLES:
        os.environ.setdefault(name, "FALSE")
    if os.environ["MKL_DYNAMIC"].strip().lower() not in ("false", "0", "no", "off"):
        log.debug("MKL_DYNAMIC=%s: oneMKL may change its thread count", os.environ["MKL_DYNAMIC"])
        return False
    torch = sys.modules.get("torch")
    if torch is None:
        return False  # oneMKL is not loaded yet: it will read the variable
    try:
        setter = ctypes.CDLL(torch._C.__file__).MKL_Set_Dynamic  # the C interface (the
        # lower-case name is the Fortran one, which takes a pointer)
    except (OSError, AttributeError):  # not built with oneMKL (OpenBLAS, Apple Accelerate)
        return False
    setter.argtypes, setter.restype = [ctypes.c_int], None
    setter(0)
    return True
