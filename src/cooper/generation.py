"""Sampling completions from a model: one interface for local models and served endpoints.

A :class:`Generator` takes chat conversations and returns ``n`` :class:`Generation` records per
conversation, in input order. :class:`HFGenerator` runs a Hugging Face model:

- prompts are rendered with the model's chat template and **left-padded**, so every prompt ends
  at the same column and new tokens are appended after it;
- prompts are **sorted by length** before batching, so a batch holds prompts of similar length and
  little compute goes to padding; results are put back in input order;
- every batch is seeded from ``sampling.seed`` and the batch's own prompts, so the output is a
  deterministic function of (model, conversations, sampling, batch size) and a resumed job that
  forms the same batches reproduces the same samples.

Other backends implement the same protocol elsewhere (OpenAI-compatible endpoints:
:class:`cooper.endpoint.EndpointGenerator`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cooper.errors import UserError

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Messages = list[dict[str, str]]


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample. ``temperature == 0`` means greedy decoding."""

    n: int = 1  # samples per conversation
    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 512
    seed: int = 0

    def __post_init__(self):
        if self.n < 1:
            raise UserError(f"n (samples per problem) must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise UserError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")


@dataclass(frozen=True)
class Generation:
    """One sampled completion."""

    text: str
    num_tokens: int  # generated tokens, the end-of-sequence token included, padding excluded
    finish_reason: str  # "stop" (end-of-sequence), "length" (hit max_new_tokens) or "error"
    # Served backends only: requests it took (retries included), and why there is no text
    # ("kind: reason") when the request failed, so callers can list the failure, not lose it.
    attempts: int = 1
    failure: str | None = None


class Generator(Protocol):
    """Anything that turns conversations into ``n`` completions each, in input order."""

    name: str

    def generate(self, conversations: Sequence[Messages], sampling: SamplingConfig, *,
                 progress: bool = False) -> list[list[Generation]]: ...


def render_messages(tokenizer: PreTrainedTokenizerBase, messages: Messages) -> str:
    """A conversation as prompt text: the chat template, or plain text for a base model."""
    if tokenizer.chat_template:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return "".join(f"{m['content']}\n" for m in messages) + "Answer:"


def batch_seed(seed: int, prompts: Sequence[str]) -> int:
    """A seed that depends only on the run's seed and the batch's prompts (stable across runs)."""
    h = hashlib.sha256(str(seed).encode())
    for p in prompts:
        h.update(b"\0" + p.encode("utf-8", "surrogatepass"))
    return int.from_bytes(h.digest()[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


class HFGenerator:
    """Batched, left-padded, length-sorted generation with a Hugging Face causal LM."""

    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *,
                 batch_size: int = 16, name: str | None = None):
        if batch_size < 1:
            raise UserError(f"batch_size must be >= 1, got {batch_size}")
        self.model, self.tokenizer, self.batch_size = model, tokenizer, batch_size
        self.name = name or str(getattr(model.config, "_name_or_path", "model"))
        self.tokenizer.padding_side = "left"

    @classmethod
    def load(cls, name_or_path: str, *, trust_remote_code: bool = False, batch_size: int = 16,
             dtype: str | None = None) -> HFGenerator:
        from cooper.models import load_causal_lm, load_tokenizer

        tok = load_tokenizer(name_or_path, trust_remote_code=trust_remote_code)
        model = load_causal_lm(name_or_path, trust_remote_code=trust_remote_code, dtype=dtype)
        return cls(model.eval(), tok, batch_size=batch_size, name=str(name_or_path))

    def generate(self, conversations: Sequence[Messages], sampling: SamplingConfig, *,
                 progress: bool = False) -> list[list[Generation]]:
        prompts = [render_messages(self.tokenizer, m) for m in conversations]
        return self.generate_text(prompts, sampling, progress=progress)

    def generate_text(self, prompts: Sequence[str], sampling: SamplingConfig, *,
                      progress: bool = False) -> list[list[Generation]]:
        """Like :meth:`generate` for prompts that are already rendered text."""
        import torch
        from tqdm.auto import tqdm

        if not prompts:
            return []
        lengths = [len(ids) for ids in self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]]
        order = sorted(range(len(prompts)), key=lambda i: -lengths[i])  # longest first: OOM shows early
        # batch_size counts sequences; each prompt brings its n samples along
        per_batch = max(1, self.batch_size // sampling.n)
        results: list[list[Generation] | None] = [None] * len(prompts)
        bar = tqdm(total=len(prompts) * sampling.n, desc=f"generate ({self.name})", unit="sample",
                   disable=not progress)
        t0 = time.perf_counter()
        for start in range(0, len(order), per_batch):
            idx = order[start:start + per_batch]
            batch_prompts = [prompts[i] for i in idx]
            for i, gens in zip(idx, self._generate_batch(batch_prompts, sampling, torch),
                               strict=True):
                results[i] = gens
            bar.update(len(idx) * sampling.n)
            bar.set_postfix(samples_per_s=f"{bar.n / (time.perf_counter() - t0):.2f}")
        bar.close()
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[str], sampling: SamplingConfig,
                        torch) -> list[list[Generation]]:
        device = next(self.model.parameters()).device
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True,
                             add_special_tokens=False).to(device)
        greedy = sampling.temperature == 0
        kwargs = dict(max_new_tokens=sampling.max_new_tokens, do_sample=not greedy,
                      num_return_sequences=sampling.n,
                      pad_token_id=self.tokenizer.pad_token_id)
        if not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
        torch.manual_seed(batch_seed(sampling.seed, prompts))
        with torch.inference_mode():
            out = self.model.generate(**enc, **kwargs)
        new = out[:, enc["input_ids"].shape[1]:]  # [B*n, T]
        eos_ids = _eos_ids(self.model, self.tokenizer)
        gens = []
        for row in new.tolist():
            end = next((j for j, t in enumerate(row) if t in eos_ids), None)
            kept = row if end is None else row[:end]
            gens.append(Generation(
                text=self.tokenizer.decode(kept, skip_special_tokens=True),
                num_tokens=len(row) if end is None else end + 1,
                finish_reason="length" if end is None else "stop"))
        n = sampling.n
        return [gens[k * n:(k + 1) * n] for k in range(len(prompts))]


def _eos_ids(model, tokenizer) -> set[int]:
    """Every token id that ends generation (generation_config may list several)."""
    ids = model.generation_config.eos_token_id
    ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids
