"""The embedded model's cache: completeness checks, rebuild, and (slow) the real model."""

from __future__ import annotations

import json
import shutil
import time

import pytest
from safetensors.torch import save_file

from conftest import cli_env, run_cli
from cooper.infra import embedded


def _fake_cache(folder):
    import torch

    folder.mkdir(parents=True)
    save_file({"w": torch.arange(1000, dtype=torch.float32)}, folder / "model.safetensors")
    (folder / "config.json").write_text("{}")
    files = {p.name: {"size": p.stat().st_size, "sha256": embedded._sha256(p)}
             for p in folder.iterdir()}
    (folder / embedded.MANIFEST).write_text(
        json.dumps({"format": embedded.CACHE_FORMAT, "files": files}))
    return folder


def test_cache_status_detects_every_kind_of_damage(tmp_path):
    good = _fake_cache(tmp_path / "m")
    assert embedded.cache_status(good).complete
    assert embedded.cache_status(good, verify=True).complete
    assert embedded.cache_status(tmp_path / "absent").reason == "not prepared"

    weights = good / "model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    s = embedded.cache_status(good)
    assert not s.complete and "model.safetensors" in s.reason

    weights.write_bytes(data[:-4] + b"\0\0\0\1")  # same size, different content
    assert embedded.cache_status(good).complete
    assert "checksum" in embedded.cache_status(good, verify=True).reason

    weights.write_bytes(data)
    (good / embedded.MANIFEST).unlink()
    assert "no manifest" in embedded.cache_status(good).reason


def test_cli_lists_an_incomplete_cache(tmp_path):
    damaged = _fake_cache(tmp_path / "models" / "other")
    (damaged / "config.json").unlink()
    out = run_cli("models", "list", env=cli_env(COOPER_CACHE=str(tmp_path))).stdout
    assert "INCOMPLETE: missing config.json" in out


@pytest.mark.slow
@pytest.mark.serial
def test_prepare_is_a_fast_noop_and_rebuilds_a_truncated_cache(tmp_path):
    # the developer's/CI's real cache, prepared once (tens of seconds the first time)
    run_cli("models", "prepare", timeout=900)
    t0 = time.monotonic()
    out = run_cli("models", "prepare").stdout
    assert time.monotonic() - t0 < 2.0, "a complete cache must make prepare a no-op"
    assert "already prepared" in out

    # a copy with a truncated weights file, in a cache of its own, is rebuilt
    env = cli_env(COOPER_CACHE=str(tmp_path))
    copy = tmp_path / "models" / embedded.EMBEDDED_NAME
    shutil.copytree(embedded.model_dir(), copy)
    weights = copy / "model.safetensors"
    with weights.open("r+b") as f:
        f.truncate(weights.stat().st_size // 3)
    assert "INCOMPLETE" in run_cli("models", "list", env=env).stdout
    out = run_cli("models", "prepare", env=env, timeout=900)
    assert "prepared at" in out.stdout and "rebuilding" in out.stderr
    assert embedded.cache_status(copy, verify=True).complete
    assert "complete" in run_cli("models", "list", env=env).stdout


@pytest.mark.slow
def test_embedded_model_loads_and_generates():
    import torch

    from cooper.data.prompts import render_prompt
    from cooper.infra.models import DEFAULT_MODEL, load_causal_lm, load_tokenizer

    tok = load_tokenizer(DEFAULT_MODEL)
    model = load_causal_lm(DEFAULT_MODEL)
    assert model.num_parameters() == 134_515_008
    batch = tok([render_prompt(tok, "What is 2+3?")], return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=64, do_sample=False)
    text = tok.decode(out[0, batch["input_ids"].shape[1]:], skip_special_tokens=True)
    assert "5" in text  # greedy SmolLM2 answers this one


def _draws():
    import random

    import numpy as np
    import torch

    return torch.rand(3).tolist(), random.random(), np.random.rand()


def _seed(seed=0):
    import random

    import numpy as np
    import torch

    torch.manual_seed(seed)
    random.seed(seed)
    np.random.seed(seed)


def test_building_a_cache_entry_leaves_a_seeded_runs_random_draws_alone(tmp_path, monkeypatch,
                                                                         tiny_models):
    """A seeded command draws the same numbers whether it found the cache empty or full: the
    first `cooper rm train --seed 0` on an empty cache drew another score head (the build's
    fresh model had drawn from torch's generator) and trained another model than every later
    run of the same command."""
    from cooper.experiment.testbed import tiny_arith_models
    from cooper.infra.models import embedded_trunk

    _seed()
    expected = _draws()
    monkeypatch.setenv("COOPER_CACHE", str(tmp_path / "cache"))
    for build in (tiny_arith_models,  # a tiny random reward model, built into the cache
                  lambda: embedded_trunk(1, source=tiny_models.policy, cache=tmp_path / "cut")):
        _seed()
        folder = build()  # empty cache: built now
        assert _draws() == expected, folder
        _seed()
        build()  # full cache: read
        assert _draws() == expected, folder
    _seed()
    with embedded.keeping_random_state():  # what the embedded model's conversion runs inside
        _draws()
    assert _draws() == expected
