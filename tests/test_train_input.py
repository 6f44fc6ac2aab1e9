"""Bad input to `cooper train`: a finished run's folder, values TRL or torch would refuse only
mid-run (or never), and settings on both sides of the flags."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from conftest import run_cli
from cooper.config import ConfigError, load_config
from cooper.config.train import LOSS_TYPES, REPORT_BACKENDS
from test_experiment import CPU, records
from test_train_smoke import metrics, tiny_args

pytestmark = pytest.mark.smoke  # whole training runs on tiny models


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def one_step(arith, out) -> list[str]:
    return tiny_args(arith, out, "rule", "max_steps=1", "validation.enabled=false",
                     "report_to=none")


# ------------------------------------------------------------------ a finished run's folder

def test_a_finished_run_without_checkpoints_is_refused_and_kept(arith, tmp_path):
    out = tmp_path / "run"
    run_cli(*one_step(arith, out))  # save_steps=0: policy/ and metrics, no checkpoint
    before = (out / "metrics.jsonl").read_text()
    assert [r["step"] for r in metrics(out)] == [1]
    proc = run_cli(*one_step(arith, out), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "holds a finished run (1 training step logged" in proc.stderr
    assert "choose another output_dir, or delete the folder" in proc.stderr
    assert (out / "metrics.jsonl").read_text() == before
    # --resume: finished, nothing to resume (exit 0, so a rerun-until-it-succeeds script ends)
    proc = run_cli(*one_step(arith, out), "--resume")
    assert "nothing to resume" in proc.stdout and "finished its 1 step (its policy" in proc.stdout
    assert "it kept no checkpoint (save_steps=0)" in proc.stdout  # raising max_steps would not do
    assert (out / "metrics.jsonl").read_text() == before


def test_resuming_a_finished_run_leaves_it_as_it_is_and_more_steps_train_on(arith, tmp_path):
    # --resume used to load the finished run, train no step and save its policy again; now it
    # has nothing to do and touches nothing
    from cooper.rl.runner import run

    out = tmp_path / "run"
    args = tiny_args(arith, out, "rule", "validation.enabled=false", "report_to=none",
                     "save_steps=2")
    run_cli(*args, "max_steps=3")
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    before = (out / "metrics.jsonl").read_text()
    policy = {p.name: p.stat().st_mtime_ns for p in (out / "policy").iterdir()}
    proc = run_cli(*args, "max_steps=3", "--resume")
    assert "nothing to resume" in proc.stdout and "finished its 3 steps" in proc.stdout
    assert "raise max_steps to train on from its last checkpoint" in proc.stdout
    # what an experiment records for such an arm: its steps and the seconds it trained
    result = run(load_config("demo_cpu", [*args[3:], "max_steps=3"]), resume=True)
    assert result.already_finished and result.steps == 3 and result.seconds > 0
    assert (out / "metrics.jsonl").read_text() == before
    assert {p.name: p.stat().st_mtime_ns for p in (out / "policy").iterdir()} == policy
    # asked for more steps, it trains on from its last checkpoint (the final step's)
    proc = run_cli(*args, "max_steps=4", "--resume")
    assert "trained 4 steps" in proc.stdout
    assert [r["step"] for r in metrics(out)] == [1, 2, 3, 4]


def test_a_run_stopped_before_its_end_starts_again(arith, tmp_path):
    out = tmp_path / "run"
    run_cli(*one_step(arith, out))
    shutil.rmtree(out / "policy")  # as a kill before the end leaves it: metrics, no policy
    proc = run_cli(*one_step(arith, out))
    assert "trained 1 step in" in proc.stdout
    assert [r["step"] for r in metrics(out)] == [1]  # started over, not appended
    assert (out / "policy").is_dir()


def test_the_demo_trains_its_cooper_run_again_in_the_same_folder(arith, tmp_path):
    from cooper.experiment.demo import train_afresh

    out = tmp_path / "cooper"
    run_cli(*one_step(arith, out))
    (out / "stale.txt").write_text("from the previous demo")
    cfg = load_config("demo_cpu", one_step(arith, out)[3:])  # without `train --config demo_cpu`
    result = train_afresh(cfg)
    assert result.steps == 1 and result.output_dir == out
    assert [r["step"] for r in metrics(out)] == [1] and not (out / "stale.txt").exists()


def test_an_arm_trained_but_not_recorded_is_trained_again(tmp_path):
    # no checkpoint (save_steps=0, as when max_steps is under the preset's save_steps), stopped
    # after training but before trained.json: `cooper train` refuses the folder, the arm retrains
    out = tmp_path / "exp"
    args = ["experiment", "hacking", "--out", out, *CPU, "arms=rm", "train.save_steps=0",
            "--no-report"]
    run_cli(*args)
    folder = out / "seed-0" / "arms" / "rm"
    assert (folder / "policy").is_dir() and not list(folder.glob("checkpoint-*"))
    for name in ("arm.json", "trained.json", "final_eval.json"):
        (folder / name).unlink()
    proc = run_cli(*args)
    assert "seed-0/rm: training was not recorded as complete; training again" in proc.stderr
    assert (folder / "arm.json").is_file()
    assert [r["step"] for r in records(folder / "metrics.jsonl") if "reward/rule_mean" in r] == [
        1, 2]


# ------------------------------------------------------------------ values

@pytest.mark.parametrize(("override", "message"), [
    ("policy.lr=-1", "policy.lr must be a finite number >= 0, got -1.0"),
    ("policy.lr=nan", "policy.lr must be a finite number >= 0, got nan"),
    ("rm_update.lr=-1e-5", "rm_update.lr must be a finite number >= 0"),
    ("rollout.temperature=-1", "rollout.temperature must be a finite number > 0, got -1.0"),
    ("rollout.temperature=0", "rollout.temperature must be a finite number > 0, got 0.0"),
    ("rollout.max_completion_length=0", "rollout.max_completion_length must be >= 1, got 0"),
    ("output_dir=", "output_dir is empty: set output_dir=DIR"),
    ("output_dir=  ", "output_dir is empty"),
    ("report_to=bogus", "report_to: 'bogus' is not a logging backend; set 'none'"),
    ("report_to=tensorboard,bogus", "'bogus' is not a logging backend"),
    ("rollout.top_p=5", r"rollout.top_p must be in \(0, 1\] .*got 5.0"),
    ("rollout.top_p=0", "rollout.top_p must be in"),
    ("policy.loss_type=bogus", "policy.loss_type='bogus' is not one of: dapo, grpo"),
    ("reward.verifier_timeout_s=0", "reward.verifier_timeout_s must be a finite number > 0"),
    ("reward.verifier_timeout_s=inf", "reward.verifier_timeout_s must be a finite number > 0"),
])
def test_values_that_would_fail_mid_run_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load_config("demo_cpu", ["reward.mode=rule", override]).validate()


@pytest.mark.parametrize("override", ["policy.lr=0", "rollout.top_p=1", "policy.loss_type=grpo",
                                      "report_to=tensorboard,none", "rollout.temperature=0.7"])
def test_values_at_the_edges_are_accepted(override):
    # lr 0 is the step benchmark's (bench_cpu: every mode samples the same rollouts)
    load_config("demo_cpu", ["reward.mode=rule", override]).validate()


def test_the_checked_choices_are_what_trl_and_transformers_accept():
    from transformers.integrations.integration_utils import INTEGRATION_TO_CALLBACK
    from trl import GRPOConfig

    help_text = GRPOConfig.__dataclass_fields__["loss_type"].metadata["help"]
    listed = help_text.split("Supported values are ")[1].split(".")[0]
    assert set(re.findall(r"'(\w+)'", listed)) == set(LOSS_TYPES)
    assert set(REPORT_BACKENDS) == {"none", *INTEGRATION_TO_CALLBACK}


def test_print_config_refuses_a_bad_value_without_a_traceback():
    proc = run_cli("train", "--config", "demo_cpu", "reward.mode=rule", "rollout.top_p=5",
                   "--print-config", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "error: rollout.top_p must be in (0, 1] (1 samples from every " \
                                  "token), got 5.0"


# ------------------------------------------------------------------ the command line

def test_settings_may_follow_the_flags():
    proc = run_cli("train", "reward.mode=rule", "--print-config", "max_steps=2", "--config",
                   "demo_cpu", "seed=3")
    printed = yaml.safe_load(proc.stdout)
    assert (printed["reward"]["mode"], printed["max_steps"], printed["seed"]) == ("rule", 2, 3)
    assert printed["data"]["dataset"] == "arith_small"  # demo_cpu's, from the flag in between
    bad = run_cli("train", "reward.mode=rule", "--print-config", "--bogus", check=False)
    assert bad.returncode == 2 and "unrecognized arguments: --bogus" in bad.stderr
