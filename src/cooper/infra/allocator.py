"""Keep freed memory in the process instead of handing it back to the kernel after every step.

On Linux, torch's CPU tensors come from glibc's ``malloc``. By default glibc serves each
allocation above its mmap threshold (at most 32 MiB) with a fresh ``mmap`` and unmaps it on
``free``, and it trims the top of the heap once enough of it is free. A training step allocates
gigabytes of short-lived activations (the policy's logits for one micro-batch of 8 x 200 tokens
are 315 MB in float32), so every step faults those pages in again and the kernel zeroes them.
The step right after other work (Cooper's reward-model update) finds the heap shaped differently
and faults in more, which made every policy update of a Cooper run about 6 s slower than that of
a fixed-RM run on the same rollouts (``docs/benchmarks.md``).

:func:`keep_freed_memory` turns both off with ``mallopt``: no ``mmap`` for large blocks and no
trimming, so memory freed by one step is reused by the next without a fault. The memory is not
returned between steps, and the heap's fragments count too: peak resident memory measured
0.5-1.2 GB higher on the CPU benchmark. The ``cooper`` command calls it at start; set
``COOPER_KEEP_FREED_MEMORY=0`` to leave ``malloc`` as it is (for instance when jemalloc or
tcmalloc is preloaded). Elsewhere than glibc it does nothing.

A command that goes from one stage to the next in one process (``cooper demo`` trains a reward
model, then runs RL) calls :func:`release_freed_memory` between them, or the first stage's peak
would stay resident under the next one's.

oneDNN (the kernels of PyTorch's bfloat16 products, and of float32 linear layers on CPUs that are
not Intel's: ``cooper.infra.cpu_linear``) keeps every primitive it builds, one per shape of a
product, in two caches of 1024 entries each (oneDNN's and its C++ wrapper's), each entry about
0.3 MB. RL gives every batch other lengths, so both fill: 1536 products of distinct shapes through
the embedded model's layers held 0.49 GB after ``malloc_trim``. :func:`bound_onednn_caches` sets
both to :data:`ONEDNN_CACHE_CAPACITY` entries, more than one step's products use, unless the user
set them; a shape evicted and seen again costs its primitive's building (about 0.4 ms).
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os

from cooper.errors import UserError

log = logging.getLogger(__name__)

ENV = "COOPER_KEEP_FREED_MEMORY"
# glibc's malloc.h
M_TRIM_THRESHOLD = -1  # -1 as its value: never trim (documented in mallopt(3))
M_MMAP_MAX = -4  # 0 as its value: never serve a block with its own mmap


def is_glibc() -> bool:
    """Whether this process runs on glibc (the C library it actually loaded)."""
    try:
        return (os.confstr("CS_GNU_LIBC_VERSION") or "").startswith("glibc")
    except (AttributeError, ValueError, OSError):  # not POSIX, or no such name here (musl)
        return False


def _glibc() -> ctypes.CDLL | None:
    """glibc, where this process runs on it and it loads; else None."""
    if not is_glibc():
        return None
    try:
        return ctypes.CDLL("libc.so.6")
    except OSError:
        return None


def keep_freed_memory() -> bool:
    """Tune glibc's ``malloc`` to reuse freed memory; True when it was done.

    Process-wide and lasting; idempotent. Skipped when ``COOPER_KEEP_FREED_MEMORY=0`` or the C
    library is not glibc; any other value than 0/1 (false/true, no/yes, off/on) is a
    :class:`~cooper.errors.UserError`.
    """
    value = os.environ.get(ENV, "1").strip().lower()
    if value in ("0", "false", "no", "off"):
        log.debug("%s=%s: malloc left as it is", ENV, value)
        return False
    if value not in ("", "1", "true", "yes", "on"):  # a typo must not pick a side silently
        raise UserError(f"{ENV}={os.environ[ENV]!r}: use 1 to keep freed memory for the next "
                        "step (the default) or 0 to leave malloc as it is")
    libc = _glibc()
    if libc is None:
        return False
    # mallopt returns 1 on success; both together, or the faults come back through the other
    done = libc.mallopt(M_MMAP_MAX, 0) == 1 and libc.mallopt(M_TRIM_THRESHOLD, -1) == 1
    log.debug("malloc keeps freed memory: %s", done)
    return done


ONEDNN_CACHES = ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY")
"""oneDNN's primitive cache and its C++ wrapper's (ideep); both read once, at their first use"""
ONEDNN_CACHE_CAPACITY = 128
"""entries: a step's working set is about 15 shapes forward and 30 backward per batch length
(45 with LoRA adapters more); measured no slower than 1024 on a training-like loop of linear
layers, where 1 entry was 20-25% slower"""


def bound_onednn_caches() -> dict[str, str]:
    """Bound oneDNN's two primitive caches (module docstring); returns their settings.

    Takes effect only before the process's first oneDNN product (each cache reads its capacity
    once); a value the user set is kept, and one that is not a whole number of entries is a
    :class:`~cooper.errors.UserError` (ideep's cache at 0 crashes PyTorch 2.13; oneDNN's at 0 is
    off, as its documentation says)."""
    for name, least in zip(ONEDNN_CACHES, (0, 1), strict=True):
        value = os.environ.setdefault(name, str(ONEDNN_CACHE_CAPACITY))
        if not (value.strip().isdigit() and int(value) >= least):
            raise UserError(f"{name}={value!r}: set a whole number of entries, at least {least}, "
                            f"or unset it for cooper-rl's {ONEDNN_CACHE_CAPACITY}")
    return {name: os.environ[name] for name in ONEDNN_CACHES}


def release_freed_memory() -> bool:
    """Hand the memory freed so far back to the kernel (``malloc_trim``); True when some was.

    Between the stages of one process, not between steps: :func:`keep_freed_memory` keeps what
    a step frees for the next, which also keeps a finished stage's peak resident. Unreachable
    objects are collected first. Elsewhere than glibc it does nothing.
    """
    gc.collect()
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1
