"""`cooper experiment hacking` + `cooper report` through the real CLI on tiny random models.

Checks the pipeline (stages, seeds, parallel jobs, files, resume-by-skipping, report and plots),
not the scientific outcome: random models never answer correctly, so there is nothing to hack.
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
import yaml

from conftest import cli_env, run_cli
from cooper.data.problems import load_problems

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

ARMS = ("rule", "rm", "cooper", "cooper_rollouts")  # the preset's arms
TINY = ["setup.policy=tiny-random", "setup.reward_model=tiny-random", "rm_init.triples=8",
        "rm_init.unfinished=2",
        "probe.triples=8", "final_eval.limit=4", "final_eval.samples=1",
        "final_eval.max_new_tokens=12", "final_eval.policies=2", "final_eval.every_steps=1",
        "train.max_steps=2", "train.save_steps=1",
        "train.rollout.prompts_per_step=2", "train.rollout.samples_per_prompt=2",
        "train.rollout.micro_batch_size=4", "train.rollout.max_completion_length=12",
        "train.assistant.max_new_tokens=12", "train.validation.limit=4",
        "train.validation.every_steps=1", "train.validation.samples=1",
        "train.validation.max_new_tokens=12"]
# the testbed's checks of its starting point off (a random policy answers nothing; they are
# tested in test_setup_checks.py), and the reward model's layers trained cut to the tiny model's
CPU = ["--preset", "hacking_cpu", *TINY, "setup.policy_accuracy_min=null",
       "setup.policy_accuracy_max=null", "probe.min_accuracy=null", "rm_init.train_layers=1",
       "train.rm_update.train_layers=1"]
# timings differ between any two runs; everything else a run records must not
TIMING = ("perf/", "step_time")


def records(path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def untimed(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith(TIMING)} for r in rows]


def test_experiment_runs_every_arm_resumes_and_reports(tmp_path):
    out = tmp_path / "exp"
    args = ["experiment", "hacking", "--out", out, *CPU]
    proc = run_cli(*args)
    assert "report:" in proc.stdout
    seed = out / "seed-0"  # no --seeds: train.seed alone
    setup = json.loads((seed / "setup" / "setup.json").read_text())
    assert (seed / "setup" / "probe.jsonl").is_file() and (seed / "setup" / "reward_model").is_dir()
    # arith_2x1's splits: training on train, the curves on validation, the probe and the final
    # table on problems the policy and the reward model were never trained on
    assert set(setup["initial_eval"]["benchmarks"]) == {"arith_2x1:test"}
    train_questions = {p.question for p in load_problems("arith_2x1", "train")}
    probe = records(seed / "setup" / "probe.jsonl")
    assert probe and not {r["question"] for r in probe} & train_questions
    rm_rows = records(seed / "setup" / "rm_train.jsonl")
    assert {r["question"] for r in rm_rows} <= train_questions
    unfinished = [r for r in rm_rows if "/unfinished-" in r["id"]]
    assert len(rm_rows) == 10 and len(unfinished) == 2
    assert all(r["label"] == 0 and "}." not in r["completion"] for r in unfinished)
    for arm in ARMS:
        folder = seed / "arms" / arm
        done = json.loads((folder / "arm.json").read_text())
        assert done["train"]["steps"] == 2 and done["seed"] == 0
        c = yaml.safe_load((folder / "config.yaml").read_text())
        assert (c["data"]["dataset"], c["data"]["split"]) == ("arith_2x1", "train")
        assert (c["validation"]["dataset"], c["validation"]["split"]) == ("arith_2x1", "validation")
        rows = records(folder / "metrics.jsonl")
        steps = [r for r in rows if "reward/rule_mean" in r]
        assert [r["step"] for r in steps] == [1, 2]
        # the rule arm's reward model only watches, every 5th step from the first
        watched = [r for r in steps if "hacking/gap" in r]
        assert [r["step"] for r in watched] == ([1] if arm == "rule" else [1, 2])
        for r in watched:
            for key in ("hacking/gap", "rm/agreement", "reward/rm_mean"):
                assert math.isfinite(r[key]), (arm, key, r)
        vals = [r for r in rows if "val/rm_probe_accuracy" in r]
        assert [r["step"] for r in vals] == [0, 1, 2]  # before training, then every step
        # the headline: the mean over the policies after steps 1 and 2 (the final one), each
        # scored like the final one; the final policy's score alone stays beside it
        assert [p.name for p in (folder / "policy-steps").iterdir()] == ["step-1"]
        last = json.loads((folder / "final_eval_last.json").read_text())
        step1 = json.loads((folder / "final_eval.step-1.json").read_text())
        final = json.loads((folder / "final_eval.json").read_text())
        assert last["points"] == [
            {"step": 1, "average": step1["average"],
             "benchmarks": {"arith_2x1:test": step1["benchmarks"]["arith_2x1:test"]["accuracy"]}},
            {"step": 2, "average": final["average"],
             "benchmarks": {"arith_2x1:test": final["benchmarks"]["arith_2x1:test"]["accuracy"]}}]
        assert last["average"] == pytest.approx((step1["average"] + final["average"]) / 2)
        assert done["final_eval_last"] == last and not last["missing"]
    # every arm started from the same models and seed: the settings differ only in what the
    # preset's arm declares, the run folder and what the mode decides (the optimised column)
    declared = yaml.safe_load((out / "experiment.yaml").read_text())["arms"]
    assert declared["cooper_rollouts"]["rm_update.negatives"] == "rollouts"
    keys = {k for settings in declared.values() for k in settings if k != "label"}
    configs = []
    for a in ARMS:
        c = yaml.safe_load((seed / "arms" / a / "config.yaml").read_text())
        assert c.pop("output_dir").endswith(f"seed-0/arms/{a}")
        for key in keys:
            section, name = key.split(".")
            value = c[section].pop(name)
            if key in declared[a]:
                assert value == declared[a][key], (a, key)
        c["grpo"].pop("reward_weights")
        configs.append(json.dumps(c, sort_keys=True))
    assert len(set(configs)) == 1

    report = out / "report"
    # a curve is drawn where some run logged it, and left out (no file) where none did
    logged = {k for f in out.glob("seed-*/arms/*/metrics.jsonl") for r in records(f) for k in r}
    curves = {"heldout_accuracy": "val/accuracy", "training_reward": "reward/rule_mean",
              "hacking_gap": "hacking/gap", "hacking_top_wrong": "hacking/top_wrong",
              "rm_group_auroc": "rm/group_auroc", "rm_probe": "val/rm_probe_accuracy",
              "rm_probe_auroc": "val/rm_probe_auroc"}
    plots = ("last_policies", *[name for name, key in curves.items() if key in logged])
    assert {"heldout_accuracy", "training_reward", "hacking_gap", "rm_probe"} <= set(plots)
    for name in plots:
        assert (report / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not any((report / f"{name}.png").exists() for name in set(curves) - set(plots))
    html = (report / "report.html").read_text()
    assert html.count("data:image/png;base64,") == len(plots) and "Cooper (rollout negatives)" in html
    md = (report / "report.md").read_text()
    assert md.startswith("# Reward hacking") and md.index("## Verdict") < md.index("## Final")
    assert "| no RL (initial policy) |" in md and "| fixed RM |" in md
    assert "mean over its last 2 policies, 1 step apart" in md
    assert md.index("## Final") < md.index("## Appendix: the final policy alone")
    assert "not run yet" not in md

    # a rerun finds everything complete and skips it
    again = run_cli(*args, "--no-report")
    assert all(f"seed-0/{a}: complete, skipped" in again.stderr for a in ARMS)
    # other settings in the same folder are refused before any work
    other = run_cli(*args, "train.validation.max_new_tokens=13", check=False)  # TINY's is 12
    assert other.returncode == 2 and "other settings" in other.stderr


def test_seeds_in_parallel_jobs_give_the_records_of_one_job(tmp_path):
    """2 seeds x 2 arms x 2 steps, once with --jobs 1 and once with --jobs 2. One torch thread in
    both (--jobs 2 gives each process cores // 2, which is 1 on a 2-core machine; the environment
    sets it for --jobs 1), so the runs must match exactly, timings aside: a worker process is a
    `cooper train` run like any other."""
    common = ["experiment", "hacking", *CPU, "arms=rm,cooper_rollouts", "--seeds", "0,1"]
    env = cli_env(OMP_NUM_THREADS="1")
    one, two = tmp_path / "one", tmp_path / "two"
    run_cli(*common, "--out", one, "--no-report", env=env)
    proc = run_cli(*common, "--out", two, "--jobs", "2", env=env)
    assert "running up to 2 stages at once" in proc.stderr
    session = json.loads((two / "experiment.json").read_text())["sessions"][-1]
    assert session["jobs"] == 2 and session["seeds"] == [0, 1]
    for seed in (0, 1):
        for folder in (one, two):
            cfg = yaml.safe_load((folder / f"seed-{seed}/arms/rm/config.yaml").read_text())
            assert cfg["seed"] == seed  # the seed's runs and its own setup
            assert cfg["reward"]["model"] == str(folder / f"seed-{seed}/setup/reward_model")
        for arm in ("rm", "cooper_rollouts"):
            a = records(one / f"seed-{seed}/arms/{arm}/metrics.jsonl")
            b = records(two / f"seed-{seed}/arms/{arm}/metrics.jsonl")
            assert untimed(a) == untimed(b), (seed, arm)
            assert [r["step"] for r in a if "reward/rule_mean" in r] == [1, 2]
    # each seed's setup is its own: other reward-model training triples
    assert ((one / "seed-0/setup/rm_train.jsonl").read_text()
            != (one / "seed-1/setup/rm_train.jsonl").read_text())
    md = (two / "report" / "report.md").read_text()
    assert "2 seeds (0, 1), 2 arms, 2 training steps logged per run." in md
    assert "| fixed RM | 0 |" in md and "| Cooper (rollout negatives) | 1 |" in md  # appendix

    # a rerun in workers skips what is complete; it may add a seed, which runs alone
    again = run_cli(*common[:-1], "0,1,2", "--out", two, "--jobs", "2", "--no-report", env=env)
    assert "seed-0/rm: complete, skipped" in again.stderr
    assert "seed-2/rm: training" in again.stderr
    assert yaml.safe_load((two / "experiment.yaml").read_text())["seeds"] == "0,1,2"
    assert (two / "seed-2/arms/cooper_rollouts/arm.json").is_file()


def test_interrupted_arm_continues_from_its_checkpoint(tmp_path):
    out = tmp_path / "exp"
    args = ["experiment", "hacking", "--out", out, *CPU, "arms=rm", "train.save_total_limit=2",
            "--no-report"]
    run_cli(*args)
    folder = out / "seed-0" / "arms" / "rm"
    # as if stopped after step 1: the last checkpoint, the final policy and the markers are gone
    shutil.rmtree(folder / "checkpoint-2")
    shutil.rmtree(folder / "policy")
    for name in ("arm.json", "trained.json", "final_eval.json"):
        (folder / name).unlink()
    proc = run_cli(*args)
    assert "seed-0/rm: resuming" in proc.stderr and "seed-0/setup: complete, reused" in proc.stderr
    done = json.loads((folder / "arm.json").read_text())
    assert done["train"]["resumed_from"] == "checkpoint-1"
    assert [r["step"] for r in records(folder / "metrics.jsonl") if "reward/rule_mean" in r] == [1, 2]


@pytest.mark.parametrize("override, message", [
    ("arms=rule,bogus", "no arm named 'bogus'"),
    ("train.validation.every_steps=0", "train.validation.every_steps=K"),
    ("train.rollout.temprature=1", "did you mean 'train.rollout.temperature'"),
    ("rm_init.triples=3", "even number"),
    ("--jobs=0", "--jobs 0"),
    ("--seeds=0,x", "seeds='0,x'"),
    ("final_eval.policies=30", "do not fit in its 500 steps"),
    ("final_eval.every_steps=0", "must be >= 1"),
])
def test_bad_settings_stop_before_any_work(tmp_path, override, message):
    proc = run_cli("experiment", "hacking", "--preset", "hacking_cpu", "--out", tmp_path / "x",
                   override, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "x").exists()


def test_an_unknown_key_in_a_preset_arm_names_the_arm(tmp_path):
    path = tmp_path / "mine.yaml"
    path.write_text("arms:\n  rule: {reward.mode: rule}\n"
                    "  mine: {reward.mode: cooper, rm_update.epoch: 3}\n")
    proc = run_cli("experiment", "hacking", "--preset", path, "--out", tmp_path / "x",
                   "--print-config", check=False)
    assert proc.returncode == 2
    assert "unknown setting 'arms.mine.rm_update.epoch' (did you mean " \
           "'arms.mine.rm_update.epochs'?)" in proc.stderr


def test_presets_resolve_and_validate():
    from cooper.config.experiment import list_experiment_presets, load_experiment

    assert {"hacking_cpu", "hacking_qwen2.5-1.5b_gsm8k"} <= set(list_experiment_presets())
    cpu = load_experiment("hacking_cpu").validate()
    assert cpu.train.reward.monitor and cpu.arm_list == list(ARMS)
    # the headline: the mean over the policies of the last 100 steps, 25 apart
    assert cpu.final_eval.steps(cpu.train.max_steps) == [400, 425, 450, 475, 500]
    gpu = load_experiment("hacking_qwen2.5-1.5b_gsm8k", [
        "setup.reward_model=rm", "train.assistant.base_url=http://h/v1",
        "train.assistant.model=m"]).validate()
    # the train preset is the base and the experiment's train section overrides it
    assert gpu.train.policy.model == "Qwen/Qwen2.5-1.5B-Instruct" and gpu.train.rollout.use_vllm
    assert gpu.train.validation.every_steps == 20 and gpu.train.max_steps == 180
    assert gpu.arm_list == ["rule", "rm", "cooper", "cooper_rollouts", "cooper_both"]
    assert gpu.arm_train("cooper").rm_update.negatives == "assistant"  # the paper's, one line away
    assert gpu.arm_train("cooper_both").rm_update.negatives == "both"
    with pytest.raises(Exception, match="setup.reward_model"):
        load_experiment("hacking_qwen2.5-1.5b_gsm8k").validate()


def test_a_kept_policy_that_is_missing_is_left_out_and_listed(tmp_path, caplog):
    from cooper.config.experiment import load_experiment
    from cooper.experiment.final_eval import last_policies

    final = {"benchmarks": {"arith_2x1:test": {"accuracy": 0.5}}, "average": 0.5, "seconds": 1.0}
    with caplog.at_level("WARNING"):
        last = last_policies(load_experiment("hacking_cpu"), {475: tmp_path / "step-475"}, 500,
                             final, tmp_path / "final_eval_last.json")
    assert last["missing"] == [475] and [p["step"] for p in last["points"]] == [500]
    assert last["average"] == 0.5 and last["sd"] == 0.0
    assert "no policy kept after step 475" in caplog.text
    assert json.loads((tmp_path / "final_eval_last.json").read_text()) == last
