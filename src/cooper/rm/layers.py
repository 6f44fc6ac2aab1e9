"""Which weights of a transformers model train: only its top ``k`` decoder layers and what sits
above them (:func:`train_top_layers`), for a reward model (:meth:`RewardModel.train_top_layers
<cooper.rm.model.RewardModel.train_top_layers>`) or a causal LM (the demo's warm start of a
policy, :func:`cooper.experiment.testbed.warm_start`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cooper.errors import UserError

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


def _decoder_layers(model: PreTrainedModel) -> torch.nn.ModuleList:
    import torch

    n = model.config.get_text_config().num_hidden_layers
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise UserError(f"cannot find the {n} decoder layers of {type(model).__name__}; "
                    "train all layers instead (leave train_layers unset)")


def train_top_layers(model: PreTrainedModel, k: int | None) -> int:
    """Leave only the top ``k`` decoder layers of ``model`` trainable, and what sits above them
    (final norm, score or LM head), the embeddings frozen; None: every weight trainable.
    Returns the number of trainable parameters (:meth:`RewardModel.train_top_layers`; the
    demo's warm start of a policy too). A head tied to the embeddings stays frozen with them."""
    import torch

    if k is None:
        for p in model.parameters():
            p.requires_grad_(True)
    else:
        layers = _decoder_layers(model)
        if not 1 <= k <= len(layers):
            raise UserError(f"train_layers must be between 1 and {len(layers)}, got {k}")
        frozen = {id(p) for layer in layers[:len(layers) - k] for p in layer.parameters()}
        for m in model.modules():
            if isinstance(m, torch.nn.Embedding):  # token (and learned position) tables
                frozen |= {id(p) for p in m.parameters()}
        for p in model.parameters():
            p.requires_grad_(id(p) not in frozen)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
