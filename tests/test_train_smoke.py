"""`cooper train` through the real CLI on tiny models: every mode learns and logs its metrics.

The policy is a tiny model warm-started on single-digit sums (right about half the time, so
GRPO groups have reward variance); the reward model is a tiny random classifier.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from safetensors.torch import load_file

from conftest import run_cli

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models

REQUIRED = ["reward/rm_mean", "reward/rule_mean", "verify/timeouts", "hacking/gap",
            "rm/agreement", "rm/loss", "rm/pair_acc_before", "rm/pairs", "rm/valid_negatives", "rm/fallback_negatives",
            "perf/generation", "perf/logprobs", "perf/verify", "perf/rm_score",
            "perf/policy_update", "perf/negatives", "perf/rm_update", "perf/step"]


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

    return tiny_arith_models()


def tiny_args(arith: Path, out: Path, mode: str, *extra: str) -> list[str]:
    return ["train", "--config", "demo_cpu", f"reward.mode={mode}",
            f"policy.model={arith / 'policy'}", f"reward.model={arith / 'reward'}",
            "data.dataset=arith_small", "data.split=train", "data.limit=64",
            "rollout.prompts_per_step=2", "rollout.samples_per_prompt=4",
            "rollout.micro_batch_size=4", "rollout.max_completion_length=48",
            "assistant.max_new_tokens=48", "rm_update.max_attempts=1",
            "rm_update.negatives=assistant",  # the paper's Stage 2 (demo_cpu's: rollouts)
            "validation.dataset=arith_small", "validation.limit=8",
            "validation.max_new_tokens=48", "max_steps=2", "policy.lr=1e-4",
            "reward.max_length=256", "rm_update.train_layers=none", f"output_dir={out}", *extra]


def weights(folder: Path) -> dict:
    return {k: v for f in sorted(folder.glob("*.safetensors")) for k, v in load_file(f).items()}


def metrics(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]


def assert_changed(before: dict, after: dict, what: str) -> None:
    unchanged = [k for k in before if k in after and before[k].equal(after[k])]
    assert not unchanged, f"{what} tensors that did not change: {unchanged}"


@pytest.mark.parametrize("mode", ["rule", "rm", "cooper", "hybrid_cooper"])
def test_each_mode_learns_and_logs_every_metric(arith, tmp_path, mode):
    out = tmp_path / mode
    # 4 prompts a step, so that every step has a verified-correct sample and makes pairs; the
    # hybrid run also judges by the gold judge (on digits it reads what the rule reads)
    gold = mode == "hybrid_cooper"
    run_cli(*tiny_args(arith, out, mode, "rollout.prompts_per_step=4",
                       *(["validation.judge=gold"] if gold else [])))
    rows = metrics(out)
    steps = [r for r in rows if r["step"] >= 1 and "loss" in r]
    assert [r["step"] for r in steps] == [1, 2]
    for row in steps:
        missing = [m for m in REQUIRED if m not in row]
        assert not missing, f"step {row['step']} lacks {missing}"
        assert all(math.isfinite(v) for v in row.values()), row
        assert row["hacking/gap"] == pytest.approx(row["reward/rm_mean"] - row["reward/rule_mean"])
        if mode.startswith("hybrid"):  # what TRL optimised is the hybrid reward
            assert row["reward"] == pytest.approx(row["reward/hybrid_mean"])
            assert row["reward/hybrid_mean"] >= row["reward/rule_mean"]
        else:
            assert "reward/hybrid_mean" not in row
        if gold:  # the gold judge's figures, against what the policy was paid
            assert row["hacking/gold_gap"] == pytest.approx(
                row["reward/hybrid_mean"] - row["gold/accuracy"])
            assert 0 <= row["gold/accuracy"] <= 1 and "hacking/gold_top_wrong" in row
        else:
            assert not any(k.startswith("gold/") or k == "val/rule_accuracy" for k in row)
    assert "val/accuracy" in rows[0] and rows[0]["step"] == 0  # validated before training
    assert ("val/rule_accuracy" in rows[0]) == gold  # the rule's beside the gold judge's
    assert "val/accuracy" in steps[-1]  # and after the last step
    assert_changed(weights(arith / "policy"), weights(out / "policy"), "policy")
    rm_before, rm_after = weights(arith / "reward"), weights(out / "reward_model")
    if mode in ("cooper", "hybrid_cooper"):
        assert sum(r["rm/pairs"] for r in steps) > 0
        assert_changed(rm_before, rm_after, "reward-model")
    else:  # a fixed reward model stays fixed
        assert all(rm_before[k].equal(rm_after[k]) for k in rm_before)


def test_rule_mode_without_a_reward_model_logs_the_verifier(arith, tmp_path):
    out = tmp_path / "plain"
    args = [a for a in tiny_args(arith, out, "rule") if not a.startswith("reward.model=")]
    run_cli(*args)
    steps = [r for r in metrics(out) if "loss" in r]
    assert len(steps) == 2 and all("reward/rule_mean" in r for r in steps)
    assert not any("reward/rm_mean" in r for r in steps)


def test_bad_setting_stops_before_any_work(tmp_path):
    proc = run_cli("train", "--config", "demo_cpu", "reward.mode=cooper", "rollout.temprature=1",
                   f"output_dir={tmp_path}", check=False)
    assert proc.returncode == 2 and "did you mean 'rollout.temperature'" in proc.stderr
    assert not (tmp_path / "metrics.jsonl").exists()


def test_two_processes_keep_identical_reward_models(arith, tmp_path):
    """accelerate's multi-process launcher on CPU: gradients summed, replicas equal."""
    import subprocess
    import sys

    from conftest import cli_env, free_port

    out = tmp_path / "ddp"
    args = tiny_args(arith, out, "cooper", "assistant.backend=rewrite",
                     "rollout.micro_batch_size=2")
    cmd = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu",
           "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no",
           "--main_process_port", str(free_port()),
           "--dynamo_backend", "no", "-m", "cooper", *args]
    env = cli_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-4000:]
    replicas = json.loads((out / "rm_replicas.json").read_text())
    assert replicas["processes"] == 2 and replicas["identical"]
    steps = [r for r in metrics(out) if "loss" in r]
    assert len(steps) == 2 and sum(r["rm/pairs"] for r in steps) > 0
    assert_changed(weights(arith / "reward"), weights(out / "reward_model"), "reward-model")


def test_resume_restores_policy_and_reward_model_state(arith, tmp_path):
    import torch

    out = tmp_path / "resume"
    run_cli(*tiny_args(arith, out, "cooper", "save_steps=1", "assistant.backend=rewrite"))
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    ckpt2 = out / "checkpoint-2"
    assert (ckpt2 / "cooper-checkpoint.json").is_file() and (ckpt2 / "reward_model").is_dir()
    rm_steps_2 = torch.load(ckpt2 / "reward_model_optimizer.pt", weights_only=True)["steps"]
    assert rm_steps_2 >= 1
    # a rerun without --resume refuses to mix two runs in one folder
    refused = run_cli(*tiny_args(arith, out, "cooper"), check=False)
    assert refused.returncode == 2 and "--resume" in refused.stderr

    # resumed as the README writes it: the run's own config.yaml (here with more steps)
    run_cli("train", "--config", out / "config.yaml", "max_steps=4", "--resume")
    rows = [r for r in metrics(out) if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # continued, nothing repeated
    ckpt4 = out / "checkpoint-4"
    state = json.loads((ckpt4 / "trainer_state.json").read_text())
    assert state["global_step"] == 4
    # the reward model's optimiser continued from checkpoint-2's state
    rm_steps_4 = torch.load(ckpt4 / "reward_model_optimizer.pt", weights_only=True)["steps"]
    updates_after_resume = sum(r["rm/updated"] for r in rows if r["step"] > 2)
    assert rm_steps_4 == rm_steps_2 + updates_after_resume
    # and so did the policy's (AdamW keeps a step count per parameter)
    opt = torch.load(ckpt4 / "optimizer.pt", weights_only=True)
    assert max(int(s["step"]) for s in opt["state"].values()) == 4


def test_tensorboard_logging_works_offline(arith, tmp_path):
    out = tmp_path / "tb"
    run_cli(*tiny_args(arith, out, "rm", "report_to=tensorboard", "max_steps=1",
                       "validation.enabled=false"))
    events = list(out.rglob("events.out.tfevents.*"))
    assert events and sum(e.stat().st_size for e in events) > 0
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(events[0].parent))
    acc.Reload()
    assert "train/hacking/gap" in acc.Tags()["scalars"]


def test_negatives_leave_the_rollouts_alone_and_may_overlap_the_policy_update(arith, tmp_path):
    """The local assistant (the reference policy) writing negatives must not shift the policy's
    sampling; writing them in the background, while the policy updates, gives the same run."""
    common = ("policy.lr=0", "max_steps=3", "validation.enabled=false")  # lr 0: same policy
    runs = {name: tmp_path / name for name in ("rm", "cooper", "background")}
    run_cli(*tiny_args(arith, runs["rm"], "rm", *common))
    run_cli(*tiny_args(arith, runs["cooper"], "cooper", *common))
    run_cli(*tiny_args(arith, runs["background"], "cooper", *common, "assistant.background=true"))
    rows = {name: [r for r in metrics(out) if "loss" in r] for name, out in runs.items()}
    # the assistant really wrote negatives before the last step's rollouts were sampled
    assert sum(r["rm/positives"] for r in rows["cooper"][:-1]) > 0
    lengths = {name: [r["completions/mean_length"] for r in rs] for name, rs in rows.items()}
    assert lengths["rm"] == lengths["cooper"] == lengths["background"]
    assert [r["rm/pairs"] for r in rows["cooper"]] == [r["rm/pairs"] for r in rows["background"]]
    rm_sync, rm_bg = weights(runs["cooper"] / "reward_model"), weights(runs["background"] / "reward_model")
    assert all(rm_sync[k].equal(rm_bg[k]) for k in rm_sync)
    # in the background the step waited for less than the negatives took; in line, as long
    written = [r for r in rows["background"] if r["rm/positives"]]
    assert sum(r["perf/negatives"] for r in written) < sum(r["perf/negatives_total"] for r in written)
    inline = [r for r in rows["cooper"] if r["rm/positives"]]
    assert all(r["perf/negatives"] == pytest.approx(r["perf/negatives_total"], abs=0.05) for r in inline)


def test_rm_update_train_layers_changes_only_the_top_layers(arith, tmp_path):
    out = tmp_path / "top"
    run_cli(*tiny_args(arith, out, "cooper", "assistant.backend=rewrite",
                       "rm_update.train_layers=1"))
    assert sum(r["rm/pairs"] for r in metrics(out) if "loss" in r) > 0
    before, after = weights(arith / "reward"), weights(out / "reward_model")
    changed = {k for k in before if not before[k].equal(after[k])}
    layers = sorted({int(k.split(".layers.")[1].split(".")[0]) for k in before if ".layers." in k})
    top = f".layers.{layers[-1]}."
    assert changed and all(top in k or ".layers." not in k for k in changed), changed
    assert not any("embed" in k for k in changed)  # embeddings stay frozen
    assert any(top in k for k in changed)


def test_rm_update_train_layers_beyond_the_model_is_a_clear_error(arith, tmp_path):
    proc = run_cli(*tiny_args(arith, tmp_path / "deep", "cooper", "assistant.backend=rewrite",
                              "rm_update.train_layers=99"), check=False)
    assert proc.returncode == 2 and "rm_update.train_layers" in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("negatives", ["rollouts", "both"])
def test_rollout_negatives_make_pairs_and_update_the_reward_model(arith, tmp_path, negatives):
    out = tmp_path / negatives
    run_cli(*tiny_args(arith, out, "cooper", "rollout.prompts_per_step=4",
                       "assistant.backend=rewrite", f"rm_update.negatives={negatives}"))
    steps = [r for r in metrics(out) if r["step"] >= 1 and "loss" in r]
    assert sum(r["rm/pairs_rollout"] for r in steps) > 0
    if negatives == "rollouts":  # nothing written from a positive: no decoding, no rewrite
        assert all(r["rm/pairs_assistant"] == 0 and r["perf/negatives_total"] == 0 for r in steps)
    else:
        assert sum(r["rm/pairs_assistant"] for r in steps) > 0
    assert all(r["rm/pairs"] == r["rm/pairs_rollout"] + r["rm/pairs_assistant"] for r in steps)
    assert all(r["rm/changed_fraction"] > 0.5 for r in steps if r["rm/pairs"] > 0)
    assert_changed(weights(arith / "reward"), weights(out / "reward_model"), "reward-model")


def test_validation_cadence_and_kept_policies_do_not_change_training(arith, tmp_path):
    """Validation samples in a forked random state: validating every step or only at the start
    and end gives the same training run, step for step and weight for weight. Keeping the
    policy at chosen steps (the second run) changes nothing either, and what it keeps is the
    policy of that step."""
    runs = {}
    for every in (1, 3):
        out = tmp_path / f"every-{every}"
        kept = ["keep_policy_steps=1,3"] if every == 3 else []
        run_cli(*tiny_args(arith, out, "cooper", "rollout.prompts_per_step=4", "max_steps=3",
                           f"validation.every_steps={every}", *kept))
        rows = [r for r in metrics(out) if r["step"] >= 1 and "loss" in r]
        runs[every] = ([{k: v for k, v in r.items()
                         if not k.startswith(("perf/", "val/")) and "time" not in k
                         and "runtime" not in k and "per_second" not in k} for r in rows],
                       weights(out / "policy"), weights(out / "reward_model"))
        assert sum("val/accuracy" in r for r in rows) == (3 if every == 1 else 1)
    (rows1, pol1, rm1), (rows3, pol3, rm3) = runs[1], runs[3]
    assert rows1 == rows3
    assert all(pol1[k].equal(pol3[k]) for k in pol1)
    assert all(rm1[k].equal(rm3[k]) for k in rm1)
    kept = tmp_path / "every-3" / "policy-steps"
    assert sorted(p.name for p in kept.iterdir()) == ["step-1", "step-3"]
    assert not (tmp_path / "every-1" / "policy-steps").exists()
    step3, step1 = weights(kept / "step-3"), weights(kept / "step-1")
    assert step3.keys() == pol3.keys() and all(step3[k].equal(pol3[k]) for k in pol3)
    assert_changed(step1, step3, "policy (step 1 -> 3)")
    assert (kept / "step-1" / "tokenizer_config.json").is_file()  # loadable on its own


def test_kept_policy_steps_outside_the_run_are_refused(arith, tmp_path):
    bad = run_cli(*tiny_args(arith, tmp_path / "x", "rule", "keep_policy_steps=1,5"), check=False)
    assert bad.returncode == 2 and "keep_policy_steps='1,5'" in bad.stderr
    assert "between 1 and max_steps=2" in bad.stderr
