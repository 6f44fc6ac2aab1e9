"""`cooper experiment hacking` + `cooper report` through the real CLI on tiny random models.

Checks the pipeline (stages, files, resume-by-skipping, report and plots), not the scientific
outcome: random models never answer correctly, so there is nothing to hack here.
"""

from __future__ import annotations

import json
import math

import pytest
import yaml

from conftest import run_cli

ARMS = ("rule", "rm", "cooper")
TINY = ["setup.policy=tiny-random", "setup.reward_model=tiny-random", "rm_init.triples=8",
        "rm_init.unfinished=2",
        "probe.triples=8", "final_eval.limit=4", "final_eval.samples=1",
        "final_eval.max_new_tokens=12", "train.max_steps=2", "train.save_steps=1",
        "train.rollout.prompts_per_step=2", "train.rollout.samples_per_prompt=2",
        "train.rollout.micro_batch_size=4", "train.rollout.max_completion_length=12",
        "train.assistant.max_new_tokens=12", "train.validation.limit=4",
        "train.validation.every_steps=1", "train.validation.samples=1",
        "train.validation.max_new_tokens=12"]


def test_experiment_runs_every_arm_resumes_and_reports(tmp_path):
    out = tmp_path / "exp"
    args = ["experiment", "hacking", "--preset", "hacking_cpu", "--out", out, *TINY]
    proc = run_cli(*args)
    assert "report:" in proc.stdout
    setup = json.loads((out / "setup" / "setup.json").read_text())
    assert (out / "setup" / "probe.jsonl").is_file() and (out / "setup" / "reward_model").is_dir()
    assert set(setup["initial_eval"]["benchmarks"]) == {"arith_small:test"}
    rm_rows = [json.loads(x) for x in (out / "setup" / "rm_train.jsonl").read_text().splitlines()]
    unfinished = [r for r in rm_rows if "/unfinished-" in r["id"]]
    assert len(rm_rows) == 10 and len(unfinished) == 2
    assert all(r["label"] == 0 and "}." not in r["completion"] for r in unfinished)
    for arm in ARMS:
        folder = out / "arms" / arm
        done = json.loads((folder / "arm.json").read_text())
        assert done["train"]["steps"] == 2
        rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
        steps = [r for r in rows if "reward/rule_mean" in r]
        assert [r["step"] for r in steps] == [1, 2]
        for r in steps:
            for key in ("hacking/gap", "rm/agreement", "reward/rm_mean"):
                assert math.isfinite(r[key]), (arm, key, r)
        vals = [r for r in rows if "val/rm_probe_accuracy" in r]
        assert [r["step"] for r in vals] == [0, 1, 2]  # before training, then every step
        cfg = (folder / "config.yaml").read_text()
        assert f"mode: {arm}" in cfg
    # every arm started from the same models and seed: the settings differ only in the reward
    # mode, the run folder and what the mode decides (which reward column is optimised)
    configs = []
    for a in ARMS:
        c = yaml.safe_load((out / "arms" / a / "config.yaml").read_text())
        assert c["reward"].pop("mode") == a and c.pop("output_dir").endswith(f"arms/{a}")
        c["grpo"].pop("reward_weights")
        configs.append(json.dumps(c, sort_keys=True))
    assert len(set(configs)) == 1

    report = out / "report"
    for name in ("heldout_accuracy", "training_reward", "hacking_gap", "hacking_top_wrong",
                 "rm_group_auroc", "rm_probe"):
        png = report / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    html = (report / "report.html").read_text()
    assert html.count("data:image/png;base64,") == 6 and "Cooper" in html
    md = (report / "report.md").read_text()
    assert "| no RL (initial policy) |" in md and "| fixed RM |" in md
    assert "not run yet" not in md

    # a rerun finds everything complete and skips it
    again = run_cli(*args, "--no-report")
    assert all(f"arm {a}: complete, skipped" in again.stderr for a in ARMS)
    # other settings in the same folder are refused before any work
    other = run_cli(*args[:-1], "train.validation.max_new_tokens=13", check=False)
    assert other.returncode == 2 and "other settings" in other.stderr


def test_interrupted_arm_continues_from_its_checkpoint(tmp_path):
    out = tmp_path / "exp"
    args = ["experiment", "hacking", "--preset", "hacking_cpu", "--out", out, *TINY,
            "arms=rm", "train.save_total_limit=2", "--no-report"]
    run_cli(*args)
    folder = out / "arms" / "rm"
    # as if stopped after step 1: the last checkpoint and the markers are gone
    import shutil

    shutil.rmtree(folder / "checkpoint-2")
    for name in ("arm.json", "trained.json", "final_eval.json"):
        (folder / name).unlink()
    proc = run_cli(*args)
    assert "arm rm: resuming" in proc.stderr and "setup: complete, reused" in proc.stderr
    done = json.loads((folder / "arm.json").read_text())
    assert done["train"]["resumed_from"] == "checkpoint-1"
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "reward/rule_mean" in r] == [1, 2]


@pytest.mark.parametrize("override, message", [
    ("arms=rule,bogus", "list each of rule, rm, cooper"),
    ("train.validation.every_steps=0", "train.validation.every_steps=K"),
    ("train.rollout.temprature=1", "did you mean 'train.rollout.temperature'"),
    ("rm_init.triples=3", "even number"),
])
def test_bad_settings_stop_before_any_work(tmp_path, override, message):
    proc = run_cli("experiment", "hacking", "--preset", "hacking_cpu", "--out", tmp_path / "x",
                   override, check=False)
    assert proc.returncode == 2 and message in proc.stderr, proc.stderr
    assert not (tmp_path / "x" / "setup").exists()


def test_presets_resolve_and_validate():
    from cooper.config.experiment import list_experiment_presets, load_experiment

    assert {"hacking_cpu", "hacking_qwen2.5-1.5b_gsm8k"} <= set(list_experiment_presets())
    cpu = load_experiment("hacking_cpu").validate()
    assert cpu.train.reward.monitor and cpu.arm_list == ["rule", "rm", "cooper"]
    gpu = load_experiment("hacking_qwen2.5-1.5b_gsm8k", [
        "setup.reward_model=rm", "train.assistant.base_url=http://h/v1",
        "train.assistant.model=m"]).validate()
    # the train preset is the base and the experiment's train section overrides it
    assert gpu.train.policy.model == "Qwen/Qwen2.5-1.5B-Instruct" and gpu.train.rollout.use_vllm
    assert gpu.train.validation.every_steps == 20 and gpu.train.max_steps == 180
    with pytest.raises(Exception, match="setup.reward_model"):
        load_experiment("hacking_qwen2.5-1.5b_gsm8k").validate()
