"""Float32 linear layers through oneDNN (cooper.infra.cpu_linear): the same values and gradients
as nn.Linear, chosen by COOPER_FLOAT32_MATMUL, and models loaded by the project get them."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from cooper.errors import UserError
from cooper.infra import cpu_linear
from cooper.infra.cpu_linear import OneDNNLinear

needs_onednn = pytest.mark.skipif(not cpu_linear._operator_available(),
                                  reason="this PyTorch build has no oneDNN linear operator")


def _pair(bias: bool, monkeypatch) -> tuple[nn.Linear, nn.Linear]:
    monkeypatch.setenv(cpu_linear.ENV, "onednn")
    torch.manual_seed(0)
    plain = nn.Linear(96, 160, bias=bias)
    fast = copy.deepcopy(plain)
    assert cpu_linear.apply(fast) == 1
    assert type(fast) is OneDNNLinear and isinstance(fast, nn.Linear)
    return plain, fast


def _spy(monkeypatch) -> list[tuple[int, ...]]:
    """Record the shapes each oneDNN call sees (to prove which path ran)."""
    calls: list[tuple[int, ...]] = []
    real = cpu_linear._onednn

    def spy(x, weight, bias):
        calls.append(tuple(x.shape))
        return real(x, weight, bias)

    monkeypatch.setattr(cpu_linear, "_onednn", spy)
    return calls


@needs_onednn
@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_match_nn_linear(bias, monkeypatch):
    plain, fast = _pair(bias, monkeypatch)
    calls = _spy(monkeypatch)
    x = torch.randn(3, 50, 96)
    grad = torch.randn(3, 50, 160)
    outs = []
    for layer in (plain, fast):
        xi = x.clone().requires_grad_(True)
        y = layer(xi)
        y.backward(grad)
        outs.append((y, xi.grad, layer.weight.grad, layer.bias.grad if bias else None))
    # forward, input gradient, weight gradient: three products through oneDNN
    assert len(calls) == 3, calls
    for a, b in zip(outs[0], outs[1], strict=True):
        if a is None:
            assert b is None
            continue
        assert a.shape == b.shape
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_frozen_weight_gets_no_gradient_and_inference_skips_autograd(monkeypatch):
    plain, fast = _pair(True, monkeypatch)
    fast.requires_grad_(False)
    calls = _spy(monkeypatch)
    x = torch.randn(200, 96, requires_grad=True)
    fast(x).sum().backward()
    assert fast.weight.grad is None and fast.bias.grad is None
    torch.testing.assert_close(x.grad, plain.weight.sum(0).expand(200, 96), rtol=1e-5, atol=1e-5)
    assert len(calls) == 2  # forward and the input's gradient, not the weight's
    with torch.no_grad():
        y = fast(x)
    assert not y.requires_grad and len(calls) == 3
    torch.testing.assert_close(y, plain(x).detach(), rtol=1e-5, atol=1e-5)


@needs_onednn
def test_small_products_autocast_and_other_dtypes_take_f_linear(monkeypatch):
    _, fast = _pair(True, monkeypatch)
    calls = _spy(monkeypatch)
    fast(torch.randn(4, 96))  # 4 x 96 x 160 multiply-adds: under the threshold
    assert calls == []
    big = torch.randn(100, 96)
    assert 100 * 96 * 160 >= cpu_linear.MIN_MULTIPLY_ADDS
    fast(big)
    assert calls == [(100, 96)]
    # mixed precision (the reward model's float32 trained layers): bfloat16 products, as before
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = fast(big)
    assert y.dtype == torch.bfloat16 and len(calls) == 1
    half = fast.to(torch.bfloat16)
    y = half(big.to(torch.bfloat16))
    assert y.dtype == torch.bfloat16 and len(calls) == 1


def test_choice_is_read_and_checked(monkeypatch):
    monkeypatch.setenv(cpu_linear.ENV, "blas")
    layer = nn.Linear(8, 8)
    assert cpu_linear.apply(layer) == 0 and type(layer) is nn.Linear
    monkeypatch.setenv(cpu_linear.ENV, "fast")
    with pytest.raises(UserError, match="COOPER_FLOAT32_MATMUL must be one of auto, onednn, blas"):
        cpu_linear.apply(layer)
    monkeypatch.delenv(cpu_linear.ENV)
    assert cpu_linear.choice() == "auto"


def test_auto_takes_onednn_only_off_intel(monkeypatch):
    monkeypatch.delenv(cpu_linear.ENV, raising=False)
    monkeypatch.setattr(cpu_linear.platform, "machine", lambda: "x86_64")
    monkeypatch.setattr(cpu_linear, "_operator_available", lambda: True)
    for vendor, expected in [("GenuineIntel", False), ("AuthenticAMD", True), ("", False)]:
        cpu_linear._auto.cache_clear()
        monkeypatch.setattr(cpu_linear, "_cpu_vendor", lambda v=vendor: v)
        assert cpu_linear.wanted() is expected, vendor
    cpu_linear._auto.cache_clear()
    monkeypatch.setattr(cpu_linear.platform, "machine", lambda: "aarch64")
    assert cpu_linear.wanted() is False
    cpu_linear._auto.cache_clear()


def test_bfloat16_models_are_left_alone(monkeypatch):
    monkeypatch.setenv(cpu_linear.ENV, "onednn")
    monkeypatch.setattr(cpu_linear, "_operator_available", lambda: True)
    model = nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)).to(torch.bfloat16)
    assert cpu_linear.apply(model) == 0
    assert all(type(m) is not OneDNNLinear for m in model)


@needs_onednn
def test_loaded_models_match_the_blas_path(tiny_models, monkeypatch):
    """A tiny policy and reward model through the project's loaders: every linear layer swapped,
    the state dict unchanged, logits and a training gradient the same as MKL's to 1e-5."""
    from cooper.infra.models import load_causal_lm, load_sequence_classifier

    monkeypatch.setattr(cpu_linear, "MIN_MULTIPLY_ADDS", 0)  # tiny layers: take oneDNN too
    calls = _spy(monkeypatch)
    ids = torch.randint(0, 100, (2, 24))
    for load, path in [(load_causal_lm, tiny_models.policy),
                       (load_sequence_classifier, tiny_models.reward)]:
        results = {}
        for mode in ("blas", "onednn"):
            monkeypatch.setenv(cpu_linear.ENV, mode)
            model = load(path, dtype="float32")
            swapped = sum(type(m) is OneDNNLinear for m in model.modules())
            plain = sum(type(m) is nn.Linear for m in model.modules())
            if mode == "blas":
                assert swapped == 0 and plain > 0
            else:
                assert plain == 0 and swapped > 0
            before = len(calls)
            logits = model(input_ids=ids).logits
            logits.float().pow(2).mean().backward()
            assert (len(calls) > before) == (mode == "onednn")
            grads = {n: p.grad for n, p in model.named_parameters() if p.grad is not None}
            results[mode] = (list(model.state_dict()), logits.detach(), grads)
        keys_b, logits_b, grads_b = results["blas"]
        keys_o, logits_o, grads_o = results["onednn"]
        assert keys_o == keys_b
        torch.testing.assert_close(logits_o, logits_b, rtol=1e-5, atol=1e-5)
        assert grads_o.keys() == grads_b.keys()
        for name in grads_b:
            torch.testing.assert_close(grads_o[name], grads_b[name], rtol=1e-4, atol=1e-5,
                                       msg=name)


@needs_onednn
@pytest.mark.parametrize("case", ["input_without_grad", "frozen_weight_trained_bias",
                                  "non_contiguous_input", "huge_weight_gradient"])
def test_every_trainable_combination_gets_nn_linear_gradients(case, monkeypatch):
    """The reward model's cached trunk feeds trained layers an input that needs no gradient; a
    bias-only fine-tune freezes the weight; a transposed view comes in; an LM head's weight
    gradient over many tokens goes to MKL rather than copy its [out, N] operand."""
    plain, fast = _pair(True, monkeypatch)
    if case == "frozen_weight_trained_bias":
        plain.weight.requires_grad_(False)
        fast.weight.requires_grad_(False)
    if case == "huge_weight_gradient":
        monkeypatch.setattr(cpu_linear, "COPY_LIMIT", 0)
    calls = _spy(monkeypatch)
    x = torch.randn(96, 2, 40).permute(1, 2, 0) if case == "non_contiguous_input" else (
        torch.randn(2, 40, 96))
    grads = torch.randn(2, 40, 160)
    results = []
    for layer in (plain, fast):
        xi = x.detach().clone() if case != "non_contiguous_input" else x.detach()
        xi.requires_grad_(case == "non_contiguous_input")
        y = layer(xi)
        y.backward(grads)
        results.append([y, layer.bias.grad, layer.weight.grad,
                        xi.grad if xi.requires_grad else None])
    expected_calls = {"input_without_grad": 2, "frozen_weight_trained_bias": 1,
                      "non_contiguous_input": 3, "huge_weight_gradient": 1}[case]
    assert len(calls) == expected_calls, calls
    for a, b in zip(*results, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-5)


@needs_onednn
def test_second_derivatives_raise_instead_of_being_wrong(monkeypatch):
    _, fast = _pair(True, monkeypatch)
    x = torch.randn(100, 96, requires_grad=True)
    (g,) = torch.autograd.grad(fast(x).pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable|double backward"):
        g.sum().backward()


@needs_onednn
@pytest.mark.parametrize("reentrant", [True, False])
def test_gradient_checkpointing_matches_the_blas_path(reentrant, tiny_models, monkeypatch):
    from cooper.infra.models import load_causal_lm

    monkeypatch.setattr(cpu_linear, "MIN_MULTIPLY_ADDS", 0)
    ids = torch.randint(0, 100, (2, 24))
    grads = {}
    for mode in ("blas", "onednn"):
        monkeypatch.setenv(cpu_linear.ENV, mode)
        model = load_causal_lm(tiny_models.policy, dtype="float32").train()
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": reentrant})
        model.enable_input_require_grads()
        model(input_ids=ids).logits.pow(2).mean().backward()
        grads[mode] = {n: p.grad for n, p in model.named_parameters()}
    assert all(g is not None for g in grads["onednn"].values())
    for name, g in grads["blas"].items():
        torch.testing.assert_close(grads["onednn"][name], g, rtol=1e-4, atol=1e-5, msg=name)


@needs_onednn
def test_the_trainer_swaps_the_policy_trl_loads(tmp_path, monkeypatch):
    """TRL loads the policy itself (not through the project's loaders): the trainer swaps it."""
    from cooper.config import load_config
    from cooper.experiment.testbed import tiny_arith_models
    from cooper.rl import runner

    monkeypatch.setenv(cpu_linear.ENV, "onednn")
    swapped: list[tuple[str, int]] = []
    real = cpu_linear.apply

    def spy(model):
        n = real(model)
        swapped.append((type(model).__name__, n))
        return n

    monkeypatch.setattr(cpu_linear, "apply", spy)
    arith = tiny_arith_models()
    cfg = load_config("demo_cpu", [
        "reward.mode=rule", f"policy.model={arith / 'policy'}", "data.dataset=arith_small",
        "data.limit=8", "rollout.prompts_per_step=2", "rollout.samples_per_prompt=2",
        "rollout.micro_batch_size=4", "rollout.max_completion_length=8",
        "validation.enabled=false", "max_steps=1", f"output_dir={tmp_path / 'run'}"])
    runner.run(cfg)
    policies = [n for name, n in swapped if name.endswith("ForCausalLM")]
    assert policies and all(n > 0 for n in policies), swapped
