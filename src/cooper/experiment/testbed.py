"""The CPU testbed's models: a tiny policy that is right about half the time.

:func:`warm_start` teaches a tiny random causal LM the one-line worked-solution format of the
synthetic arithmetic problems (:mod:`cooper.data.synthetic`) by supervised fine-tuning,
stopping early so that it is right on some problems and wrong on others. Such a model gives RL
something to learn in seconds on a CPU: the tests use it, and so does the reward-hacking
experiment (``setup.policy=tiny-arith``), where the verifier's exactness makes "hacked"
unambiguous. The testbed's policy (``tiny-arith-2x1``) ships with the package
(:func:`shipped_policy`); :func:`tiny_arith_models` puts a policy and a random reward model
sharing its tokenizer into the model cache.
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
# the testbed's policy: disjoint splits, so a longer warm start; shipped with the package
TINY_ARITH_2X1 = "tiny-arith-2x1-v1"  # bump when its warm start changes
WARM_STARTS = {TINY_ARITH: ("arith_small", 300), TINY_ARITH_2X1: ("arith_2x1", 1200)}

SHIPPED = Path(__file__).with_name("models")
"""Weights that ship with the package (``SHIPPED/NAME/policy``), each with a README that gives
the command that rebuilt it and its checksums."""


def shipped_policy(name: str = TINY_ARITH_2X1) -> Path:
    """The testbed's starting policy as shipped: the same bytes on every machine.

    Why shipped and not built: the warm start (1,200 steps at lr 3e-3 from a random model) is
    deterministic on one machine but not across machines, and its outcome is not stable under
    that difference: the same code and seed gave a policy right on 48% of the held-out problems
    on some machines and on 8% on another, where no arm learned anything. 400 KB settle it.
    ``cooper models build-testbed`` reruns the recipe (:func:`build_testbed_policy`).
    """
    path = SHIPPED / name / "policy"
    if not (path / "config.json").is_file():
        raise UserError(f"the shipped testbed policy {name} is missing from {path.parent}: the "
                        "package is incomplete; reinstall cooper-rl")
    return path


def build_testbed_policy(out: str | os.PathLike, *, name: str = TINY_ARITH_2X1,
                         seed: int = 0) -> Path:
    """Rerun the shipped policy's recipe into ``out/policy``: a tiny random model (seed 0),
    then :func:`warm_start` on the recipe's dataset and steps. On the machine that built the
    shipped weights this reproduces them; elsewhere it may not (see :func:`shipped_policy`)."""
    import tempfile

    dataset, steps = WARM_STARTS[name]
    with tempfile.TemporaryDirectory(prefix="cooper-testbed-") as tmp:
        tiny = build_tiny_models(Path(tmp) / "random", hidden_size=64, layers=2, heads=4)
        return warm_start(tiny.policy, Path(out) / "policy", steps=steps, lr=3e-3,
                          dataset=dataset, seed=seed)


def tiny_arith_models(*, progress: bool = False, name: str = TINY_ARITH) -> Path:
    """A tiny policy warm-started on arithmetic and a tiny random reward model sharing its
    tokenizer: ``DIR/policy``, ``DIR/reward``.

    ``tiny-arith-v1``: 300 steps on ``arith_small`` (about half its answers right; about a
    minute on two cores), built on this machine (the tests' model). ``tiny-arith-2x1-v1``: the
    shipped policy (:func:`shipped_policy`). Built once into the model cache and reused; written
    to a temporary folder and renamed, like the embedded model.
    """
    import shutil
    import tempfile

    dataset, steps = WARM_STARTS[name]
    if name == TINY_ARITH_2X1:  # not the cache's: a build from before the policy shipped
        name = f"{name}-shipped"
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
            if name.endswith("-shipped"):
                shutil.copytree(shipped_policy(), build / "policy")
            else:
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
