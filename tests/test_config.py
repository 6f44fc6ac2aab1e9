"""Training configuration: presets, overrides, typing and validation messages."""

from __future__ import annotations

import pytest

from cooper.config import ConfigError, TrainConfig, list_presets, load_config
from cooper.config.train import field_docs


def test_defaults_follow_the_paper():
    c = TrainConfig()
    assert (c.policy.lr, c.policy.warmup_steps, c.policy.kl_coef, c.policy.clip_eps) == (
        1e-6, 20, 0.001, 0.2)
    assert (c.rm_update.lr, c.rm_update.weight_decay, c.rm_update.max_grad_norm) == (1e-5, 0.01, 1.0)
    assert (c.rollout.prompts_per_step, c.rollout.samples_per_prompt) == (4, 16)
    assert c.rm_update.max_attempts == 3 and c.rm_update.positives_per_prompt == 1


def test_presets_load_and_validate():
    assert {"demo_cpu", "qwen2.5-1.5b_gsm8k"} <= set(list_presets())
    for name in list_presets():
        cfg = load_config(name, ["reward.model=somewhere", "assistant.base_url=http://h/v1",
                                 "assistant.model=m"])
        cfg.validate()


def test_presets_default_to_the_recommended_stage_2():
    # docs/training.md, "What we recommend": the policy's own wrong rollouts on the CPU scale;
    # the paper's assistant negatives at the paper's scale, the one setting measured there
    cpu = load_config("demo_cpu").rm_update
    assert (cpu.negatives, cpu.negatives_per_positive, cpu.loss, cpu.epochs) == \
        ("rollouts", 2, "bradley_terry", 1)
    paper = load_config("qwen2.5-1.5b_gsm8k").rm_update
    assert (paper.negatives, paper.loss, paper.epochs) == ("assistant", "bradley_terry", 1)


def test_preset_files_start_with_their_launch_command():
    from cooper.config import preset_dir

    for path in preset_dir().glob("*.yaml"):
        first = path.read_text().splitlines()[0]
        assert first.startswith("# ") and "cooper" in first
        assert f"--config {path.stem}" in first or f"--preset {path.stem}" in first


def test_overrides_are_typed_by_field():
    c = load_config(None, ["max_steps=7", "rm_update.lr=1e-5", "data.limit=none",
                           "policy.gradient_checkpointing=true", "reward.model=x"])
    assert c.max_steps == 7 and c.rm_update.lr == 1e-5 and c.data.limit is None
    assert c.policy.gradient_checkpointing is True and c.reward.model == "x"


@pytest.mark.parametrize(("overrides", "message"), [
    (["reward.mdoe=rm"], "did you mean 'reward.mode'"),
    (["max_steps=abc"], "max_steps='abc' is not a valid int"),
    (["max_steps=1.5"], "not a valid int"),
    (["reward=3"], "is a section"),
    (["nokey"], "must look like section.key=value"),
    (["policy.gradient_checkpointing=maybe"], "not a valid bool"),
])
def test_bad_settings_say_how_to_fix(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides)


@pytest.mark.parametrize(("overrides", "message"), [
    (["reward.mode=foo"], "not one of: rule, rm, cooper"),
    (["reward.mode=cooper"], "needs a reward model"),
    (["reward.mode=cooper", "reward.model=runs/rm", "rm_update.negatives=assistant",
      "assistant.backend=endpoint"], "needs assistant.base_url"),
    (["reward.mode=rule", "rollout.samples_per_prompt=1"], "must be >= 2"),
    (["reward.mode=rule", "rollout.micro_batch_size=7"], "multiple of micro_batch_size"),
    (["reward.mode=rule", "max_steps=0"], "max_steps must be >= 1"),
    (["reward.mode=rule", "rm_update.train_layers=0"], "train_layers must be >= 1"),
    (["reward.mode=rule", "assistant.attempts_per_call=-1"], "attempts_per_call must be >= 0"),
    (["reward.mode=rule", "assistant.batch_size=0"], "assistant.batch_size must be >= 1"),
])
def test_inconsistent_settings_are_refused(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config(None, overrides).validate()


def test_unknown_preset_lists_the_presets(tmp_path):
    with pytest.raises(ConfigError, match="demo_cpu"):
        load_config("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("reward: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(str(bad))


def test_every_setting_is_documented():
    docs = field_docs()
    assert "reward.mode" in docs and "max_steps" in docs
    import dataclasses

    c = TrainConfig()
    n = sum(len(dataclasses.fields(getattr(c, f.name))) if dataclasses.is_dataclass(
        getattr(c, f.name)) else 1 for f in dataclasses.fields(c))
    assert len(docs) == n  # no setting without its one-line docstring


def test_derived_batch_arithmetic():
    c = load_config(None, ["rollout.prompts_per_step=4", "rollout.samples_per_prompt=16",
                           "rollout.micro_batch_size=8"])
    assert c.derived(1) == {"completions_per_step": 64, "gradient_accumulation_steps": 8}
    assert c.derived(2)["gradient_accumulation_steps"] == 4


def test_rm_probe_needs_a_reward_model():
    with pytest.raises(ConfigError, match="validation.rm_probe"):
        load_config(None, ["reward.mode=rule", "validation.rm_probe=probe.jsonl"]).validate()
    load_config(None, ["reward.mode=rule", "reward.model=x",
                       "validation.rm_probe=probe.jsonl"]).validate()


def test_an_unasked_assistant_needs_no_endpoint():
    """The paper's preset names an endpoint assistant with no URL; a run whose negatives are the
    rollouts never asks it, so training.md's judged commands on that preset must validate."""
    cfg = load_config("qwen2.5-1.5b_gsm8k", [
        "reward.mode=hybrid_cooper", "reward.hybrid_scores=unread", "reward.model=runs/rm",
        "rm_update.negatives=rollouts", "rm_update.labels=judge", "judge.backend=endpoint",
        "judge.base_url=http://127.0.0.1:8001/v1", "judge.model=Qwen/Qwen3-4B"]).validate()
    assert cfg.assistant.backend == "endpoint" and not cfg.assistant.base_url
    assert not cfg.uses_assistant()
    with pytest.raises(ConfigError, match="needs assistant.base_url"):
        load_config("qwen2.5-1.5b_gsm8k", ["reward.model=runs/rm"]).validate()
