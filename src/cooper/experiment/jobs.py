"""Running an experiment's stages: one after another in this process, or up to N at once in
worker processes (``cooper experiment hacking --jobs N``).

Every seed has a setup, then one run per arm (a ``cooper train`` run and its final evaluation);
a seed's arms wait for its setup. With ``jobs=1`` everything runs in this process, in order.
With more, each stage runs in a fresh spawned process (one stage per process: no torch state or
memory carries over from one stage to the next), at most ``jobs`` at a time, each limited to
``max(1, cores // jobs)`` torch threads (:func:`threads_per_job`; ``OMP_NUM_THREADS`` and
``MKL_NUM_THREADS`` too) so that the processes share the cores instead of oversubscribing them.
Setups are the exception when there are fewer seeds than jobs: nothing else can run beside them
(every arm waits for its seed's setup), so they share the cores among themselves
(:func:`setup_threads`; one seed with ``--jobs 2`` sets up on both cores).
A seed's arms start longest first (:func:`longest_first`), so that no long arm runs alone at
the end. Stages skip or resume what is done on their own, so a parallel run that was interrupted
continues like a sequential one. A worker ends itself once this process is gone (killed by
SIGTERM or SIGKILL, which reach it alone, where Ctrl-C reaches every process of the group), so
that no orphaned stage goes on writing into a folder that a rerun resumes.

Takes the stage functions (module-level, so a worker can import them) and the experiment's
settings; hands back ``{seed: {arm: result}}``. Imports no torch until a worker starts.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cooper.config.experiment import ExperimentConfig
from cooper.config.reward_modes import Payer, Stage2
from cooper.errors import UserError
from cooper.infra.allocator import bound_onednn_caches, keep_freed_memory
from cooper.report.experiment_layout import seed_dir

log = logging.getLogger(__name__)

LOG_FORMAT = "%(asctime)s %(levelname)s {key}%(name)s: %(message)s"


@dataclass(frozen=True)
class Stages:
    """The experiment's two stage functions (module-level: a worker imports them by name)."""

    setup: Callable[[ExperimentConfig, Path], Any]
    """``setup(exp, seed_folder) -> Setup``: what the seed's arms start from"""
    arm: Callable[[ExperimentConfig, str, Path, Any], dict[str, Any]]
    """``arm(exp, name, seed_folder, setup) -> result``: one arm trained and scored"""


def cores() -> int:
    """CPU cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def threads_per_job(jobs: int) -> int:
    """Torch threads for each of ``jobs`` parallel stages: the cores shared out, at least one."""
    return max(1, cores() // jobs)


def setup_threads(jobs: int, seeds: int) -> int:
    """Torch threads for each setup: the cores shared among the setups that run at once."""
    return max(1, cores() // max(1, min(jobs, seeds)))


def longest_first(exp: ExperimentConfig, arms: list[str]) -> list[str]:
    """``arms`` in the order they are started in workers, by the reward model's work in a step
    (the policy's is the same in every arm): those that update it first (scoring, then a forward
    and backward pass), then those that score with it every step, then a verifier-paid arm whose
    reward model watches every Nth step (every arm's watches: ``reward.monitor`` is the
    experiment's); ties in the given order. Started last, a long arm would run alone at the end
    while the other cores wait."""
    def reward_model_work(arm: str) -> float:  # in scoring passes a step
        cfg = exp.arm_train(arm)
        plan = cfg.plan()
        if plan.stage2 is Stage2.UPDATE:
            return 3.0
        if plan.pays is not Payer.VERIFIER:
            return 1.0
        return 1.0 / cfg.reward.monitor_every

    return sorted(arms, key=lambda a: -reward_model_work(a))


def run_stages(exp: ExperimentConfig, out: Path, stages: Stages, jobs: int = 1, *,
               arms: list[str] | None = None) -> dict[int, dict[str, dict[str, Any]]]:
    """Every seed's setup and arms (``arms``: those, in order; default every arm of ``exp``;
    ``[]``: the setups alone); ``{seed: {arm: result}}``."""
    arm_list = exp.arm_list if arms is None else arms
    if jobs < 1:
        raise UserError(f"--jobs {jobs}: run at least one stage at a time (--jobs 1)")
    plan = [(seed, exp.for_seed(seed), seed_dir(out, seed)) for seed in exp.seed_list]
    if jobs == 1:
        results: dict[int, dict[str, dict[str, Any]]] = {}
        for seed, exp_s, folder in plan:
            setup = stages.setup(exp_s, folder)
            results[seed] = {a: stages.arm(exp_s, a, folder, setup) for a in arm_list}
        return results
    return _in_workers(plan, arm_list, stages, jobs)


def _in_workers(plan: list[tuple[int, ExperimentConfig, Path]], arms: list[str], stages: Stages,
                jobs: int) -> dict[int, dict[str, dict[str, Any]]]:
    threads = threads_per_job(jobs)
    log.info("running up to %d stages at once, %d torch thread(s) each", jobs, threads)
    results: dict[int, dict[str, dict[str, Any]]] = {seed: {} for seed, _, _ in plan}
    by_seed = {seed: (exp_s, folder) for seed, exp_s, folder in plan}
    pending: dict[Future, tuple[int, str | None, str]] = {}
    failure: BaseException | None = None
    # spawn, not fork: a forked child would inherit this process's threads and torch state
    pool = ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_init_worker,
                               initargs=(threads, logging.getLogger().getEffectiveLevel(),
                                         os.getpid()),
                               max_tasks_per_child=1)

    def submit(seed: int, arm: str | None, fn: Callable, *args: Any,
               stage_threads: int = threads) -> None:
        key = f"seed-{seed}/{arm or 'setup'}"
        pending[pool.submit(_stage, key, stage_threads, fn, *args)] = (seed, arm, key)

    try:
        for seed, exp_s, folder in plan:
            submit(seed, None, stages.setup, exp_s, folder,
                   stage_threads=setup_threads(jobs, len(plan)))
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                seed, arm, key = pending.pop(fut)
                if fut.cancelled():
                    continue
                try:
                    result = fut.result()
                except Exception as e:  # noqa: BLE001 -- re-raised once the running stages end
                    log.error("%s failed: %s", key, e)
                    if failure is None:
                        failure = e
                        for f in pending:  # stages not started yet; running ones finish
                            f.cancel()
                        if pending:
                            log.error("waiting for the stages in progress to finish (a rerun "
                                      "resumes; Ctrl-C stops them)")
                    continue
                if arm is not None:
                    results[seed][arm] = result
                    log.info("%s: done", key)
                elif failure is None:  # the seed's setup is ready: its arms can start
                    exp_s, folder = by_seed[seed]
                    for a in longest_first(exp_s, arms):
                        submit(seed, a, stages.arm, exp_s, a, folder, result)
    except BaseException:  # Ctrl-C above all: do not wait for the workers (they got it too)
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)
    if failure is not None:
        raise failure
    return results


def _init_worker(threads: int, level: int, parent: int) -> None:
    """A worker's start: a watch on ``parent`` (the experiment's process), thread limits before
    torch is imported, logging, memory reuse."""
    threading.Thread(target=_end_with, args=(parent,), name="parent-watch", daemon=True).start()
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[var] = str(threads)
    logging.basicConfig(level=level, format=LOG_FORMAT.format(key=""), datefmt="%H:%M:%S")
    keep_freed_memory()  # as the `cooper` command does at start (cooper.infra.allocator)
    bound_onednn_caches()
    import torch

    torch.set_num_threads(threads)


def _end_with(parent: int, every_s: float = 1.0) -> None:
    """Ends this worker once ``parent`` is no longer its parent (it died and the worker was
    handed to another). Polling, not ``PR_SET_PDEATHSIG``: that one is Linux's alone, and fires
    when the thread that started the worker ends, which in a process pool is not the process."""
    while os.getppid() == parent:
        time.sleep(every_s)
    print(f"cooper: the experiment's process {parent} is gone: stopping this stage (a rerun "
          "resumes it)", file=sys.stderr, flush=True)
    os._exit(1)  # at once, from this thread: the stage may be deep in a training step


def _stage(key: str, threads: int, fn: Callable, *args: Any) -> Any:
    """One stage in a worker (``threads`` torch threads), its log lines marked with the seed and
    arm."""
    import torch

    torch.set_num_threads(threads)
    for handler in logging.getLogger().handlers:
        handler.setFormatter(logging.Formatter(LOG_FORMAT.format(key=f"[{key}] "), "%H:%M:%S"))
    log.info("started in a worker process (%d torch thread%s)", threads, "s" * (threads > 1))
    return fn(*args)
