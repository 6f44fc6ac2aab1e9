"""Ending a multi-process run: the process group goes after the trainer (infra/collective.py).

The hang this guards against is a race (gloo's worker thread against the main thread at exit),
so no single run can show it; the two-process runs of the example (test_trl_dropin.py) and of
``cooper train`` (test_train_smoke.py) end through this function every time CI runs.
"""

from __future__ import annotations

import logging

import pytest
import torch

from conftest import free_port


@pytest.fixture
def group():
    import torch.distributed as dist

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{free_port()}", rank=0,
                            world_size=1)
    yield dist
    if dist.is_initialized():
        dist.destroy_process_group()


def _train_and_return() -> None:
    """A stand-in for a training function: a DDP model in a reference cycle, then gone."""
    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
    model.owner = model  # a cycle, as a trainer's callbacks make: only the collector frees it
    model(torch.ones(1, 2)).sum().backward()


def test_the_group_ends_after_the_trainer_without_a_warning(group, caplog):
    from cooper.infra.collective import leave_process_group

    _train_and_return()
    with caplog.at_level(logging.WARNING, logger="cooper.infra.collective"):
        leave_process_group()
    assert not group.is_initialized()
    assert not caplog.records, "a freed trainer was reported as still referenced"


def test_a_trainer_still_referenced_is_named_with_the_fix(group, caplog):
    from cooper.infra.collective import leave_process_group

    model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2))
    with caplog.at_level(logging.WARNING, logger="cooper.infra.collective"):
        leave_process_group()
    assert not group.is_initialized()
    assert any("still referenced" in r.getMessage() and "has returned" in r.getMessage()
               for r in caplog.records)
    del model


def test_without_a_group_it_does_nothing(caplog):
    import torch.distributed as dist

    from cooper.rl import leave_process_group

    assert not dist.is_initialized()
    with caplog.at_level(logging.WARNING):
        leave_process_group()
    assert not dist.is_initialized() and not caplog.records
