"""The experiment's stage runner: how many torch threads each worker stage gets."""

from __future__ import annotations

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
    rule arm: 243 s against the rm arm's 293 s in one seed), then no reward model at all."""
    exp = load_experiment("hacking_cpu")
    assert exp.arm_list == ["rule", "rm", "cooper", "cooper_rollouts"]
    assert jobs.longest_first(exp, exp.arm_list) == ["cooper", "cooper_rollouts", "rm", "rule"]
    assert jobs.longest_first(exp, ["rule", "rm"]) == ["rm", "rule"]
    for rule, order in [("reward.monitor_every: 1", ["rule", "rm"]),  # a tie: as given
                        ("reward.monitor: false", ["rm", "rule"])]:
        preset = tmp_path / "p.yaml"
        preset.write_text(f"base: hacking_cpu\narms:\n  rule: {{reward.mode: rule, {rule}}}\n")
        assert jobs.longest_first(load_experiment(str(preset)), ["rule", "rm"]) == order
