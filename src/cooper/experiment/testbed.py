"""The CPU testbed's models: a tiny policy that is right about half the time, built here.

:func:`warm_start` teaches a tiny random causal LM the one-line worked-solution format of the
synthetic arithmetic problems (:mod:`cooper.data.synthetic`) by supervised fine-tuning,
stopping early so that it is right on some problems and wrong on others. Such a model gives RL
something to learn in seconds on a CPU: the tests use it, and so does the reward-hacking
experiment (``setup.policy=tiny-arith``), where the verifier's exactness makes "hacked"
unambiguous. :func:`tiny_arith_models` builds it once into the model cache.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

from cooper.data.prompts import prompt_messages
from cooper.data.synthetic import arithmetic_problems
from cooper.errors import UserError
from cooper.infra.embedded import _lock, cache_root
from cooper.infra.generation import render_messages
from cooper.infra.models import build_tiny_models, load_causal_lm, load_tokenizer, mark_as_ours


def warm_start(model_dir: str | os.PathLike, out_dir: str | os.PathLike, *, steps: int = 300,
               lr: float = 3e-3, batch_size: int = 32, seed: int = 0,
               dataset: str = "arith") -> Path:
    """Supervised fine-tuning on worked solutions (loss on the answer tokens only); saves to
    ``out_dir`` with the tokenizer. Few steps leave a model that is sometimes right."""
    import torch

    tok = load_tokenizer(model_dir, padding_side="right")
    model = load_causal_lm(model_dir, dtype="float32").train()
    problems = arithmetic_problems("train", dataset)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    for _ in range(steps):
        batch = rng.sample(problems, batch_size)
        prompts = [render_messages(tok, prompt_messages(p.question)) for p in batch]
        full = [pr + p.solution + tok.eos_token for pr, p in zip(prompts, batch, strict=True)]
        enc = tok(full, return_tensors="pt", padding=True, add_special_tokens=False)
        labels = enc["input_ids"].clone()  # [B, L]
        labels[enc["attention_mask"] == 0] = -100
        for row, pr in enumerate(prompts):  # learn the answer, not the prompt
            labels[row, : len(tok(pr, add_special_tokens=False)["input_ids"])] = -100
        loss = model(**enc, labels=labels).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    out = Path(out_dir)
    model.save_pretrained(out)
    tok.padding_side = "left"
    tok.save_pretrained(out)
    return out


TINY_ARITH = "tiny-arith-v1"  # bump when the recipe below changes
# the testbed of the second-round experiment: disjoint splits, so a longer warm start
TINY_ARITH_2X1 = "tiny-arith-2x1-v1"  # bump when its warm start changes
WARM_STARTS = {TINY_ARITH: ("arith_small", 300), TINY_ARITH_2X1: ("arith_2x1", 1200)}


def tiny_arith_models(*, progress: bool = False, name: str = TINY_ARITH) -> Path:
    """A tiny policy warm-started on arithmetic and a tiny random reward model sharing its
    tokenizer: ``DIR/policy``, ``DIR/reward``.

    ``tiny-arith-v1``: 300 steps on ``arith_small`` (about half its answers right; about a
    minute on two cores). ``tiny-arith-2x1-v1``: 1,200 steps on ``arith_2x1``'s train split
    (about half right on its unseen test problems; about 2 minutes). Built once into the model
    cache and reused; written to a temporary folder and renamed, like the embedded model.
    """
    import tempfile

    dataset, steps = WARM_STARTS[name]
    target = cache_root() / "models" / name
    if (target / "policy" / "config.json").is_file() and (target / "reward" / "config.json").is_file():
        mark_as_ours(target / "reward")  # a build from before the mark (read as ours, as then)
        return target
    with _lock(target.parent / f".{name}.lock"):
        if (target / "policy" / "config.json").is_file():
            mark_as_ours(target / "reward")
            return target
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            tiny = build_tiny_models(Path(tmp) / "random", hidden_size=64, layers=2, heads=4)
            build = Path(tmp) / "build"
            warm_start(tiny.policy, build / "policy", steps=steps, lr=3e-3, dataset=dataset)
            tiny.reward.rename(build / "reward")
            build.rename(target)
    return target


def embedded_trunk(layers: int, *, source: str | os.PathLike | None = None,
                   cache: Path | None = None) -> Path:
    """The embedded model cut to its first ``layers`` decoder layers (its embeddings, tokenizer
    and final norm kept; the LM head is dropped when a score head is put on it).

    A reward model built on it starts from pretrained token and number representations, so it
    learns to compare an answer with the reference from a few thousand triples, which a tiny
    model trained from scratch does not (docs/experiment.md); and it scores a step's samples in
    about a second on one CPU thread. Built once into the model cache (``source`` and ``cache``,
    for tests: another causal LM folder, and where to keep its cut).
    """
    import tempfile

    from cooper.infra.embedded import EMBEDDED_NAME, prepare

    name = Path(source).name if source else EMBEDDED_NAME
    target = (cache or cache_root() / "models") / f"{name}-first{layers}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    src = Path(source) if source else prepare(progress=False)
    with _lock(target.parent / f".{target.name}.lock"):
        if (target / "config.json").is_file():
            return target
        model = load_causal_lm(src, dtype="float32")
        total = len(model.model.layers)
        if layers > total:
            raise UserError(f"{name} has {total} layers; ask for at most {total}")
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
        if getattr(model.config, "layer_types", None):  # newer configs list a type per layer
            model.config.layer_types = model.config.layer_types[:layers]
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            build = Path(tmp) / "trunk"
            model.save_pretrained(build)
            load_tokenizer(src).save_pretrained(build)
            build.rename(target)
    return target
