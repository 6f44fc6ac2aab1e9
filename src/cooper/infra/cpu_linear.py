"""Float32 linear layers through oneDNN on CPUs where PyTorch's BLAS takes a slow path.

PyTorch's x86 CPU wheels run a float32 matrix product through Intel MKL. On a CPU that is not
Intel's, MKL picks a generic code path: on a 2-core AMD EPYC (Zen 5), a linear layer of the
embedded model's shape (2048 tokens, 576 -> 1536) ran at 171-200 GFLOPS through MKL and at
330-475 GFLOPS through oneDNN, forward and both backward products alike. oneDNN is the other
kernel library PyTorch ships; it picks its code by the CPU's instruction sets, not its vendor,
and already serves PyTorch's bfloat16 matmuls. PyTorch has no switch that sends full-precision
float32 matmuls to oneDNN on x86 (its oneDNN matmul path is for bfloat16, float16 and
reduced-precision float32), so this module does it for the layers that hold nearly all of a
transformer's FLOPs: each ``nn.Linear`` of a model we load becomes a :class:`OneDNNLinear`,
which calls the oneDNN linear operator that PyTorch's own compiler uses on CPU
(``torch.ops.mkldnn._linear_pointwise``), with its backward written out below.

The arithmetic stays float32 (oneDNN's default, strict float32 mode): results differ from MKL's
only by the order of the additions (the embedded model's reward-model logits by about 1e-6;
tests/test_cpu_linear.py holds a tiny model's logits to 1e-5 and its gradients to 1e-4).

``COOPER_FLOAT32_MATMUL`` chooses: ``auto`` (the default: oneDNN on an x86 CPU whose vendor is
known and not Intel; on Intel's, MKL takes its own fast path, and an unknown vendor keeps MKL),
``onednn`` (always, where PyTorch has the operator) or ``blas`` (never).
Anything other than a float32 CPU tensor (a model moved to a GPU, bfloat16 weights), a product
under CPU autocast (mixed precision: bfloat16 products) or a small one takes
``torch.nn.functional.linear`` as before, per call.
"""

from __future__ import annotations

import functools
import logging
import os
import platform

import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd.function import once_differentiable

from cooper.errors import UserError
from cooper.infra.allocator import bound_onednn_caches
from cooper.infra.cpuinfo import cpuinfo

log = logging.getLogger(__name__)

ENV = "COOPER_FLOAT32_MATMUL"
CHOICES = ("auto", "onednn", "blas")


def _cpu_vendor() -> str:
    """The x86 vendor string ("GenuineIntel", "AuthenticAMD", ...), or "" where unknown."""
    return cpuinfo("vendor_id")


def _operator_available() -> bool:
    return (torch.backends.mkldnn.is_available()
            and hasattr(torch.ops.mkldnn, "_linear_pointwise"))


def choice() -> str:
    """The user's setting of :data:`ENV`, checked."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in CHOICES:
        raise UserError(f"{ENV} must be one of {', '.join(CHOICES)}, got {value!r}")
    return value


@functools.cache
def _auto() -> bool:
    x86 = platform.machine().lower() in ("x86_64", "amd64")
    return x86 and _cpu_vendor() not in ("GenuineIntel", "") and _operator_available()


def wanted() -> bool:
    """Whether float32 linear layers should run through oneDNN in this process."""
    value = choice()
    if value == "blas":
        return False
    if value == "onednn":
        if not _operator_available():
            raise UserError(f"{ENV}=onednn: this PyTorch build has no oneDNN linear operator; "
                            f"unset {ENV} or set it to blas")
        return True
    return _auto()


def _onednn(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    # x: [..., in], weight: [out, in], bias: [out] -> [..., out]
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [], "")


COPY_LIMIT = 1 << 26
"""oneDNN copies the weight gradient's first operand, [out, N], to contiguous memory: above this
many elements (256 MB in float32; an LM head's vocabulary times the tokens) MKL computes that
product in place instead"""


class _LinearFunction(torch.autograd.Function):
    """y = x W^T + b, each of its three products through oneDNN."""

    @staticmethod
    def forward(ctx, x, weight, bias):
        x = x.contiguous()
        # x is needed only for the weight's gradient (a frozen base layer keeps nothing)
        ctx.save_for_backward(x if ctx.needs_input_grad[1] else None, weight)
        ctx.has_bias = bias is not None
        return _onednn(x, weight, bias)

    @staticmethod
    @once_differentiable  # the oneDNN operator has no derivative: second order raises
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad_x = grad_w = grad_b = None
        g2 = grad.reshape(-1, grad.shape[-1]).contiguous()  # [N, out]
        if ctx.needs_input_grad[0]:
            # [N, out] @ [out, in] -> [N, in], shaped as the input
            grad_x = _onednn(g2, weight.t(), None).reshape(*grad.shape[:-1], weight.shape[1])
        if ctx.needs_input_grad[1]:
            x2 = x.reshape(-1, x.shape[-1])  # [N, in]
            if g2.numel() > COPY_LIMIT:
                grad_w = g2.t().mm(x2)
            else:
                grad_w = _onednn(g2.t(), x2.t(), None)  # [out, N] @ [N, in] -> [out, in]
        if ctx.has_bias and ctx.needs_input_grad[2]:
            grad_b = g2.sum(0)
        return grad_x, grad_w, grad_b


MIN_MULTIPLY_ADDS = 1 << 20
"""below this size (rows x in x out) a product is faster through MKL: oneDNN's fixed cost per
call (a few microseconds) is then more than it saves (about even at 64 x 64 x 256)"""


def _eligible(x: torch.Tensor, weight: torch.Tensor) -> bool:
    # under autocast F.linear computes in the low precision: the mixed-precision reward model's
    # float32 trained layers must stay bfloat16 products, as they are without this module
    return (x.device.type == "cpu" and weight.device.type == "cpu"
            and x.dtype == torch.float32 and weight.dtype == torch.float32
            and not torch.is_autocast_enabled("cpu")
            and x.dim() >= 2 and x.numel() * weight.shape[0] >= MIN_MULTIPLY_ADDS)


class OneDNNLinear(nn.Linear):
    """An ``nn.Linear`` whose float32 CPU products run through oneDNN (module docstring).
    Same parameters, same state dict; any other input takes ``F.linear``."""

    def forward(self, input: torch.Tensor) -> torch.Tensor:  # noqa: A002 (nn.Linear's name)
        x = input
        if not _eligible(x, self.weight):
            return F.linear(x, self.weight, self.bias)
        if torch.is_grad_enabled() and (x.requires_grad or self.weight.requires_grad or (
                self.bias is not None and self.bias.requires_grad)):
            return _LinearFunction.apply(x, self.weight, self.bias)
        return _onednn(x.contiguous(), self.weight, self.bias)


def apply(model: nn.Module) -> int:
    """Make every plain ``nn.Linear`` of ``model`` a :class:`OneDNNLinear` in place, when
    :func:`wanted` and the model holds float32 weights on the CPU; returns how many were
    changed.

    The class is swapped, not the module: its parameters (and an optimiser holding them), its
    hooks and wrappers that hold the module (PEFT) are untouched, and ``isinstance(m,
    nn.Linear)`` still holds."""
    if not wanted() or not any(p.dtype == torch.float32 and p.device.type == "cpu"
                               for p in model.parameters()):
        return 0
    bound_onednn_caches()  # for a library user; the `cooper` command did it at start
    changed = 0
    for module in model.modules():
        if type(module) is nn.Linear:
            module.__class__ = OneDNNLinear
            changed += 1
    if changed:
        log.debug("%d float32 linear layers run through oneDNN (%s)", changed, ENV)
    return changed
