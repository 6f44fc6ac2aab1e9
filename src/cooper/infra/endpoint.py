"""An async client for OpenAI-compatible chat-completions endpoints that never loses a request.

Shared by data collection, the LLM judge and the trainer's negative-writing assistant. Every
call ends as a typed :class:`ChatResult`: the text, or the failure kind and a short reason,
never an exception and never silence. What it does on the way:

- **Concurrency limit**: at most ``concurrency`` requests in flight (a semaphore held across a
  request's retries, so backing off does not make room for more requests to the same server).
- **Timeout**: a hard deadline per attempt (``timeout_s``), slow or dribbling replies included.
- **Retries** of transient failures with exponential backoff and jitter; a 429 waits what its
  ``Retry-After`` asks (and fails at once when it asks more than ``max_retry_after_s``, rather
  than hammering a server that asked us to wait).
- **Circuit breaker**: after ``breaker_failures`` consecutive attempts that got no usable answer
  from the server (refused, timeout, 5xx), it opens for ``breaker_cooldown_s``; meanwhile
  calls fail at once with ``endpoint_down`` so callers use their fallback, and then a single
  probe is let through: success closes it, failure opens it for another cooldown.
- **Counters** (:class:`EndpointStats`): requests, attempts, retries, failures by kind, breaker
  openings, probes and rejections, as namespaced metrics.
- **Secrets**: the API key is read from an environment variable (``api_key_env``) when the
  client is built and lives only inside the HTTP client. It is never put in a result, an
  error, a log line or the stats, and any text a server sends back is scrubbed of it.

The settings, results and counters are records of :mod:`cooper.infra.endpoint_records`; the
breaker and the ``Retry-After`` parser live in :mod:`cooper.infra.resilience`. The OpenAI SDK's
own retries are switched off (``max_retries=0``): it would retry invisibly,
so retries could not be counted, and it knows no circuit breaker.

All HTTP runs on one private event loop in a daemon thread owned by the :class:`Endpoint`.
The blocking methods (:meth:`Endpoint.chat`, :meth:`Endpoint.chat_many`) therefore work from
any thread, including one whose event loop is already running (the "event loop is already
running" trap of ``asyncio.run``); :meth:`Endpoint.submit` starts a request and returns a
``concurrent.futures.Future`` at once, so a caller (a training step) can overlap requests with
its own work; and :meth:`Endpoint.achat` works from any event loop.
One loop also means one concurrency limit and one breaker per endpoint, whoever calls it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import random
import threading
from collections.abc import Sequence
from typing import Any

from cooper.infra.endpoint_records import (
    DUMMY_KEY,
    RETRYABLE,
    UNREACHABLE,
    ChatResult,
    EndpointConfig,
    EndpointStats,
)
from cooper.infra.generation import Generation, Messages, OnSamples, SamplingConfig
from cooper.infra.resilience import CircuitBreaker, parse_retry_after

log = logging.getLogger(__name__)

def _parse_completion(body: str) -> tuple[str, str | None, int | None]:
    """(content, finish_reason, completion tokens) of a chat-completions body; ValueError if
    the body is not a well-formed completion."""
    data = json.loads(body)
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list) or not data["choices"]:
        raise ValueError("no choices in the reply")
    choice = data["choices"][0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ValueError("no message in the first choice")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError(f"message content is a {type(content).__name__}")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    tokens = usage.get("completion_tokens")
    return (content or "", choice.get("finish_reason"),
            tokens if isinstance(tokens, int) else None)


class Endpoint:
    """One OpenAI-compatible chat endpoint with retries, a breaker and counters (see module)."""

    def __init__(self, config: EndpointConfig, *, name: str | None = None):
        self.config = config
        self.name = name or f"{config.model}@{config.base_url}"
        self._key = os.environ.get(config.api_key_env) or DUMMY_KEY
        if self._key == DUMMY_KEY:
            log.info("%s: $%s is not set; sending a dummy key (fine for local servers)",
                     self.name, config.api_key_env)
        self._stats = EndpointStats()
        self._stats_lock = threading.Lock()
        self._breaker = CircuitBreaker(config.breaker_failures, config.breaker_cooldown_s)
        self._rng = random.Random(config.seed)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client = None  # AsyncOpenAI, built on the loop thread
        self._sem: asyncio.Semaphore | None = None
        self._start_lock = threading.Lock()

    def __repr__(self) -> str:  # no key in here, ever
        return f"Endpoint({self.name!r})"

    # ------------------------------------------------------------------ public API

    @property
    def stats(self) -> EndpointStats:
        """A consistent copy of the counters."""
        with self._stats_lock:
            return self._stats.snapshot()

    @property
    def breaker_state(self) -> str:
        return self._breaker.state

    def chat(self, messages: Messages, *, temperature: float | None = None,
             top_p: float | None = None, max_tokens: int | None = None,
             seed: int | None = None) -> ChatResult:
        """Blocking: one chat request, from any thread."""
        return self._submit(self._chat(messages, temperature, top_p, max_tokens, seed)).result()

    def submit(self, messages: Messages, *, temperature: float | None = None,
               top_p: float | None = None, max_tokens: int | None = None,
               seed: int | None = None) -> concurrent.futures.Future[ChatResult]:
        """Non-blocking: start one request now and return a Future of its ChatResult (so a
        caller can overlap requests with its own work and collect them later)."""
        return self._submit(self._chat(messages, temperature, top_p, max_tokens, seed))

    def chat_many(self, conversations: Sequence[Messages], *, temperature: float | None = None,
                  top_p: float | None = None, max_tokens: int | None = None,
                  seeds: Sequence[int | None] | None = None,
                  progress: bool = False) -> list[ChatResult]:
        """Blocking: many requests run concurrently (up to ``concurrency``); results in order."""
        seeds = list(seeds) if seeds is not None else [None] * len(conversations)
        if len(seeds) != len(conversations):
            raise ValueError("one seed per conversation")
        futures = [self._submit(self._chat(c, temperature, top_p, max_tokens, s))
                   for c, s in zip(conversations, seeds, strict=True)]
        from tqdm.auto import tqdm

        with tqdm(total=len(futures), desc=f"requests ({self.config.model})", unit="req",
                  disable=not progress) as bar:
            for _ in concurrent.futures.as_completed(futures):
                bar.update(1)
        return [f.result() for f in futures]

    async def achat(self, messages: Messages, *, temperature: float | None = None,
                    top_p: float | None = None, max_tokens: int | None = None,
                    seed: int | None = None) -> ChatResult:
        """Awaitable from any event loop: the request itself runs on the endpoint's loop."""
        coro = self._chat(messages, temperature, top_p, max_tokens, seed)
        if self._loop is not None and asyncio.get_running_loop() is self._loop:
            return await coro
        return await asyncio.wrap_future(self._submit(coro))

    def close(self) -> None:
        """Close connections and stop the loop thread (the endpoint can be used again after).

        Requests still in flight are cancelled, so no caller blocks forever on a loop that
        stopped: their ``chat`` raises ``CancelledError``.
        """
        with self._start_lock:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
        if loop is None or thread is None:
            return

        async def shutdown() -> None:
            others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in others:
                t.cancel()
            await asyncio.gather(*others, return_exceptions=True)
            if self._client is not None:
                await self._client.close()

        try:
            asyncio.run_coroutine_threadsafe(shutdown(), loop).result(timeout=10)
        finally:
            self._client = None
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=10)
            loop.close()

    def __enter__(self) -> Endpoint:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------------ loop thread

    def _submit(self, coro) -> concurrent.futures.Future:
        with self._start_lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                ready = threading.Event()

                def run() -> None:
                    asyncio.set_event_loop(loop)
                    loop.call_soon(ready.set)
                    loop.run_forever()

                self._thread = threading.Thread(target=run, name=f"endpoint-{self.config.model}",
                                                daemon=True)
                self._thread.start()
                ready.wait()
                self._loop = loop
            loop = self._loop
        if threading.current_thread() is self._thread:
            coro.close()
            raise RuntimeError("blocking Endpoint call from inside the endpoint's own loop; "
                               "use 'await endpoint.achat(...)' there")
        return asyncio.run_coroutine_threadsafe(coro, loop)

    def _ensure_client(self) -> None:
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(base_url=self.config.base_url, api_key=self._key,
                                       max_retries=0, timeout=self.config.timeout_s)
            self._sem = asyncio.Semaphore(self.config.concurrency)

    def _count(self, **inc: int) -> None:
        with self._stats_lock:
            for k, v in inc.items():
                setattr(self._stats, k, getattr(self._stats, k) + v)

    def _scrub(self, text: str) -> str:
        """A server may echo our request (headers included) in an error: drop the key."""
        text = " ".join(str(text).split())[:300]
        return text.replace(self._key, "***") if self._key != DUMMY_KEY else text

    def _backoff(self, retry: int) -> float:
        # exponential with "equal jitter": half fixed, half random, so synchronized clients
        # spread out while each still waits a predictable minimum
        cap = min(self.config.backoff_max_s, self.config.backoff_base_s * 2 ** (retry - 1))
        return cap / 2 + self._rng.uniform(0, cap / 2)

    async def _chat(self, messages, temperature, top_p, max_tokens, seed) -> ChatResult:
        self._ensure_client()
        assert self._sem is not None
        self._count(requests=1)
        attempts = 0
        result: ChatResult | None = None
        async with self._sem:
            while True:
                if not self._breaker.allow():
                    last = f"; this request's last attempt: {result.failure}" if result else ""
                    result = ChatResult(None, "endpoint_down", "circuit breaker open after "
                                        f"{self.config.breaker_failures} consecutive failures"
                                        + last, attempts)
                    self._count(breaker_rejected=1)
                    break
                attempts += 1
                self._count(attempts=1, retries=int(attempts > 1))
                probes_before = self._breaker.probes
                try:
                    result, wait = await self._attempt(messages, temperature, top_p,
                                                       max_tokens, seed, attempts)
                except BaseException:
                    if self._breaker.probes != probes_before:
                        self._breaker.release_probe()
                    raise
                opened = self._breaker.opened
                self._breaker.record(result.failure not in UNREACHABLE)
                with self._stats_lock:
                    self._stats.breaker_opened += self._breaker.opened - opened
                    self._stats.breaker_probes = self._breaker.probes
                    if result.failure:
                        self._stats.attempt_failures[result.failure] += 1
                if result.ok or result.failure not in RETRYABLE or attempts > self.config.max_retries:
                    break
                if wait is not None and wait > self.config.max_retry_after_s:
                    result = ChatResult(None, result.failure, f"server asked to wait {wait:.0f} s "
                                        f"(> max_retry_after_s {self.config.max_retry_after_s:g})",
                                        attempts)
                    break
                await asyncio.sleep(wait if wait is not None else self._backoff(attempts))
        with self._stats_lock:
            if result.ok:
                self._stats.succeeded += 1
            else:
                self._stats.failed += 1
                self._stats.failures[result.failure] += 1
        if not result.ok:
            log.debug("%s: request failed (%s) after %d attempt(s): %s", self.name,
                      result.failure, attempts, result.detail)
        return result

    async def _attempt(self, messages, temperature, top_p, max_tokens, seed,
                       attempts) -> tuple[ChatResult, float | None]:
        """One HTTP attempt -> (result, seconds the server asked us to wait or None)."""
        import openai

        kwargs: dict[str, Any] = {"model": self.config.model, "messages": messages}
        for k, v in (("temperature", temperature), ("top_p", top_p),
                     ("max_tokens", max_tokens), ("seed", seed)):
            if v is not None:
                kwargs[k] = v

        def fail(kind: str, detail: str) -> ChatResult:
            return ChatResult(None, kind, self._scrub(detail), attempts)

        try:
            # the SDK's timeout bounds each read; this bounds the whole attempt
            async with asyncio.timeout(self.config.timeout_s):
                raw = await self._client.chat.completions.with_raw_response.create(**kwargs)
                body = raw.text
        except (TimeoutError, openai.APITimeoutError):
            return fail("timeout", f"no reply within {self.config.timeout_s:g} s"), None
        except openai.APIConnectionError as e:
            cause = e.__cause__ or e
            return fail("refused", f"{type(cause).__name__}: {cause}"), None
        except openai.APIStatusError as e:
            status = e.status_code
            if status == 429:
                return fail("http_429", "rate limited (429)"), parse_retry_after(e.response.headers)
            if status >= 500:
                return fail("http_5xx", f"server error {status}: {e.message}"), None
            if status == 408:
                return fail("timeout", "server reported a request timeout (408)"), None
            return fail("http_4xx", f"client error {status}: {e.message}"), None
        try:
            text, finish, tokens = _parse_completion(body)
        except ValueError as e:  # json.JSONDecodeError is a ValueError
            return fail("malformed", f"unreadable reply: {e}"), None
        if not text.strip():
            return fail("empty", f"empty content (finish_reason={finish})"), None
        return ChatResult(text, None, "", attempts, tokens, finish), None


class EndpointGenerator:
    """The :class:`~cooper.infra.generation.Generator` protocol over an :class:`Endpoint`.

    Sample ``k`` of every conversation is its own request with seed ``sampling.seed + k``
    (servers that honour seeds, such as vLLM, then return distinct, repeatable samples). A
    failed request comes back as a :class:`Generation` with empty text, ``finish_reason
    "error"`` and ``failure`` set to the kind and reason, so a caller can list it, not lose it.
    """

    def __init__(self, endpoint: Endpoint, *, name: str | None = None):
        self.endpoint = endpoint
        self.name = name or endpoint.name

    def generate(self, conversations: Sequence[Messages], sampling: SamplingConfig, *,
                 progress: bool = False,
                 on_samples: OnSamples | None = None) -> list[list[Generation]]:
        convs = [c for c in conversations for _ in range(sampling.n)]
        seeds = [sampling.seed + k for _ in conversations for k in range(sampling.n)]
        results = self.endpoint.chat_many(
            convs, temperature=sampling.temperature, top_p=sampling.top_p,
            max_tokens=sampling.max_new_tokens, seeds=seeds, progress=progress)
        gens = [to_generation(r) for r in results]
        if on_samples is not None:
            on_samples(len(gens))
        n = sampling.n
        return [gens[i * n:(i + 1) * n] for i in range(len(conversations))]


def to_generation(result: ChatResult) -> Generation:
    """A ChatResult as a Generation (failures keep their kind and reason)."""
    if result.ok:
        return Generation(text=result.text or "", num_tokens=result.num_tokens or 0,
                          finish_reason=result.finish_reason or "stop", attempts=result.attempts)
    return Generation(text="", num_tokens=0, finish_reason="error", attempts=result.attempts,
                      failure=f"{result.failure}: {result.detail}")
