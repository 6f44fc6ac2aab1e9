"""`cooper bench step` on tiny models: the three modes, their stages and the ratios."""

from __future__ import annotations

import json
import statistics

import pytest

from conftest import run_cli
from test_train_smoke import tiny_args

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def test_bench_step_reports_every_stage_and_the_ratios(arith, tmp_path):
    overrides = [a for a in tiny_args(arith, tmp_path / "unused", "cooper")[4:]
                 if not a.startswith(("reward.model=", "output_dir=", "max_steps="))]
    out = tmp_path / "step.json"
    run_cli("bench", "step", "--preset", "demo_cpu", "--steps", "1", "--warmup", "1",
            "--repeats", "2", "--rm", str(arith / "reward"), "--out", str(out), "--markdown",
            str(tmp_path / "step.md"), *overrides, "policy.lr=0")
    result = json.loads(out.read_text())
    assert set(result["modes"]) == {"rule", "rm", "cooper"}
    for r in result["modes"].values():
        # two runs of one measured step each, pooled; every step listed
        assert r["measured_steps"] == 2 and len(r["per_step"]) == 2
        assert r["step_median_s"] > 0 and r["peak_rss_mb"] > 50
        assert set(r["stages_median_s"]) >= {"generation", "logprobs", "verify", "rm_score",
                                             "policy_update", "negatives", "rm_update"}
    # plain GRPO baselines: no reward-model work in rule mode, no update work outside cooper
    assert result["modes"]["rule"]["stages_median_s"]["rm_score"] == 0
    assert result["modes"]["rm"]["stages_median_s"]["rm_update"] == 0
    assert result["modes"]["rm"]["stages_median_s"]["rm_score"] > 0
    # lr 0: every mode sampled the same rollouts (the local assistant's negatives included)
    lengths = {r["mean_completion_tokens"] for r in result["modes"].values()}
    assert len(lengths) == 1
    assert result["cooper_over_rule"] == pytest.approx(
        result["modes"]["cooper"]["step_median_s"] / result["modes"]["rule"]["step_median_s"])
    cooper = result["modes"]["cooper"]["per_step"]
    extra = statistics.median(r["negatives"] + r["rm_update"] for r in cooper)
    rm_step = result["modes"]["rm"]["step_median_s"]
    assert result["cooper_over_rm_from_stages"] == pytest.approx((rm_step + extra) / rm_step)
    assert extra > 0  # Cooper's own stages were timed
    assert "environment" in result and "cooper_over_rm" in (tmp_path / "step.md").read_text()


def test_bench_step_times_an_experiment_presets_arms_on_its_setup(tmp_path):
    """`--preset hacking_cpu`: the arms as the experiment runs them, on one seed's setup
    (reused from an experiment folder), each step split into the policy's side and the reward
    model's."""
    from test_experiment import CPU

    tiny = [a for a in CPU[2:] if a.startswith(("setup.", "rm_init.", "probe."))] + [
        "train.rollout.prompts_per_step=2", "train.rollout.samples_per_prompt=2",
        "train.rollout.micro_batch_size=4", "train.rollout.max_completion_length=12",
        "train.assistant.max_new_tokens=12", "train.rm_update.train_layers=1"]
    run_cli("experiment", "hacking", "--preset", "hacking_cpu", "--out", tmp_path / "exp",
            "--setup-only", *tiny)
    out = tmp_path / "arms.json"
    run_cli("bench", "step", "--preset", "hacking_cpu", "--setup", tmp_path / "exp" / "seed-0",
            "--modes", "rule,cooper_rollouts", "--steps", "5", "--warmup", "1",
            "--threads", "1", "--out", out, "--markdown", tmp_path / "arms.md", *tiny)
    result = json.loads(out.read_text())
    assert list(result["modes"]) == ["rule", "cooper_rollouts"] and result["threads"] == 1
    # per_step's stages are rounded to the millisecond, so a sum of three is within 1.5 ms of
    # the unrounded one the summary is taken over (a fresh CI run saw 1.08 ms)
    three = 1.5e-3 + 1e-9
    for r in result["modes"].values():
        assert r["measured_steps"] == 5
        assert r["policy_side_median_s"] == pytest.approx(statistics.median(
            p["generation"] + p["logprobs"] + p["policy_update"] for p in r["per_step"]),
            abs=three)
        assert r["rm_side_mean_s"] == pytest.approx(statistics.mean(
            p["rm_score"] + p["negatives"] + p["rm_update"] for p in r["per_step"]), abs=three)
        assert r["step_mean_s"] == pytest.approx(statistics.mean(
            p["step"] for p in r["per_step"]), abs=1e-3)
    # the arms as the experiment runs them: the rule arm's reward model watches every 5th step
    # (the training step of global step 5, the fifth measured), the rollout arm's is updated
    rule = result["modes"]["rule"]
    # (per_step is rounded to the millisecond, which a tiny model's scoring can fall under; the
    # unwatched steps log no scoring at all, so theirs is exactly 0, and the mean is unrounded)
    assert [p["rm_score"] for p in rule["per_step"][:4]] == [0.0] * 4
    assert rule["stages_median_s"]["rm_score"] == 0 and rule["rm_side_mean_s"] > 0
    assert result["modes"]["cooper_rollouts"]["stages_median_s"]["rm_update"] > 0
    assert "reward model's side" in (tmp_path / "arms.md").read_text()
    bad = run_cli("bench", "step", "--preset", "hacking_cpu", "--modes", "nope", "--setup",
                  tmp_path / "exp" / "seed-0", *tiny, check=False)
    assert bad.returncode == 2 and "has no arm nope" in bad.stderr
    bad = run_cli("bench", "step", "--preset", "hacking_cpu", "--threads", "0", check=False)
    assert bad.returncode == 2 and "--threads >= 1" in bad.stderr


def test_the_seed_follows_the_setup_folder():
    from cooper.bench.step import setup_seed
    from cooper.errors import UserError

    assert setup_seed("runs/hacking/seed-3", None) == 3  # the setup's own seed
    assert setup_seed("runs/hacking/seed-3", 3) == 3
    assert setup_seed(None, None) == 0 and setup_seed(None, 2) == 2
    assert setup_seed("runs/mine", None) == 0  # a folder not named seed-S: the default
    with pytest.raises(UserError, match="seed 3's setup and --seed is 1"):
        setup_seed("runs/hacking/seed-3", 1)
