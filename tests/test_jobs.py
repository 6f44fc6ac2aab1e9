"""The experiment's stage runner: how many torch threads each worker stage gets, and its workers
ending with it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from cooper.config.experiment import load_experiment
from cooper.experiment import jobs


def threads_setup(exp, folder):
    import torch

    return torch.get_num_threads()


def threads_arm(exp, arm, folder, setup):
    import torch

    return {"setup": setup, "arm": torch.get_num_threads()}


def test_setup_threads_share_the_cores_among_the_setups(monkeypatch):
    monkeypatch.setattr(jobs, "cores", lambda: 8)
    assert jobs.setup_threads(jobs=2, seeds=1) == 8  # alone: nothing else can run beside it
    assert jobs.setup_threads(jobs=2, seeds=5) == 4
    assert jobs.setup_threads(jobs=4, seeds=2) == 4
    assert jobs.setup_threads(jobs=16, seeds=16) == 1


def test_a_lone_setup_runs_on_every_core_and_the_arms_share_them(tmp_path, monkeypatch):
    monkeypatch.setattr(jobs, "cores", lambda: 2)  # read in this process, before the workers
    exp = load_experiment("hacking_cpu", ["arms=rule"])
    stages = jobs.Stages(setup=threads_setup, arm=threads_arm)
    one = jobs.run_stages(exp, tmp_path / "one", stages, jobs=2)
    assert one[0]["rule"] == {"setup": 2, "arm": 1}
    two = jobs.run_stages(load_experiment("hacking_cpu", ["arms=rule", "seeds=0,1"]),
                          tmp_path / "two", stages, jobs=2)
    assert two[0]["rule"]["setup"] == 1 and two[1]["rule"]["setup"] == 1


def test_arms_start_by_their_reward_models_work(tmp_path):
    """Updating it first, then scoring every step, then watching every 5th step (hacking_cpu's
    rule arm: 243 s against the rm arm's 293 s in one seed)."""
    exp = load_experiment("hacking_cpu")
    assert exp.arm_list == ["rule", "rm", "cooper", "cooper_rollouts"]
    assert jobs.longest_first(exp, exp.arm_list) == ["cooper", "cooper_rollouts", "rm", "rule"]
    assert jobs.longest_first(exp, ["rule", "rm"]) == ["rm", "rule"]
    for rule, order in [("reward.monitor_every: 1", ["rule", "rm"]),  # a tie: as given
                        ("reward.monitor_every: 10", ["rm", "rule"])]:
        preset = tmp_path / "p.yaml"
        preset.write_text(f"base: hacking_cpu\narms:\n  rule: {{reward.mode: rule, {rule}}}\n")
        assert jobs.longest_first(load_experiment(str(preset)), ["rule", "rm"]) == order


def sleeping_setup(exp, folder):
    """Writes this worker's pid, then waits far longer than the test."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pid").write_text(str(os.getpid()))
    time.sleep(120)


PARENT = """
import sys
sys.path[:0] = {path!r}
from pathlib import Path

import test_jobs
from cooper.config.experiment import load_experiment
from cooper.experiment import jobs

if __name__ == "__main__":
    stages = jobs.Stages(setup=test_jobs.sleeping_setup, arm=test_jobs.threads_arm)
    jobs.run_stages(load_experiment("hacking_cpu", ["arms=rule"]), Path({out!r}), stages,
                    jobs=2)
"""


def test_a_worker_stops_when_the_experiments_process_is_killed(tmp_path):
    """SIGKILL (or SIGTERM) reaches the experiment's process alone; its worker must not go on
    writing into the folder a rerun resumes."""
    script = tmp_path / "parent.py"
    script.write_text(PARENT.format(path=[str(Path(__file__).parent), *sys.path],
                                    out=str(tmp_path / "exp")))
    parent = subprocess.Popen([sys.executable, str(script)], stderr=subprocess.PIPE, text=True)
    pid_file = tmp_path / "exp" / "seed-0" / "pid"
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text():
        assert parent.poll() is None, f"the experiment ended early: {parent.stderr.read()}"
        assert time.monotonic() < deadline, "the setup never started in a worker"
        time.sleep(0.2)
    worker = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 15
    try:
        while _alive(worker):
            assert time.monotonic() < deadline, f"worker {worker} outlived the experiment"
            time.sleep(0.2)
    finally:
        if _alive(worker):
            os.kill(worker, signal.SIGKILL)
    assert "is gone: stopping this stage" in parent.stderr.read()


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie has ended (whoever adopted it reaps it when it will:
    not every container's first process does at once)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:  # ended meanwhile, or no /proc (then kill's answer stands)
        return not Path("/proc/self").exists()
    return state != "Z"
