"""What `cooper train` prints: plain step lines, no raw metrics dictionary, no load report."""

from __future__ import annotations

import re

import pytest

from conftest import run_cli

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


def train(tiny_models, tmp_path, *flags: str) -> str:
    # the reward model starts from the causal LM: a fresh score head, which transformers
    # would report as a table of MISSING / UNEXPECTED keys
    proc = run_cli(*flags, "train", "--config", "demo_cpu", "reward.mode=cooper",
                   f"policy.model={tiny_models.policy}", f"reward.model={tiny_models.policy}",
                   "data.dataset=arith_small", "data.limit=8", "rollout.prompts_per_step=2",
                   "rollout.samples_per_prompt=2", "rollout.micro_batch_size=2",
                   "rollout.max_completion_length=8", "assistant.backend=rewrite",
                   "rm_update.negatives=assistant",
                   "validation.limit=2", "validation.max_new_tokens=8", "max_steps=2",
                   "rm_update.train_layers=none", f"output_dir={tmp_path / 'run'}")
    return proc.stdout + proc.stderr


def test_default_console_is_plain(tiny_models, tmp_path):
    out = train(tiny_models, tmp_path)
    assert "LOAD REPORT" not in out and "MISSING" not in out
    assert "{'loss'" not in out and "'rewards/" not in out  # TRL's raw dictionary
    assert out.count("reward head initialised") == 1  # said once, in plain words
    assert re.search(r"step 1/2 +reward [0-9.]+ +verified [0-9.]+ +gap [-+][0-9.]+", out), out
    assert re.search(r"step 2/2 .* [0-9.]+ s", out)
    assert re.search(r"validation at step 0: held-out accuracy [0-9.]+", out)


def test_verbose_console_shows_everything(tiny_models, tmp_path):
    out = train(tiny_models, tmp_path, "-v")
    assert "LOAD REPORT" in out and "{'loss'" in out
    assert re.search(r"step 1/2 +reward", out)
