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
from cooper.infra.embedded import _lock, cache_root
from cooper.infra.generation import render_messages
from cooper.infra.models import build_tiny_models, load_causal_lm, load_tokenizer


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


def tiny_arith_models(*, progress: bool = False) -> Path:
    """A tiny policy warm-started on ``arith_small`` (about half its answers right) and a tiny
    random reward model sharing its tokenizer: ``DIR/policy``, ``DIR/reward``.

    Built once into the model cache (about a minute on two cores) and reused; written to a
    temporary folder and renamed, like the embedded model.
    """
    import tempfile

    target = cache_root() / "models" / TINY_ARITH
    if (target / "policy" / "config.json").is_file() and (target / "reward" / "config.json").is_file():
        return target
    with _lock(target.parent / f".{TINY_ARITH}.lock"):
        if (target / "policy" / "config.json").is_file():
            return target
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            tiny = build_tiny_models(Path(tmp) / "random", hidden_size=64, layers=2, heads=4)
            build = Path(tmp) / "build"
            warm_start(tiny.policy, build / "policy", steps=300, lr=3e-3, dataset="arith_small")
            tiny.reward.rename(build / "reward")
            build.rename(target)
    return target
