"""Sampling completions from a model: one interface for local models and served endpoints.

A :class:`Generator` takes chat conversations and returns ``n`` :class:`Generation` records per
conversation, in input order. :class:`HFGenerator` runs a Hugging Face model:

- prompts are rendered with the model's chat template and **left-padded**, so every prompt ends
  at the same column and new tokens are appended after it;
- prompts are **sorted by length** before batching, so a batch holds prompts of similar length and
  little compute goes to padding; results are put back in input order;
- every batch is seeded from ``sampling.seed`` and the batch's own prompts, so the output is a
  deterministic function of (model, conversations, sampling, batch size) and a resumed job that
  forms the same batches reproduces the same samples;
- ``on_samples`` (optional) is called with the number of samples each finished batch brought,
  so a caller can drive one progress bar over many calls.

:class:`VLLMGenerator` runs the same model with vLLM when it is installed (GPU machines). It
renders prompts with the same Hugging Face tokenizer and chat template, passes token ids (so
both backends see identical prompts), and seeds every request from ``sampling.seed`` and its
own prompt, so its samples do not depend on how requests were batched. Greedy outputs of the
two backends agree up to the numerics of their kernels.

Other backends implement the same protocol elsewhere (OpenAI-compatible endpoints:
:class:`cooper.infra.endpoint.EndpointGenerator`).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cooper.errors import UserError
from cooper.infra.models import load_causal_lm, load_tokenizer, resolve
from cooper.infra.protocol import PAPER_TEMPERATURE, PAPER_TOP_P

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

Messages = list[dict[str, str]]
OnSamples = Callable[[int], None]  # called with the number of samples just finished


@dataclass(frozen=True)
class SamplingConfig:
    """How to sample. ``temperature == 0`` means greedy decoding."""

    n: int = 1
    """samples per conversation"""
    temperature: float = PAPER_TEMPERATURE
    """sampling temperature, 0 = greedy (default: the paper's evaluation protocol)"""
    top_p: float = PAPER_TOP_P
    """nucleus sampling: draw from the most likely tokens that hold this much probability"""
    max_new_tokens: int = 512
    """generated tokens per sample, at most"""
    seed: int = 0
    """base seed: each batch (HF), request (vLLM) or sample (endpoint) derives its own from it"""
    private_rng: bool = False
    """local models: draw from a private generator instead of torch's global one, so sampling
    neither depends on nor moves the global random stream (needs top_p == 1)"""

    def __post_init__(self):
        if self.n < 1:
            raise UserError(f"n (samples per problem) must be >= 1, got {self.n}")
        if self.temperature < 0:
            raise UserError(f"temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise UserError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.max_new_tokens < 1:
            raise UserError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.private_rng and self.top_p < 1:
            raise UserError("private_rng sampling supports top_p == 1 only")


@dataclass(frozen=True)
class Generation:
    """One sampled completion."""

    text: str
    """the completion, without the prompt"""
    num_tokens: int
    """generated tokens, the end-of-sequence token included, padding excluded"""
    finish_reason: str
    """'stop' (end-of-sequence), 'length' (hit max_new_tokens) or 'error'"""
    attempts: int = 1
    """served backends: requests it took, retries included"""
    failure: str | None = None
    """served backends: why there is no text ('kind: reason'), so a caller can list the failure,
    not lose it"""


class Generator(Protocol):
    """Anything that turns conversations into ``n`` completions each, in input order."""

    name: str

    def generate(self, conversations: Sequence[Messages], sampling: SamplingConfig, *,
                 progress: bool = False,
                 on_samples: OnSamples | None = None) -> list[list[Generation]]: ...


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


class _ChatTemplatePrompts:
    """``render`` and ``generate`` for a local generator: conversations become prompt text with
    the tokenizer's chat template, then go to the subclass's ``generate_text``."""

    tokenizer: PreTrainedTokenizerBase

    def render(self, messages: Messages) -> str:
        """The prompt text this generator feeds the model for a conversation."""
        return render_messages(self.tokenizer, messages)

    def generate(self, conversations: Sequence[Messages], sampling: SamplingConfig, *,
                 progress: bool = False,
                 on_samples: OnSamples | None = None) -> list[list[Generation]]:
        prompts = [self.render(m) for m in conversations]
        return self.generate_text(prompts, sampling, progress=progress, on_samples=on_samples)

    def generate_text(self, prompts: Sequence[str], sampling: SamplingConfig, *,
                      progress: bool = False,
                      on_samples: OnSamples | None = None) -> list[list[Generation]]:
        raise NotImplementedError


class HFGenerator(_ChatTemplatePrompts):
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
        tok = load_tokenizer(name_or_path, trust_remote_code=trust_remote_code)
        model = load_causal_lm(name_or_path, trust_remote_code=trust_remote_code, dtype=dtype)
        return cls(model.eval(), tok, batch_size=batch_size, name=str(name_or_path))

    def generate_text(self, prompts: Sequence[str], sampling: SamplingConfig, *,
                      progress: bool = False,
                      on_samples: OnSamples | None = None) -> list[list[Generation]]:
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
            if on_samples is not None:
                on_samples(len(idx) * sampling.n)
            bar.set_postfix(samples_per_s=f"{bar.n / (time.perf_counter() - t0):.2f}")
        bar.close()
        return results  # type: ignore[return-value]

    def _generate_batch(self, prompts: list[str], sampling: SamplingConfig,
                        torch) -> list[list[Generation]]:
        device = next(self.model.parameters()).device
        enc = self.tokenizer(prompts, return_tensors="pt", padding=True,
                             add_special_tokens=False).to(device)
        greedy = sampling.temperature == 0
        # repetition_penalty=1.0 overrides a checkpoint's generation_config (some instruct
        # checkpoints ship a value above 1): sampling follows SamplingConfig only, as with
        # vLLM, whose explicit SamplingParams do not read generation_config.
        kwargs = dict(max_new_tokens=sampling.max_new_tokens, do_sample=not greedy,
                      num_return_sequences=sampling.n, repetition_penalty=1.0,
                      pad_token_id=self.tokenizer.pad_token_id)
        seed = batch_seed(sampling.seed, prompts)
        if sampling.private_rng and not greedy:
            # Gumbel-max: argmax(logits / T + Gumbel noise) is a draw from softmax(logits / T),
            # so greedy decoding over the noised scores samples exactly as do_sample would.
            from transformers import LogitsProcessorList

            rng = torch.Generator(device=device).manual_seed(seed)
            kwargs.update(do_sample=False, logits_processor=LogitsProcessorList(
                [_GumbelNoise(sampling.temperature, rng)]))
        elif not greedy:
            kwargs.update(temperature=sampling.temperature, top_p=sampling.top_p, top_k=0)
            torch.manual_seed(seed)
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


class _GumbelNoise:
    """Logits processor: scores / temperature plus Gumbel(0, 1) noise from a private generator."""

    def __init__(self, temperature: float, generator):
        self.temperature, self.generator = temperature, generator

    def __call__(self, input_ids, scores):  # scores: [B, V]
        import torch

        u = torch.rand(scores.shape, generator=self.generator, device=scores.device,
                       dtype=torch.float32).clamp_(min=1e-20)  # [B, V] in (0, 1)
        return scores.float() / self.temperature - torch.log(-torch.log(u))


def _eos_ids(model, tokenizer) -> set[int]:
    """Every token id that ends generation (generation_config may list several)."""
    ids = model.generation_config.eos_token_id
    ids = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
    if tokenizer.eos_token_id is not None:
        ids.add(tokenizer.eos_token_id)
    return ids


class VLLMGenerator(_ChatTemplatePrompts):
    """Generation with vLLM (GPU): same prompts and token accounting as :class:`HFGenerator`.

    Prompts are rendered and tokenized by the Hugging Face tokenizer (no special tokens added,
    as in :class:`HFGenerator`) and passed to vLLM as token ids, so both backends condition on
    identical inputs. Each request gets its own seed from ``sampling.seed`` and its prompt:
    vLLM then samples independently of how requests share a batch.
    """

    def __init__(self, llm, tokenizer: PreTrainedTokenizerBase, eos_ids: set[int], *,
                 name: str = "vllm"):
        self.llm, self.tokenizer, self.eos_ids, self.name = llm, tokenizer, eos_ids, name

    @classmethod
    def load(cls, name_or_path: str, *, trust_remote_code: bool = False,
             dtype: str | None = None, tensor_parallel_size: int = 1,
             gpu_memory_utilization: float = 0.9,
             max_model_len: int | None = None) -> VLLMGenerator:
        import importlib.util

        if importlib.util.find_spec("vllm") is None:
            raise UserError("the vLLM backend needs vLLM, which is not installed. On a GPU "
                            "machine: pip install 'cooper-rl[vllm]'; elsewhere use --backend hf")
        try:
            import vllm
        except Exception as e:  # installed but unusable (no CUDA, mismatched torch, ...)
            raise UserError(f"vLLM is installed but cannot be imported ({type(e).__name__}: "
                            f"{e}); use --backend hf, or fix the vLLM installation") from e
        from transformers import GenerationConfig

        path = resolve(name_or_path)
        tok = load_tokenizer(path, trust_remote_code=trust_remote_code)
        eos: set[int] = set()
        try:  # the same stop tokens HF generate uses: generation_config may list several
            ids = GenerationConfig.from_pretrained(path).eos_token_id
            eos = set(ids if isinstance(ids, list) else [ids] if ids is not None else [])
        except OSError:  # no generation_config.json
            pass
        if tok.eos_token_id is not None:
            eos.add(tok.eos_token_id)
        kwargs = dict(model=str(path), tokenizer=str(path), trust_remote_code=trust_remote_code,
                      dtype=dtype or "auto", tensor_parallel_size=tensor_parallel_size,
                      gpu_memory_utilization=gpu_memory_utilization)
        if max_model_len is not None:
            kwargs["max_model_len"] = max_model_len
        return cls(vllm.LLM(**kwargs), tok, eos, name=str(name_or_path))

    def generate_text(self, prompts: Sequence[str], sampling: SamplingConfig, *,
                      progress: bool = False,
                      on_samples: OnSamples | None = None) -> list[list[Generation]]:
        from vllm import SamplingParams

        if not prompts:
            return []
        greedy = sampling.temperature == 0
        # Greedy samples are all the same sequence: ask for one and repeat it (older vLLM
        # releases also reject n > 1 with temperature 0).
        n = 1 if greedy else sampling.n
        stop_ids = sorted(self.eos_ids)
        params = [SamplingParams(
            n=n, temperature=0.0 if greedy else sampling.temperature,
            top_p=1.0 if greedy else sampling.top_p, max_tokens=sampling.max_new_tokens,
            seed=batch_seed(sampling.seed, [p]) & 0x7FFF_FFFF, stop_token_ids=stop_ids,
            skip_special_tokens=True) for p in prompts]
        ids = self.tokenizer(list(prompts), add_special_tokens=False)["input_ids"]
        outputs = self.llm.generate([{"prompt_token_ids": x} for x in ids], params,
                                    use_tqdm=progress)
        results = []
        for out in outputs:  # vLLM returns outputs in input order
            gens = []
            for c in out.outputs:
                row = list(c.token_ids)
                # Whether the stop token is listed in token_ids has varied across releases:
                # drop it if present and count it once, as HFGenerator does.
                stopped = c.finish_reason == "stop"
                kept = row[:-1] if stopped and row and row[-1] in self.eos_ids else row
                gens.append(Generation(
                    text=self.tokenizer.decode(kept, skip_special_tokens=True),
                    num_tokens=len(kept) + 1 if stopped else len(kept),
                    finish_reason="stop" if stopped else "length"))
            results.append(gens * sampling.n if greedy else gens)
        if on_samples is not None:
            on_samples(len(prompts) * sampling.n)
        return results


def load_generator(backend: str, name_or_path: str, *, trust_remote_code: bool = False,
                   batch_size: int = 16, dtype: str | None = None) -> Generator:
    """A generator for ``backend`` ("hf" or "vllm"); vLLM is imported only when asked for."""
    if backend == "hf":
        return HFGenerator.load(name_or_path, trust_remote_code=trust_remote_code,
                                batch_size=batch_size, dtype=dtype)
    if backend == "vllm":
        return VLLMGenerator.load(name_or_path, trust_remote_code=trust_remote_code, dtype=dtype)
    raise UserError(f"unknown backend '{backend}'; choose hf or vllm")
