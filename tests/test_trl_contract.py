"""The TRL internals CooperTrainer relies on: present with the signatures we call, and used.

CooperTrainer overrides private methods of TRL's GRPOTrainer and reads private attributes. If a
TRL release renames one, an override would silently stop running (timing reads 0, checkpoints
are no longer staged) while a smoke test that checks only finite values still passes. These
tests name what broke: the first checks names and signatures (and fails on a planted
mismatch), the second runs a tiny training and checks that each override took effect.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest
import yaml
from trl import GRPOTrainer

from conftest import run_cli

# method -> (parameters we call it with, what CooperTrainer uses it for)
METHODS = {
    "_generate": (["self", "prompts"], "perf/generation: the time of rollout generation"),
    "_generate_and_score_completions": (["self", "inputs"],
                                        "perf/generation and perf/logprobs are recorded"),
    "_save_checkpoint": (["self", "model", "trial"], "checkpoints staged, then renamed"),
    "_get_output_dir": (["self", "trial"], "TRL writes a checkpoint into the staging folder"),
    "training_step": (["self", "model", "inputs", "num_items_in_batch"],
                      "perf/policy_update and the step's stage timer"),
}
# attributes read from TRL's own code: (class whose source sets it, what we use it for)
ATTRIBUTES = {
    "_metrics": "CooperTrainer.record adds this step's metrics",
    "_step": "the first micro-step of an optimiser step starts the step timer",
    "ref_model": "the local assistant writes negatives with the reference policy",
}


def contract_problems(cls: type) -> list[str]:
    """What in ``cls`` no longer matches what CooperTrainer calls, each with its consequence."""
    problems = []
    for name, (params, use) in METHODS.items():
        method = getattr(cls, name, None)
        if not callable(method):
            problems.append(f"{cls.__name__}.{name} is gone: {use} breaks")
            continue
        got = list(inspect.signature(method).parameters)
        if got != params:
            problems.append(f"{cls.__name__}.{name}{tuple(got)} != {tuple(params)}: {use} breaks")
    source = "".join(inspect.getsource(c) for c in cls.__mro__
                     if c.__module__.startswith(("trl.", "transformers.")))
    for name, use in ATTRIBUTES.items():
        if f"self.{name} =" not in source and f"self.{name}:" not in source:
            problems.append(f"{cls.__name__} no longer sets self.{name}: {use} breaks")
    return problems


def test_grpo_trainer_has_what_cooper_overrides_and_reads():
    assert contract_problems(GRPOTrainer) == []


def test_the_contract_check_fails_on_a_renamed_or_changed_method():
    class Renamed(GRPOTrainer):
        _generate = None  # as if TRL had renamed it

        def _save_checkpoint(self, model, trial, metrics=None):  # a new parameter
            pass

    problems = contract_problems(Renamed)
    assert any("_generate is gone" in p and "perf/generation" in p for p in problems)
    assert any("_save_checkpoint" in p and "staged" in p for p in problems)


def test_each_override_ran_in_a_tiny_run(tiny_models, tmp_path):
    """Two steps with a checkpoint each: generation timed, Stage 1 once per batch, checkpoints
    staged and renamed into place (complete, nothing left in staging)."""
    out = tmp_path / "run"
    run_cli("train", "--config", "demo_cpu", "reward.mode=rule", f"policy.model={tiny_models.policy}",
            "data.dataset=arith_small", "data.limit=8", "rollout.prompts_per_step=2",
            "rollout.samples_per_prompt=2", "rollout.micro_batch_size=2",
            "rollout.max_completion_length=8", "validation.enabled=false", "max_steps=2",
            "save_steps=1", "save_total_limit=5", f"output_dir={out}")
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in rows if "loss" in r]
    assert len(steps) == 2
    for r in steps:
        assert r["perf/generation"] > 0, "_generate override did not run"
        assert r["perf/policy_update"] > 0, "training_step / optimizer-step timer did not run"
        assert "perf/verify" in r and "reward/rule_mean" in r, (
            "Stage 1 did not run from the reward functions, or TRL's log_metric is gone")
    for n in (1, 2):
        marker = out / f"checkpoint-{n}" / "cooper-checkpoint.json"
        assert marker.is_file(), "_save_checkpoint override did not stage the checkpoint"
        assert json.loads(marker.read_text())["step"] == n
    assert not (out / ".staging").exists()
    recorded = yaml.safe_load((out / "config.yaml").read_text())["grpo"]
    assert recorded["scale_rewards"] == "group" and recorded["num_iterations"] == 1
    assert recorded["steps_per_generation"] == 2 and recorded["reward_weights"] == [1.0]
    assert not list(Path(out).glob("checkpoint-*/checkpoint-*")), "_get_output_dir not used"
    # the run's config.yaml is itself a preset: it gives the run's settings back, record and all
    again = yaml.safe_load(run_cli("train", "--config", out / "config.yaml", "--print-config").stdout)
    assert again == yaml.safe_load((out / "config.yaml").read_text())


@pytest.mark.parametrize("name", sorted(METHODS))
def test_cooper_trainer_overrides_exist(name):
    """Each method listed is one CooperTrainer overrides, with TRL's parameters: an override
    dropped (the list would then guard nothing) or one whose signature drifted fails here."""
    from trl import GRPOTrainer

    from cooper.rl.trainer import CooperTrainer

    assert name in vars(CooperTrainer), f"CooperTrainer no longer overrides {name}: update METHODS"
    ours = list(inspect.signature(vars(CooperTrainer)[name]).parameters)
    theirs = list(inspect.signature(getattr(GRPOTrainer, name)).parameters)
    assert ours == theirs == METHODS[name][0]


def test_print_config_shows_every_pinned_grpo_setting():
    from cooper.rl.trainer import GRPO_PINNED

    out = run_cli("train", "--config", "demo_cpu", "reward.mode=cooper", "reward.model=x",
                  "policy.scale_rewards=none", "--print-config").stdout
    grpo = yaml.safe_load(out)["grpo"]
    assert set(grpo) == set(GRPO_PINNED)
    assert grpo["scale_rewards"] == "none"  # from our setting, not TRL's default
    assert grpo["multi_objective_aggregation"] == "sum_then_normalize"
    assert grpo["reward_weights"] == [0.0, 1.0]  # the verifier column is logged, not optimised


def test_an_edited_grpo_record_is_refused_not_silently_ignored(tmp_path):
    """The grpo section of a run's config.yaml is derived from its settings and never read: a
    file whose record differs from its own settings is refused, naming the value; settings
    changed on the command line still apply, and the record follows them."""
    printed = yaml.safe_load(run_cli("train", "--config", "demo_cpu", "reward.mode=rule",
                                     "--print-config").stdout)
    edited = {**printed, "grpo": {**printed["grpo"], "beta": 0.5}}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(edited))
    proc = run_cli("train", "--config", path, "--print-config", check=False)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "grpo.beta is 0.5" in proc.stderr and "cooper train --settings" in proc.stderr
    path.write_text(yaml.safe_dump({**printed, "grpo": {**printed["grpo"], "bogus": 1}}))
    assert "grpo.bogus is not a value" in run_cli("train", "--config", path, "--print-config",
                                                  check=False).stderr
    path.write_text(yaml.safe_dump(printed))  # as written: an override changes what TRL gets
    out = yaml.safe_load(run_cli("train", "--config", path, "policy.kl_coef=0.25",
                                 "--print-config").stdout)
    assert out["policy"]["kl_coef"] == out["grpo"]["beta"] == 0.25


@pytest.mark.parametrize("on", [False, True])
def test_grpo_config_takes_our_settings_without_a_deprecation_warning(tmp_path, on):
    """transformers 5 renamed gradient_checkpointing to activation_checkpointing: the old name
    warns on every run, and TRL's own default of it (True) must not override ours."""
    import warnings

    from trl import GRPOConfig

    from cooper.config.train import load_config
    from cooper.rl.trainer import grpo_kwargs

    cfg = load_config("demo_cpu", [f"output_dir={tmp_path}",
                                   f"policy.gradient_checkpointing={str(on).lower()}"])
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*deprecated.*", category=FutureWarning)
        args = GRPOConfig(**grpo_kwargs(cfg))
    assert args.activation_checkpointing is on and args.gradient_checkpointing is on
