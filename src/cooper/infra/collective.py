"""The few collective operations Cooper needs, for one process or many (torch.distributed).

Each training process sees only its slice of a step's rollouts, and a prompt's samples can be
split across processes, so positives are picked from the gathered rollouts. Each process then
handles a disjoint share of the pairs, and reward-model gradients are summed across processes so
every replica takes the identical update. ``accelerate launch`` (DDP, DeepSpeed, FSDP) initialises
the default process group that :class:`TorchDistributed` uses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch


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
