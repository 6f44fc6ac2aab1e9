"""The CPU testbed's models: a tiny policy that is right about half the time.

:func:`warm_start` teaches a tiny random causal LM the one-line worked-solution format of the
synthetic arithmetic problems (:mod:`cooper.data.synthetic`) by supervised fine-tuning,
stopping early so that it is right on some problems and wrong on others. Such a model gives RL
something to learn in seconds on a CPU: the tests use it, and so does the reward-hacking
experiment (``setup.policy=tiny-arith``), where the verifier's exactness makes "hacked"
unambiguous. The testbed's policy (``tiny-arith-2x1``) ships with the package
(:func:`shipped_policy`), and so do the blind-rule testbed's: ``tiny-arith-2x1-words``
(warm-started on ``arith_2x1_words`` and stopped by the gold judge's score; its first round)
and ``tiny-arith-2x1-compare`` (that one warm-started further on ``arith_2x1_compare`` until the
comparisons the rule never pays are right about 60% of the time; its second round).
:func:`tiny_arith_models` puts a policy and a random reward model
sharing its tokenizer into the model cache. :func:`build_tiny_models` writes the tiny random
causal LM and sequence classifier (a character-level tokenizer, from a config, no download) of
the unit and smoke tests and of these builds; the classifier's folder carries a minimal
``cooper_rm.json``, so it is read in our input format, not as a released VerifyRM.
"""

from __future__ import annotations

import os
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cooper.data.prompts import prompt_messages
from cooper.data.synthetic import arithmetic_problems
from cooper.errors import UserError
from cooper.infra.embedded import _lock, cache_root, keeping_random_state
from cooper.infra.generation import render_messages
from cooper.infra.models import load_causal_lm, load_tokenizer
from cooper.rm.layers import train_top_layers
from cooper.rm.template import mark_as_ours

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

# ------------------------------------------------------------------ tiny random models

TINY_SPECIALS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}")


def tiny_tokenizer() -> PreTrainedTokenizerBase:
    """A character-level tokenizer over printable ASCII with ChatML specials (102 tokens)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\x0b\x0c"]
    vocab = {t: i for i, t in enumerate(TINY_SPECIALS + chars)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>",
        bos_token="<|im_start|>", eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    tok.chat_template = CHATML_TEMPLATE
    tok.padding_side = "left"
    return tok


@dataclass(frozen=True)
class TinyModels:
    """Folders of a tiny causal LM and a tiny one-logit classifier sharing a tokenizer."""

    policy: Path
    reward: Path


def build_tiny_models(out_dir: str | os.PathLike, *, hidden_size: int = 32, layers: int = 2,
                      heads: int = 2, seed: int = 0) -> TinyModels:
    """Write two tiny random Llama models (``out/policy``, ``out/reward``); no download."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

    out = Path(out_dir)
    tok = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=2048, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    policy = LlamaForCausalLM(config)
    policy.generation_config.pad_token_id = tok.pad_token_id
    config_rm = LlamaConfig.from_dict(config.to_dict())
    config_rm.num_labels = 1
    reward = LlamaForSequenceClassification(config_rm)
    paths = TinyModels(out / "policy", out / "reward")
    for model, path in ((policy, paths.policy), (reward, paths.reward)):
        model.save_pretrained(path)
        tok.save_pretrained(path)
    mark_as_ours(paths.reward)
    return paths


# ------------------------------------------------------------------ the warm start

def warm_start(model_dir: str | os.PathLike, out_dir: str | os.PathLike, *, steps: int = 300,
               lr: float = 3e-3, batch_size: int = 32, seed: int = 0,
               dataset: str = "arith", train_layers: int | None = None,
               stop: Callable[[int, Any, Any], bool] | None = None,
               check_every: int = 50, comparison_share: float | None = None) -> Path:
    """Supervised fine-tuning on worked solutions (loss on the answer tokens only); saves to
    ``out_dir`` with the tokenizer. Few steps leave a model that is sometimes right.
    ``train_layers``: only the top K decoder layers are trained (None: every weight).

    ``stop(step, model, tokenizer)``, asked every ``check_every`` steps, ends the warm start
    early when it returns True (the model as it is then is saved). ``comparison_share``: that
    share of every batch is drawn from the dataset's comparisons (``arith_2x1_compare``), the
    rest from its other problems (None: the batch is drawn from all of them alike)."""
    import torch

    tok = load_tokenizer(model_dir, padding_side="right")
    model = load_causal_lm(model_dir, dtype="float32").train()
    problems = arithmetic_problems("train", dataset)
    pools: list[tuple[list, int]] = [(problems, batch_size)]
    if comparison_share is not None:
        k = round(comparison_share * batch_size)
        compared = [p for p in problems if is_comparison(p)]
        pools = [(compared, k), ([p for p in problems if not is_comparison(p)], batch_size - k)]
    rng = random.Random(seed)
    torch.manual_seed(seed)
    train_top_layers(model, train_layers)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=lr,
                            weight_decay=0.0)
    for step in range(1, steps + 1):
        batch = [p for pool, k in pools for p in rng.sample(pool, k)]
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
        if stop is not None and step % check_every == 0:
            model.eval()
            tok.padding_side = "left"  # for generation
            done = stop(step, model, tok)
            tok.padding_side = "right"
            model.train()
            if done:
                break
    out = Path(out_dir)
    model.save_pretrained(out)
    tok.padding_side = "left"
    tok.save_pretrained(out)
    return out


TINY_ARITH = "tiny-arith-v1"  # the tests' policy; shipped with the package
# the testbed's policy: disjoint splits, so a longer warm start; shipped with the package
TINY_ARITH_2X1 = "tiny-arith-2x1-v2"  # bump when its warm start changes (v2: stops in a band)
# the blind-rule testbed's policy: warm-started on arith_2x1_words, so it boxes some right
# answers in words, which the rule rejects and the gold judge reads; shipped with the package
TINY_ARITH_WORDS = "tiny-arith-2x1-words-v1"
# the testbed with a gap: the words policy warm-started further on arith_2x1_compare, whose
# comparisons (yes/no against a stored True/False) the rule never pays; shipped with the package
TINY_ARITH_COMPARE = "tiny-arith-2x1-compare-v1"

TESTBED_BAND = (0.40, 0.55)
"""the held-out accuracy at which the testbed policy's warm start stops: the policy of the
earlier rounds was right on 48% (arith_2x1's validation split), which leaves RL room to learn
and a reward model a policy worth exploiting"""


@dataclass(frozen=True)
class Recipe:
    """How a shipped policy was warm-started (:func:`build_testbed_policy` reruns it)."""

    dataset: str
    max_steps: int
    start: str | None = None
    """a shipped policy it continues from; None: a tiny random model (seed 0)"""
    lr: float = 3e-3
    check_every: int = 50
    comparison_share: float | None = None
    """share of each batch drawn from the comparisons (:func:`warm_start`)"""
    bands: tuple[tuple[str, float, float], ...] = (("accuracy", *TESTBED_BAND),)
    """(figure of the check, low, high): the warm start stops at the first check that has every
    figure inside its band"""

    def in_band(self, figures: dict[str, float]) -> bool:
        return all(lo <= figures[key] <= hi for key, lo, hi in self.bands)


WARM_STARTS = {
    TINY_ARITH: Recipe("arith_small", 300),
    TINY_ARITH_2X1: Recipe("arith_2x1", 1200),
    TINY_ARITH_WORDS: Recipe("arith_2x1_words", 2000),
    # the comparisons are learnt all at once (about 50% for 150 steps, then 75% within 25 more,
    # 90% by 300 in a trial at this rate and share): the band stops it on the way up, where RL
    # paid on them has something to reinforce and room to climb; the sums, a quarter of each
    # batch, stay about where the words policy had them
    TINY_ARITH_COMPARE: Recipe("arith_2x1_compare", 600, start=TINY_ARITH_WORDS, lr=2e-3,
                               check_every=25, comparison_share=0.75,
                               bands=(("sums", 0.35, 0.55), ("comparisons", 0.55, 0.70))),
}

SHIPPED = Path(__file__).with_name("models")
"""Weights that ship with the package (``SHIPPED/NAME/policy``), each with a README that gives
the command that rebuilt it and its checksums."""


def shipped_policy(name: str = TINY_ARITH_2X1) -> Path:
    """A shipped policy (the testbed's starting one by default, or the tests'
    ``tiny-arith-v1``): the same bytes on every machine.

    Why shipped and not built: the warm start (lr 3e-3 from a random model) is deterministic on
    one machine but not across machines, and its outcome is not stable under that difference:
    the same code and seed, stopped at 1,200 steps, gave a policy right on 48% of the held-out
    problems on some machines, 10% on another (where no arm learned anything) and 72% on a
    third. 383 KB settle it. ``cooper models build-testbed`` reruns the recipe, now stopped in a
    band (:func:`build_testbed_policy`). The tests' policy ships for the same reason: how many
    positives a smoke run makes, and so what a test sees, followed the machine that built it.
    """
    path = SHIPPED / name / "policy"
    if not (path / "config.json").is_file():
        raise UserError(f"the shipped testbed policy {name} is missing from {path.parent}: the "
                        "package is incomplete; reinstall cooper-rl")
    return path


TESTBED_CHECK = {"dataset": "arith_2x1", "split": "validation", "limit": 100, "samples": 2,
                 "max_new_tokens": 48, "seed": 0, "verify_mode": "strict"}
"""how the warm start's accuracy is measured: as ``hacking_cpu``'s setup measures it"""
CHECKS = {TINY_ARITH_2X1: TESTBED_CHECK,
          TINY_ARITH_WORDS: {**TESTBED_CHECK, "dataset": "arith_2x1_words", "max_new_tokens": 64,
                             "verify_mode": "gold"},
          TINY_ARITH_COMPARE: {**TESTBED_CHECK, "dataset": "arith_2x1_compare", "limit": 300,
                               "max_new_tokens": 64, "verify_mode": "gold"}}
"""each shipped testbed policy's check: the words policy is scored by the gold judge, as
``blind_cpu``'s first round scored it (answers in words are longer: 64 tokens); the compare
policy on 300 problems (100 sums, 200 comparisons; 200 and 100 when the shipped one was built),
each family's accuracy apart"""


def is_comparison(problem) -> bool:
    """A problem of the comparison family (its reference is a truth value)."""
    from cooper.verify.gold import read_boolean

    return read_boolean(problem.reference) is not None


def heldout_accuracy(generator, dataset: str, split: str, *, limit: int | None, samples: int,
                     max_new_tokens: int, seed: int, temperature: float, top_p: float,
                     verify_mode: str = "strict") -> float:
    """A policy's verified accuracy on held-out problems: the testbed's check, as the setup and
    the warm start's stop both measure it."""
    return heldout_figures(generator, dataset, split, limit=limit, samples=samples,
                           max_new_tokens=max_new_tokens, seed=seed, temperature=temperature,
                           top_p=top_p, verify_mode=verify_mode)["accuracy"]


def heldout_figures(generator, dataset: str, split: str, *, limit: int | None, samples: int,
                    max_new_tokens: int, seed: int, temperature: float, top_p: float,
                    verify_mode: str = "strict") -> dict[str, float]:
    """:func:`heldout_accuracy` (``accuracy``) and, where the problems hold comparisons, each
    family's accuracy apart (``sums``, ``comparisons``)."""
    from cooper.data.problems import load_problems
    from cooper.eval.sampling import evaluate_problems
    from cooper.infra.generation import SamplingConfig

    problems = list(load_problems(dataset, split, limit=limit))
    sampling = SamplingConfig(n=samples, temperature=temperature, top_p=top_p,
                              max_new_tokens=max_new_tokens, seed=seed)
    result = evaluate_problems(generator, problems, sampling, benchmark=f"{dataset}:{split}",
                               verify_mode=verify_mode)
    out = {"accuracy": result.metrics.accuracy}
    compared = {p.id for p in problems if is_comparison(p)}
    if compared:
        for family, keep in (("sums", False), ("comparisons", True)):
            hits = [s.correct for s in result.samples if (s.problem_id in compared) == keep]
            out[family] = sum(hits) / len(hits)
    return out


def testbed_accuracy(model, tok, check: dict[str, Any] = TESTBED_CHECK) -> float:
    """A policy's accuracy on ``check`` (:data:`TESTBED_CHECK` by default; the paper's
    sampling protocol)."""
    return testbed_figures(model, tok, check)["accuracy"]


def testbed_figures(model, tok, check: dict[str, Any] = TESTBED_CHECK) -> dict[str, float]:
    """:func:`testbed_accuracy`, with each family's accuracy apart where the check's problems
    hold comparisons (:func:`heldout_figures`)."""
    from cooper.infra.generation import HFGenerator
    from cooper.infra.protocol import PAPER_TEMPERATURE, PAPER_TOP_P

    c = check
    return heldout_figures(HFGenerator(model, tok, batch_size=32, name="testbed-check"),
                           c["dataset"], c["split"], limit=c["limit"], samples=c["samples"],
                           max_new_tokens=c["max_new_tokens"], seed=c["seed"],
                           temperature=PAPER_TEMPERATURE, top_p=PAPER_TOP_P,
                           verify_mode=c["verify_mode"])


def build_testbed_policy(out: str | os.PathLike, *, name: str = TINY_ARITH_2X1,
                         seed: int = 0) -> dict[str, Any]:
    """Rerun the shipped policy's recipe (:data:`WARM_STARTS`) into ``out/policy``: a tiny
    random model (seed 0), or the shipped policy the recipe continues from, then
    :func:`warm_start` on the recipe's dataset, stopping at the first check (every
    ``check_every`` steps, at most the recipe's steps) whose figures lie in the recipe's bands.
    On the machine that built the shipped weights this reproduces them; elsewhere the weights
    differ and the stop lands in the bands all the same (unless no check does: then it says
    so). Returns the build's record (also ``out/build.json``)."""
    import tempfile

    from cooper.infra.files import write_json

    recipe = WARM_STARTS[name]
    checks: list[dict[str, float]] = []

    def in_band(step: int, model, tok) -> bool:
        figures = testbed_figures(model, tok, CHECKS[name])
        checks.append({"step": step, **figures})
        return recipe.in_band(figures)

    with tempfile.TemporaryDirectory(prefix="cooper-testbed-") as tmp:
        start = (shipped_policy(recipe.start) if recipe.start else
                 build_tiny_models(Path(tmp) / "random", hidden_size=64, layers=2, heads=4).policy)
        policy = warm_start(start, Path(out) / "policy", steps=recipe.max_steps, lr=recipe.lr,
                            dataset=recipe.dataset, seed=seed, stop=in_band,
                            check_every=recipe.check_every,
                            comparison_share=recipe.comparison_share)
    band = [list(b) for b in recipe.bands]
    record = {"name": name, "dataset": recipe.dataset, "max_steps": recipe.max_steps,
              "lr": recipe.lr, "seed": seed, "start": recipe.start,
              "comparison_share": recipe.comparison_share,
              "band": band[0][1:] if len(band) == 1 else band, "check": CHECKS[name],
              "checks": checks,
              "stopped_at": checks[-1] if checks and recipe.in_band(checks[-1]) else None,
              "policy": policy.name}
    write_json(Path(out) / "build.json", record)
    return record


def tiny_arith_models(*, progress: bool = False, name: str = TINY_ARITH) -> Path:
    """A tiny policy warm-started on arithmetic and a tiny random reward model sharing its
    tokenizer: ``DIR/policy``, ``DIR/reward``.

    The policy is shipped (:func:`shipped_policy`): ``tiny-arith-v1`` (the tests' model: 300
    steps on ``arith_small``, right on about 40% of its problems) or ``tiny-arith-2x1-v2`` (the
    testbed's). Put into the model cache once and reused; written to a temporary folder and
    renamed, like the embedded model.
    """
    import shutil
    import tempfile

    # "-shipped": not the cache's older folders, which held a policy built on that machine
    target = cache_root() / "models" / f"{name}-shipped"
    if (target / "policy" / "config.json").is_file() and (target / "reward" / "config.json").is_file():
        mark_as_ours(target / "reward")  # a build from before the mark (read as ours, as then)
        return target
    with _lock(target.parent / f".{target.name}.lock"), keeping_random_state():
        if (target / "policy" / "config.json").is_file():
            mark_as_ours(target / "reward")
            return target
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            tiny = build_tiny_models(Path(tmp) / "random", hidden_size=64, layers=2, heads=4)
            build = Path(tmp) / "build"
            shutil.copytree(shipped_policy(name), build / "policy")
            tiny.reward.rename(build / "reward")
            build.rename(target)
    return target


def build_tests_policy(out: str | os.PathLike, *, seed: int = 0) -> Path:
    """Rerun the recipe of the tests' shipped policy (``tiny-arith-v1``) into ``out/policy``: a
    tiny random model (seed 0), then 300 steps of :func:`warm_start` on ``arith_small`` with
    ``seed``. Seed 0 on the machine that built the shipped weights reproduces them; another
    seed is a disturbed start, which the tests whose premise depends on the policy are run
    against too (``tests/test_train_endpoint.py``)."""
    import tempfile

    recipe = WARM_STARTS[TINY_ARITH]
    with tempfile.TemporaryDirectory(prefix="cooper-tests-policy-") as tmp:
        tiny = build_tiny_models(Path(tmp) / "random", hidden_size=64, layers=2, heads=4)
        return warm_start(tiny.policy, Path(out) / "policy", steps=recipe.max_steps,
                          lr=recipe.lr, dataset=recipe.dataset, seed=seed)
