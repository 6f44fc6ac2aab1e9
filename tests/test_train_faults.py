"""Hostile data and hostile numbers in `cooper train`: bad rows stop the run before any step (or
are skipped and counted), non-finite rewards and reward-model losses change nothing and are
counted, equal rewards give zero advantage, pathological completions cost one verifier timeout.
"""

from __future__ import annotations

import json
import math
import shutil
import time
from functools import partial
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from conftest import run_cli
from test_train_smoke import metrics, tiny_args, weights

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


# ------------------------------------------------------------------ bad data

def bad_rows_file(path: Path) -> Path:
    good = [{"id": f"g{i}", "question": f"What is {i} + 1?", "answer": str(i + 1)}
            for i in range(8)]
    bad = [b'{"id": "b1", "question": "What is 2 + 2?"}',  # missing reference
           b'{"id": "b2", "question": "   ", "answer": "3"}',  # empty question
           b'{"id": "g0", "question": "What is 5 + 5?", "answer": "10"}',  # duplicate id
           b'{"id": "b4", "question": "What is 1 + 1?", "answer": "2\xff\xfe"}',  # bad UTF-8
           json.dumps({"id": "b5", "question": "Q" * (10 << 20), "answer": "1"}).encode()]
    lines = [json.dumps(r).encode() for r in good[:4]] + bad + [
        json.dumps(r).encode() for r in good[4:]]
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def data_args(arith: Path, out: Path, data: Path, *extra: str) -> list[str]:
    return tiny_args(arith, out, "rule", f"data.dataset={data}", "data.id_field=id",
                     "max_steps=1", "validation.enabled=false", *extra)


def test_bad_training_data_stops_before_any_step_naming_file_and_line(arith, tmp_path):
    data = bad_rows_file(tmp_path / "train.jsonl")
    out = tmp_path / "run"
    proc = run_cli(*data_args(arith, out, data), check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"{data}:5: missing field 'answer'" in proc.stderr and "--skip-bad" in proc.stderr
    assert not (out / "metrics.jsonl").exists()  # stopped at load time, before any step


def test_bad_training_rows_are_skipped_and_counted_with_skip_bad(arith, tmp_path):
    data = bad_rows_file(tmp_path / "train.jsonl")
    out = tmp_path / "run"
    proc = run_cli(*data_args(arith, out, data), "--skip-bad")
    # missing reference, empty question, duplicate id, invalid UTF-8, the 10 MiB row
    assert f"{data}: skipped 5 bad row(s), first: {data}:5:" in proc.stderr
    assert [r["step"] for r in metrics(out) if "loss" in r] == [1]


# ------------------------------------------------------------------ numbers

def reward_model_with_head(arith: Path, folder: Path, value: float) -> Path:
    """A copy of the tiny reward model whose score head is filled with ``value``: 0 scores
    every input 0.5, NaN scores every input NaN."""
    shutil.copytree(arith / "reward", folder)
    w = load_file(folder / "model.safetensors")
    w["score.weight"] = torch.full_like(w["score.weight"], value)
    save_file(w, folder / "model.safetensors", metadata={"format": "pt"})
    return folder


def test_equal_rewards_give_zero_advantage_and_no_nan(arith, tmp_path):
    rm = reward_model_with_head(arith, tmp_path / "rm", 0.0)
    out = tmp_path / "run"
    # no KL term (kl_coef=0): with zero advantages nothing else could move the policy
    run_cli(*tiny_args(arith, out, "rm", f"reward.model={rm}", "policy.kl_coef=0",
                       "assistant.backend=rewrite", "validation.enabled=false"))
    rows = [r for r in metrics(out) if "loss" in r]
    assert len(rows) == 2
    for r in rows:
        assert all(math.isfinite(v) for v in r.values()), r
        assert r["reward/rm_mean"] == 0.5 and r["frac_reward_zero_std"] == 1.0
        assert r["loss"] == 0.0
    before, after = weights(arith / "policy"), weights(out / "policy")
    assert all(before[k].equal(after[k]) for k in before)  # zero advantage, zero update


def test_non_finite_rewards_and_reward_model_loss_are_skipped_and_counted(arith, tmp_path):
    rm = reward_model_with_head(arith, tmp_path / "rm", math.nan)
    out = tmp_path / "run"
    run_cli(*tiny_args(arith, out, "cooper", f"reward.model={rm}", "policy.kl_coef=0",
                       "assistant.backend=rewrite", "validation.enabled=false"))
    rows = [r for r in metrics(out) if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2]  # training went on
    for r in rows:
        assert r["reward/nonfinite"] == 8 and r["loss"] == 0.0  # every reward NaN: no update
        if r["rm/pairs"] > 0:  # the reward-model update saw a NaN loss: skipped, counted
            assert r["rm/skipped_nonfinite"] == 1 and r["rm/updated"] == 0
    assert any(r["rm/pairs"] > 0 for r in rows)
    before, after = weights(arith / "policy"), weights(out / "policy")
    assert all(before[k].equal(after[k]) for k in before)
    rm_before, rm_after = weights(rm), weights(out / "reward_model")
    assert all(torch.equal(rm_before[k].nan_to_num(), rm_after[k].nan_to_num())
               for k in rm_before)


class _FixedScores:
    """A reward model stand-in returning set scores (the trainer only calls ``score``)."""

    def __init__(self, scores):
        self.scores = scores

    def score(self, triples, batch_size=16, **_):
        return list(self.scores)


def test_a_non_finite_score_makes_its_row_unscorable_in_every_column():
    """TRL gives a row that is NaN in *every* reward column zero advantage and leaves it out
    of its group's baseline; a finite verdict column beside it would turn NaN into reward 0."""
    from cooper.config import load_config
    from cooper.rl.step import CooperReward
    from cooper.rl.trainer import reward_weights
    from cooper.rl.trl_reward import verifier_column
    from cooper.verify.verifier import Verdict

    def verify(completions, references):
        return [Verdict(c == r, c, "correct" if c == r else "wrong")
                for c, r in zip(completions, references, strict=True)]

    for mode in ("rm", "cooper"):
        cfg = load_config(None, [f"reward.mode={mode}", "reward.model=x",
                                 "rm_update.pair_metrics=false"])
        plan = cfg.plan()
        cooper = CooperReward.from_config(cfg, rm=_FixedScores([0.9, math.nan, math.inf, 0.2]),
                              updater=object() if mode == "cooper" else None, verify=verify,
                              negatives=object() if mode == "cooper" else None)
        rollouts, stats, _ = cooper.score(["p"] * 4, ["q"] * 4, ["1"] * 4, ["1", "1", "2", "2"],
                                          step=0, training=False)
        assert reward_weights(plan.pays, plan.scores_with_rm) == [0.0, 1.0]
        assert verifier_column(rollouts, plan.pays) == [1.0, None, None, 0.0]
        rewards = cooper.rewards(rollouts)
        assert rewards[0] == 0.9 and rewards[3] == 0.2
        assert math.isnan(rewards[1]) and math.isnan(rewards[2])
        assert stats.nonfinite_scores == 2

    # hybrid: the verified rollout with a NaN score is paid 1 (the model is not asked there);
    # the wrong one with an infinite score is unscorable in every column
    for mode in ("hybrid", "hybrid_cooper"):
        cfg = load_config(None, [f"reward.mode={mode}", "reward.model=x",
                                 "rm_update.pair_metrics=false"])
        plan = cfg.plan()
        cooper = CooperReward.from_config(cfg, rm=_FixedScores([0.9, math.nan, math.inf, 0.2]),
                                          updater=object() if mode == "hybrid_cooper" else None,
                                          verify=verify,
                                          negatives=object() if mode == "hybrid_cooper" else None)
        rollouts, stats, _ = cooper.score(["p"] * 4, ["q"] * 4, ["1"] * 4, ["1", "1", "2", "2"],
                                          step=0, training=False)
        assert reward_weights(plan.pays, plan.scores_with_rm) == [0.0, 1.0]
        assert verifier_column(rollouts, plan.pays) == [1.0, 1.0, None, 0.0]
        rewards = cooper.rewards(rollouts)
        assert rewards[:2] == [1.0, 1.0] and rewards[3] == 0.2 and math.isnan(rewards[2])
        assert stats.hybrid_mean == pytest.approx((1 + 1 + 0.2) / 3)


# ------------------------------------------------------------------ pathological completions

@pytest.mark.serial  # a wall-clock bound: run alone, not beside a busy worker
def test_pathological_completions_cost_one_verifier_timeout_per_step():
    """Stage 1 of a training step on completions that would keep math-verify busy for
    minutes: the step's verification ends within the verifier timeout, they score 0."""
    from cooper.config import load_config
    from cooper.rl.step import CooperReward
    from cooper.verify.verifier import verify_batch

    hangs = [r"\boxed{9^{9^{9^{9}}}}", r"\boxed{(10^{10})!}", r"\boxed{10^{10^{10}}}"]
    completions = [*hangs, r"so \boxed{3}", r"so \boxed{4}"]
    timeout = 1.0
    cooper = CooperReward.from_config(load_config(None, ["reward.mode=rule"]), rm=None, updater=None,
                          verify=partial(verify_batch, timeout_s=timeout))
    t0 = time.perf_counter()
    rollouts, stats, seconds = cooper.score([f"p{i}" for i in range(5)], ["q"] * 5, ["3"] * 5,
                                            completions, step=1)
    took = time.perf_counter() - t0
    assert cooper.rewards(rollouts) == [0.0, 0.0, 0.0, 1.0, 0.0]
    # the hangs run in parallel on the verifier's workers: a couple of timeouts, never minutes
    assert took < 3 * timeout + 3, f"{took:.1f} s"
    assert seconds["verify"] <= took
