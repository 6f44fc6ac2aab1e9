"""The model loader and the tiny-model factory."""

from __future__ import annotations

import json
import time

import pytest
import torch

from cooper.infra.models import (
    DEFAULT_MODEL,
    ModelNotFoundError,
    load_causal_lm,
    load_sequence_classifier,
    load_tokenizer,
    resolve,
)


def test_tiny_models_share_a_tokenizer_and_run(tiny_models):
    tok = load_tokenizer(tiny_models.policy)
    assert tok.get_vocab() == load_tokenizer(tiny_models.reward).get_vocab()
    assert tok.padding_side == "left" and tok.pad_token_id is not None
    lm = load_causal_lm(tiny_models.policy)
    rm = load_sequence_classifier(tiny_models.reward)
    batch = tok(["1+1=", "a much longer prompt"], return_tensors="pt", padding=True)
    with torch.no_grad():
        assert lm(**batch).logits.shape[:2] == batch["input_ids"].shape
        assert rm(**batch).logits.shape == (2, 1)
    out = lm.generate(**batch, max_new_tokens=4, do_sample=False)
    assert out.shape == (2, batch["input_ids"].shape[1] + 4)


def test_classifier_from_a_causal_lm_checkpoint(tiny_models):
    # the reward model is normally initialised from a policy-like causal LM
    rm = load_sequence_classifier(tiny_models.policy)
    assert rm.config.num_labels == 1 and rm.config.pad_token_id is not None


def test_missing_folder_names_the_options(tmp_path):
    with pytest.raises(ModelNotFoundError, match=DEFAULT_MODEL):
        resolve(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="no config.json"):
        resolve(tmp_path / "empty")


def test_a_trunk_name_needs_a_positive_layer_count():
    for name in ("embedded-trunk-0", "embedded-trunk-x", "embedded-trunk-"):
        with pytest.raises(ModelNotFoundError, match="positive integer"):
            resolve(name)


@pytest.mark.serial
def test_unreachable_hub_fails_fast_with_offline_options(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path))
    t0 = time.monotonic()
    with pytest.raises(ModelNotFoundError, match="Offline options") as err:
        resolve("someorg/some-model")
    assert time.monotonic() - t0 < 5
    assert "hf download" in str(err.value)


def test_remote_code_is_refused_by_default(tiny_models, tmp_path):
    # A checkpoint whose config points at its own Python module: loading it must not import it.
    folder = tmp_path / "custom"
    folder.mkdir()
    for f in tiny_models.policy.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    marker = tmp_path / "code-ran"
    (folder / "evil.py").write_text(
        f"open({str(marker)!r}, 'w').write('x')\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        "class EvilConfig(LlamaConfig):\n    model_type = 'evil'\n"
        "class EvilModel(LlamaForCausalLM):\n    config_class = EvilConfig\n")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="evil", auto_map={"AutoConfig": "evil.EvilConfig",
                                            "AutoModelForCausalLM": "evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(Exception, match="trust_remote_code"):
        load_causal_lm(folder)
    assert not marker.exists()
