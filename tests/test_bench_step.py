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
