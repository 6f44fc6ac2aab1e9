"""A `cooper train` killed with SIGKILL resumes as if it had never stopped.

Real processes: the run is frozen (SIGSTOP) at the moment of interest, the test checks where it
stands, and then kills it (SIGKILL). Once while it writes a checkpoint, once in the middle of a
step. The resumed run must end with exactly the weights, optimiser states and per-step metrics
of a run that was never interrupted (CPU, same seed: bit for bit).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import cli_env, run_cli
from test_train_smoke import metrics, tiny_args, weights

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

STEPS = 4
MID_STEP_S = 0.05  # how far into a step to kill it (a tiny-model step takes 0.15 s or more)


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def args(arith: Path, out: Path) -> list[str]:
    # rewrite negatives: no network, so the whole run is a function of the seed
    return tiny_args(arith, out, "cooper", "assistant.backend=rewrite", "save_steps=1",
                     f"max_steps={STEPS}", "save_total_limit=0")


def start(arith: Path, out: Path, *extra: str) -> subprocess.Popen:
    """The run in the background, its log in a file (a pipe nobody reads could fill and block
    it)."""
    out.mkdir(parents=True, exist_ok=True)
    log = (out.parent / f"{out.name}.log").open("a")
    proc = subprocess.Popen([sys.executable, "-m", "cooper", *args(arith, out), *extra],
                            env=cli_env(), stdout=subprocess.DEVNULL, stderr=log)
    proc.log_path = Path(log.name)
    log.close()
    return proc


def log_of(proc: subprocess.Popen) -> str:
    return proc.log_path.read_text()


def freeze_when(proc: subprocess.Popen, ready, timeout: float = 300) -> None:
    """Poll until ``ready()``; then stop the process where it is (SIGSTOP)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"the run ended first:\n{log_of(proc)[-3000:]}"
        assert time.monotonic() < deadline, "timed out waiting for the moment to kill"
        time.sleep(0.002)
    os.kill(proc.pid, signal.SIGSTOP)


def kill(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL


def complete(out: Path, step: int) -> bool:
    return (out / f"checkpoint-{step}" / "cooper-checkpoint.json").is_file()


def staged(out: Path, step: int) -> Path:
    return out / ".staging" / f"checkpoint-{step}"


def kill_while_writing_a_checkpoint(arith: Path, out: Path, *extra: str) -> int:
    """Kill the run while it writes the first checkpoint after checkpoint-1 that we catch
    half-written; returns its step."""
    proc = start(arith, out, *extra)
    try:
        for step in range(2, STEPS):
            freeze_when(proc, lambda s=step: staged(out, s).is_dir() or complete(out, s))
            if staged(out, step).is_dir() and not complete(out, step):
                kill(proc)  # frozen mid-write: the staged folder is all there is of this step
                return step
            os.kill(proc.pid, signal.SIGCONT)  # renamed before we froze it: try the next one
        pytest.fail("never caught a checkpoint half-written")
    finally:
        if proc.poll() is None:
            kill(proc)


def kill_mid_step(arith: Path, out: Path, after: int, *extra: str) -> str:
    """Kill the resumed run during step ``after + 1`` (checkpoint ``after`` is complete, the
    next one not begun); returns its stderr."""
    proc = start(arith, out, *extra)
    try:
        since = []

        def into_the_next_step() -> bool:  # checkpoint `after` written, then a moment more
            if not since and complete(out, after):
                since.append(time.monotonic())
            return bool(since) and time.monotonic() - since[0] > MID_STEP_S

        freeze_when(proc, into_the_next_step)
        # frozen before step after+1 ended: no metrics row, no checkpoint of it yet
        assert max(r["step"] for r in metrics(out)) == after
        assert not staged(out, after + 1).exists() and not (out / f"checkpoint-{after + 1}").exists()
        kill(proc)
    finally:
        if proc.poll() is None:
            kill(proc)
    return log_of(proc)


def state_tensors(path: Path) -> dict[str, torch.Tensor]:
    """Every tensor in a torch-saved (weights_only) state dict, flattened to dotted names."""
    flat: dict[str, torch.Tensor] = {}

    def walk(prefix: str, x) -> None:
        if isinstance(x, np.ndarray):  # the numpy RNG state
            x = torch.from_numpy(x)
        if isinstance(x, torch.Tensor):
            flat[prefix] = x
        elif isinstance(x, dict):
            for k, v in x.items():
                walk(f"{prefix}.{k}", v)
        elif isinstance(x, list | tuple):
            for i, v in enumerate(x):
                walk(f"{prefix}.{i}", v)
        else:
            flat[prefix] = torch.tensor(float(x)) if isinstance(x, int | float) else x

    from transformers.trainer_pt_utils import safe_globals  # numpy arrays, nothing executable

    with safe_globals():
        walk("", torch.load(path, weights_only=True))
    return flat


def assert_identical(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys(), f"{what}: different keys"
    differ = [k for k in a if not (a[k].equal(b[k]) if isinstance(a[k], torch.Tensor)
                                   else a[k] == b[k])]
    assert not differ, f"{what} differs after the resume: {differ[:5]}"


def step_rows(out: Path) -> list[dict]:
    """Per-step metrics without the wall-clock ones (perf/, runtime, throughput)."""
    timing = ("perf/", "train_runtime", "_per_second", "step_time")
    return [{k: v for k, v in r.items() if not any(t in k for t in timing)}
            for r in metrics(out) if "loss" in r]


@pytest.mark.parametrize("negatives", ["assistant", "rollouts", "both"])
def test_killed_while_checkpointing_then_mid_step_resumes_bit_for_bit(arith, tmp_path, negatives):
    mode = f"rm_update.negatives={negatives}"
    full = tmp_path / "full"
    run_cli(*args(arith, full), mode)

    out = tmp_path / "killed"
    # 1. killed while writing checkpoint-k: only the staged folder exists, never checkpoint-k
    k = kill_while_writing_a_checkpoint(arith, out, mode)
    assert not (out / f"checkpoint-{k}").exists() and complete(out, k - 1)
    # 2. resumed from checkpoint-(k-1), the half-written one reported and discarded; killed
    #    again in the middle of step k+1
    log = kill_mid_step(arith, out, k, mode, "--resume")
    assert f"discarding incomplete checkpoint {staged(out, k)}" in log
    assert f"resuming from {out / f'checkpoint-{k - 1}'}" in log
    # 3. resumed from checkpoint-k, to the end
    done = run_cli(*args(arith, out), mode, "--resume")
    assert f"resuming from {out / f'checkpoint-{k}'}" in done.stderr
    assert not (out / ".staging").exists()

    # the killed-and-resumed run is the uninterrupted run
    assert_identical(weights(full / "policy"), weights(out / "policy"), "policy weights")
    assert_identical(weights(full / "reward_model"), weights(out / "reward_model"),
                     "reward-model weights")
    last = f"checkpoint-{STEPS}"
    for name in ("optimizer.pt", "scheduler.pt", "reward_model_optimizer.pt", "rng_state.pth"):
        assert_identical(state_tensors(full / last / name), state_tensors(out / last / name), name)
    for a, b in [(full / last / "trainer_state.json", out / last / "trainer_state.json")]:
        sa, sb = json.loads(a.read_text()), json.loads(b.read_text())
        assert sa["global_step"] == sb["global_step"] == STEPS
    # every step's numbers (losses, rewards, reward-model update) are the same, none repeated
    assert step_rows(out) == step_rows(full)
    assert [r["step"] for r in step_rows(out)] == list(range(1, STEPS + 1))
    pairs = "rm/pairs_rollout" if negatives == "rollouts" else "rm/pairs_assistant"
    assert sum(r[pairs] for r in step_rows(out)) > 0  # the mode under test made its pairs


def test_incomplete_checkpoints_are_reported_and_skipped(tmp_path, caplog):
    from cooper.rl.checkpoints import complete_checkpoints, discard_staged_checkpoints

    for step in (1, 2, 10):
        (tmp_path / f"checkpoint-{step}").mkdir()
    for step in (1, 2):  # checkpoint-10 has no marker: it was not written by a finished save
        (tmp_path / f"checkpoint-{step}" / "cooper-checkpoint.json").write_text("{}")
    (staged(tmp_path, 11)).mkdir(parents=True)
    (staged(tmp_path, 11) / "model.safetensors").write_bytes(b"half")
    with caplog.at_level("WARNING"):
        assert [p.name for p in complete_checkpoints(tmp_path)] == ["checkpoint-1", "checkpoint-2"]
        assert discard_staged_checkpoints(tmp_path) == [staged(tmp_path, 11)]
    assert f"skipping incomplete checkpoint {tmp_path / 'checkpoint-10'}" in caplog.text
    assert f"discarding incomplete checkpoint {staged(tmp_path, 11)}" in caplog.text
    assert not (tmp_path / ".staging").exists() and (tmp_path / "checkpoint-10").exists()
