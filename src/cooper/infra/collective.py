"""The few collective operations Cooper needs, for one process or many (torch.distributed).

Each training process sees only its slice of a step's rollouts, and a prompt's samples can be
split across processes, so positives are picked from the gathered rollouts. Each process then
handles a disjoint share of the pairs, and reward-model gradients are summed across processes so
every replica takes the identical update. ``accelerate launch`` (DDP, DeepSpeed, FSDP) initialises
the default process group that :class:`TorchDistributed` uses; :func:`leave_process_group`
ends it without the hang that PyTorch's teardown order allows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


class Collective(Protocol):
    rank: int
    world_size: int

    def gather_objects(self, items: list[Any]) -> list[Any]:
        """Every process's list, concatenated in rank order, on every process."""

    def all_reduce_sum_(self, tensors: Sequence[torch.Tensor]) -> None:
        """Sum tensors across processes, in place."""

    def sum_floats(self, values: Sequence[float]) -> list[float]:
        """Elementwise sum of a few floats across processes."""


class SingleProcess:
    rank = 0
    world_size = 1

    def gather_objects(self, items: list[Any]) -> list[Any]:
        return list(items)

    def all_reduce_sum_(self, tensors: Sequence[torch.Tensor]) -> None:
        return None

    def sum_floats(self, values: Sequence[float]) -> list[float]:
        return list(values)


class TorchDistributed:
    """Collectives over torch.distributed's default process group."""

    def __init__(self):
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            raise RuntimeError("torch.distributed is not initialised (use accelerate launch)")
        self.dist = dist
        self.rank, self.world_size = dist.get_rank(), dist.get_world_size()

    def gather_objects(self, items: list[Any]) -> list[Any]:
        gathered: list[list[Any] | None] = [None] * self.world_size
        self.dist.all_gather_object(gathered, items)
        return [x for part in gathered for x in part]  # type: ignore[union-attr]

    def all_reduce_sum_(self, tensors: Sequence[torch.Tensor]) -> None:
        import torch

        if not tensors:
            return
        # one flat buffer per dtype: a single collective instead of one per parameter
        flat = torch.cat([t.reshape(-1).float() for t in tensors])
        self.dist.all_reduce(flat)
        offset = 0
        for t in tensors:
            n = t.numel()
            t.copy_(flat[offset:offset + n].view_as(t))
            offset += n

    def sum_floats(self, values: Sequence[float]) -> list[float]:
        import torch

        buf = torch.tensor(list(values), dtype=torch.float64)
        if self.dist.get_backend() == "nccl":
            buf = buf.cuda()
        self.dist.all_reduce(buf)
        return buf.cpu().tolist()


def current() -> Collective:
    """TorchDistributed when a process group with several processes exists, else SingleProcess."""
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            return TorchDistributed()
    except ImportError:
        pass
    return SingleProcess()


def leave_process_group() -> None:
    """End a multi-process run: free what is left of the trainer, then the process group.

    Call it once the trainer is out of reach (after the function that built it has returned),
    as the last thing a training process does. Under ``accelerate launch`` on CPU, a process
    that skipped it, or destroyed the group while the trainer still lived, could hang for ever
    after training: DDP's reducer then frees gloo's process group with Python's GIL held, and
    gloo waits for its worker threads, one of which needs the GIL to free the tensors of the
    last collective (PyTorch issue 56297; the example's two-process run hung in 10 runs of 40 on
    a 2-core machine). Freed here first, the reducer leaves the group to ``torch.distributed``,
    whose own reference lets the GIL go before gloo waits. Without any destroy at all, gloo's
    threads can outlive the interpreter and abort the process (SIGABRT) instead.
    """
    import gc

    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()  # reference cycles hold a finished trainer, and with it DDP's reducer
    from torch.nn.parallel import DistributedDataParallel

    if any(issubclass(type(x), DistributedDataParallel) for x in gc.get_objects()):
        log.warning("leave_process_group: a DDP model is still referenced, so the process group "
                    "may be freed after this and the process hang at exit; call it after the "
                    "function that built the trainer has returned")
    dist.destroy_process_group()
