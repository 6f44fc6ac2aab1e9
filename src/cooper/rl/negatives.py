"""Negatives for the reward-model update: an assistant rewrites a correct solution into a wrong one.

Cooper (``docs/method.md`` "One Cooper step", step 3) asks an assistant LLM to turn each positive
into a plausible but wrong solution of similar length. A proposal is accepted only when the verifier
extracts a final answer from it and finds that answer *not* equivalent to the reference; up to
``max_attempts`` proposals are tried, then (if enabled) a rule-based rewrite of the final answer is
the fallback, and otherwise the pair is dropped. Every outcome is recorded with its reason, so the
metrics count valid, fallback and dropped negatives instead of hiding them.

Sources, all implementing :class:`NegativeSource`:

- :class:`LocalAssistant`: a local causal LM, by default the frozen reference policy that
  training already holds (no extra weights in memory);
- :class:`EndpointAssistant`: any OpenAI-compatible server (retries, backoff and a circuit
  breaker live in :mod:`cooper.infra.endpoint`; a failed request is a ``None`` proposal, so the
  fallback takes over and a dead endpoint is not hammered);
- :class:`RewriteNegatives`: changes the final answer by rule (always available, cheap).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from cooper.config.sections import AssistantConfig
from cooper.data.perturb import rewrite_final_answer
from cooper.infra.endpoint import Endpoint, EndpointConfig
from cooper.infra.generation import HFGenerator, Messages, SamplingConfig
from cooper.infra.models import load_causal_lm, load_tokenizer
from cooper.types import Pair, Rollout
from cooper.verify.verifier import Verdict

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

VerifyFn = Callable[[Sequence[str], Sequence[str]], "list[Verdict]"]

ASSISTANT_SYSTEM = ("You write plausible but incorrect solutions to math problems. They are used "
                    "to train a model that checks solutions, so they must look like genuine "
                    "attempts.")
ASSISTANT_TEMPLATE = """Problem:
{question}

A correct solution, between the markers:
<<<SOLUTION
{solution}
SOLUTION>>>

Rewrite this solution so that it looks like a genuine attempt of similar length and style but \
contains a reasoning or arithmetic mistake that leads to a different, wrong final answer. The \
correct final answer is {reference}; yours must differ from it. End with the wrong final answer \
in \\boxed{{}}. Reply with the rewritten solution only."""


def assistant_messages(positive: Rollout) -> Messages:
    """The assistant's instructions for one positive (``docs/method.md`` "One Cooper step",
    step 3: wrong reasoning, wrong final result, looks like a real solution)."""
    return [{"role": "system", "content": ASSISTANT_SYSTEM},
            {"role": "user", "content": ASSISTANT_TEMPLATE.format(
                question=positive.question, solution=positive.completion,
                reference=positive.reference)}]


class NegativeSource(Protocol):
    """Proposes one negative per positive (``None`` where it has none).

    ``attempts_per_call``: how many of a positive's attempts :func:`make_negatives` asks for in
    one call (the positive appears that many times in ``positives``). A local model decodes a
    small batch at little more per token than one sequence, so it takes all attempts at once; an
    endpoint takes one at a time, so that no request is spent once a negative is accepted.
    """

    name: str
    attempts_per_call: int

    def propose(self, positives: Sequence[Rollout], *, attempt: int,
                seed: int) -> list[str | None]: ...


def negative_token_budget(positive_tokens: int) -> int:
    """New tokens allowed for a negative rewritten from a positive of ``positive_tokens``."""
    return positive_tokens + positive_tokens // 2 + 32


class LocalAssistant:
    """A local causal LM as the assistant (by default the reference policy's weights)."""

    name = "assistant"

    def __init__(self, generator: HFGenerator, *, max_new_tokens: int = 512,
                 temperature: float = 0.7, attempts_per_call: int = 3):
        self.generator, self.max_new_tokens, self.temperature = generator, max_new_tokens, temperature
        self.attempts_per_call = attempts_per_call

    def propose(self, positives: Sequence[Rollout], *, attempt: int, seed: int) -> list[str | None]:
        if not positives:
            return []
        # A rewrite "of similar length" needs no more tokens than its longest positive plus
        # slack: a small assistant that rambles would otherwise run to max_new_tokens, and
        # every decoding step of the batch costs as much as the longest sequence in it.
        lengths = self.generator.tokenizer([p.completion for p in positives],
                                           add_special_tokens=False)["input_ids"]
        budget = min(self.max_new_tokens, negative_token_budget(max(map(len, lengths))))
        # A different seed per attempt: a retry must not repeat the rejected proposal. The
        # private generator leaves torch's global stream alone, so writing negatives (in line or
        # in a background thread) does not shift the policy's sampling: a Cooper run samples
        # the rollouts a run without negatives would, and a resumed run an uninterrupted one's.
        sampling = SamplingConfig(n=1, temperature=self.temperature, top_p=1.0,
                                  max_new_tokens=budget, seed=seed * 1000 + attempt,
                                  private_rng=True)
        out = self.generator.generate([assistant_messages(p) for p in positives], sampling)
        return [g[0].text if g[0].text.strip() else None for g in out]


class EndpointAssistant:
    """An OpenAI-compatible chat endpoint as the assistant."""

    name = "assistant"

    def __init__(self, endpoint: Endpoint, *, max_new_tokens: int = 512,
                 temperature: float = 0.7, attempts_per_call: int = 1):
        self.endpoint, self.max_new_tokens, self.temperature = endpoint, max_new_tokens, temperature
        self.attempts_per_call = attempts_per_call

    @classmethod
    def from_config(cls, a: AssistantConfig) -> EndpointAssistant:
        endpoint = Endpoint(EndpointConfig(
            base_url=a.base_url, model=a.model, api_key_env=a.api_key_env,
            concurrency=a.concurrency, timeout_s=a.timeout_s, max_retries=a.max_retries))
        return cls(endpoint, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                   attempts_per_call=a.attempts_per_call or 1)

    def propose(self, positives: Sequence[Rollout], *, attempt: int, seed: int) -> list[str | None]:
        if not positives:
            return []
        results = self.endpoint.chat_many(
            [assistant_messages(p) for p in positives], temperature=self.temperature,
            max_tokens=self.max_new_tokens,
            seeds=[(seed * 1000 + attempt) * 1000 + i for i in range(len(positives))])
        return [r.text if r.ok and r.text and r.text.strip() else None for r in results]

    def metrics(self) -> dict[str, float]:
        """Cumulative request counters, logged under ``assistant/``."""
        return {k: float(v) for k, v in self.endpoint.stats.metrics("assistant").items()}

    def close(self) -> None:
        self.endpoint.close()


class RewriteNegatives:
    """Rule-based negatives: the positive with its final answer changed consistently."""

    name = "rewrite"
    attempts_per_call = 1

    def propose(self, positives: Sequence[Rollout], *, attempt: int, seed: int) -> list[str | None]:
        out = []
        for i, p in enumerate(positives):
            # seeded per (step seed, position, attempt): reproducible and different per retry
            rng = random.Random(f"{seed}:{i}:{attempt}")
            out.append(rewrite_final_answer(p.completion, p.reference, rng))
        return out


@dataclass(frozen=True)
class NegativeOutcome:
    """What happened to one positive's negative."""

    negative: str | None  # None: the pair is dropped
    source: str | None  # name of the source that wrote it ("assistant", "rewrite"), None if dropped
    attempts: int  # proposals tried, fallback included
    reason: str  # "accepted", or why the last proposal was rejected
    fallback: bool = False  # written by the fallback after the assistant failed


def rejection_reason(proposal: str | None, verdict: Verdict | None) -> str | None:
    """None if the proposal is a valid negative, else why not.

    Valid: the verifier extracted a final answer and it is not equivalent to the reference. A
    proposal without an answer, or whose check timed out, cannot be confirmed wrong.
    """
    if proposal is None:
        return "no_proposal"
    assert verdict is not None
    if verdict.correct:
        return "answer_equals_reference"
    if verdict.extracted is None:
        return "no_answer"
    if verdict.reason != "wrong":
        return verdict.reason  # timeout / error
    return None


def make_negatives(positives: Sequence[Rollout], *, assistant: NegativeSource | None,
                   fallback: NegativeSource | None, verify: VerifyFn, max_attempts: int,
                   seed: int) -> list[NegativeOutcome]:
    """One outcome per positive: the assistant's attempts, then the fallback, then a drop.

    Each source is asked in rounds of ``attempts_per_call`` proposals per pending positive (the
    positive repeated, copies in attempt order); a positive takes its first valid proposal.
    """
    outcomes: list[NegativeOutcome | None] = [None] * len(positives)
    last_reason = ["no_source"] * len(positives)
    attempts = [0] * len(positives)
    pending = list(range(len(positives)))
    stages = [(assistant, False)] if assistant is not None else []
    if fallback is not None:
        stages.append((fallback, True))
    for source, is_fallback in stages:
        attempt = 0
        while pending and attempt < max_attempts:
            k = max(1, min(getattr(source, "attempts_per_call", 1), max_attempts - attempt))
            asked = [i for _ in range(k) for i in pending]  # [k * len(pending)], copy-major
            proposals = source.propose([positives[i] for i in asked], attempt=attempt, seed=seed)
            checked = [j for j, p in enumerate(proposals) if p is not None]
            verdicts = dict(zip(checked, verify([proposals[j] for j in checked],
                                                [positives[asked[j]].reference for j in checked]),
                                strict=True))
            for j, (i, proposal) in enumerate(zip(asked, proposals, strict=True)):
                if outcomes[i] is not None:  # an earlier copy was accepted
                    continue
                attempts[i] += 1
                why = rejection_reason(proposal, verdicts.get(j))
                if why is None:
                    outcomes[i] = NegativeOutcome(proposal, source.name, attempts[i], "accepted",
                                                  is_fallback)
                else:
                    last_reason[i] = f"{source.name}:{why}"
            pending = [i for i in pending if outcomes[i] is None]
            attempt += k
    for i in pending:
        outcomes[i] = NegativeOutcome(None, None, attempts[i], last_reason[i])
    return outcomes  # type: ignore[return-value]


def build_pairs(positives: Sequence[Rollout], outcomes: Sequence[NegativeOutcome]) -> list[Pair]:
    """Pairs for the positives whose negative was accepted, in positive order."""
    return [Pair(p.problem_id, p.question, p.reference, p.completion, o.negative, o.source)
            for p, o in zip(positives, outcomes, strict=True) if o.negative is not None]


@dataclass
class NegativeWriter:
    """The step's negative sources in order (assistant, then fallback) and how hard to try."""

    assistant: NegativeSource | None
    fallback: NegativeSource | None
    verify: VerifyFn
    max_attempts: int = 3

    def write(self, positives: Sequence[Rollout], *, seed: int) -> list[NegativeOutcome]:
        return make_negatives(positives, assistant=self.assistant, fallback=self.fallback,
                              verify=self.verify, max_attempts=self.max_attempts, seed=seed)

    def metrics(self) -> dict[str, float]:
        """Counters of the sources that keep any (an endpoint's requests, retries, failures)."""
        out: dict[str, float] = {}
        for source in (self.assistant, self.fallback):
            if source is not None and hasattr(source, "metrics"):
                out.update(source.metrics())
        return out

    def close(self) -> None:
        for source in (self.assistant, self.fallback):
            if source is not None and hasattr(source, "close"):
                source.close()


def negative_writer(a: AssistantConfig, verify: VerifyFn, *, max_attempts: int,
                    dtype: str = "float32",
                    reference: tuple[PreTrainedModel, PreTrainedTokenizerBase] | None = None
                    ) -> NegativeWriter:
    """The sources the assistant settings name, each negative given ``max_attempts``
    (``rm_update.max_attempts``). A local assistant writes with ``reference`` (the frozen
    reference policy the trainer already holds, so no extra weights) unless ``a.model`` gives it
    its own, loaded in ``dtype``."""
    if a.backend == "rewrite":
        return NegativeWriter(RewriteNegatives(), None, verify, max_attempts)
    fallback = RewriteNegatives() if a.fallback else None
    if a.backend == "endpoint":
        assistant: NegativeSource = EndpointAssistant.from_config(a)
    else:
        if a.model:
            model = load_causal_lm(a.model, dtype=dtype)
            tok = load_tokenizer(a.model)
            if reference is not None:
                model.to(reference[0].device)
        elif reference is not None:
            model, tok = reference
        else:
            raise ValueError("a local assistant needs assistant.model or the reference policy")
        model.eval().requires_grad_(False)
        gen = HFGenerator(model, tok, batch_size=a.batch_size, name="assistant")
        assistant = LocalAssistant(gen, max_new_tokens=a.max_new_tokens, temperature=a.temperature,
                                   attempts_per_call=a.attempts_per_call or max_attempts)
    return NegativeWriter(assistant, fallback, verify, max_attempts)
