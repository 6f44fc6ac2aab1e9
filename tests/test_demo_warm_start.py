"""The demo's warm start of its policy: the testbed's warm start with only the top layers
trained, and the stage's choice of policy."""

from __future__ import annotations

from pathlib import Path


def test_a_warm_start_of_the_top_layers_leaves_the_rest_as_it_was(tiny_models, tmp_path):
    from cooper.experiment.testbed import warm_start
    from cooper.infra.models import load_causal_lm

    before = load_causal_lm(tiny_models.policy, dtype="float32").state_dict()
    out = warm_start(tiny_models.policy, tmp_path / "ws", steps=3, batch_size=4, lr=1e-2,
                     dataset="arith_small", train_layers=1)
    after = load_causal_lm(out, dtype="float32").state_dict()
    moved = {k for k, v in before.items() if not after[k].equal(v)}
    assert moved and all(k.startswith(("model.layers.1.", "model.norm.", "lm_head.")) for k in moved), moved
    assert any(k.startswith("model.layers.1.") for k in moved)
    assert not any(k.startswith(("model.layers.0.", "model.embed_tokens.")) for k in moved)


def test_the_demo_starts_cooper_from_the_embedded_model_without_a_warm_start(tmp_path):
    import pytest

    from cooper.config.demo import DemoSettings
    from cooper.errors import UserError
    from cooper.experiment.demo import _warm_start

    model = Path("embedded-model-folder")  # never read: no warm start runs
    assert _warm_start(model, tmp_path / "ws", DemoSettings(warm_steps=0))[0] == model
    # a task without generated worked solutions: the model as it ships, said so
    path, said = _warm_start(model, tmp_path / "ws", DemoSettings(dataset="gsm8k"))
    assert path == model and "no worked solutions for gsm8k" in said
    assert not (tmp_path / "ws").exists()
    with pytest.raises(UserError, match="warm_steps must be >= 0"):
        DemoSettings(warm_steps=-1)
