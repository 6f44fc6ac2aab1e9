"""Rule-based verification: is a completion's final answer equivalent to the reference?

Cooper trusts this verifier to pick the positives that train the reward model, evaluation uses it
to score benchmarks, and data labelling uses it as one of two labellers. So it must be correct,
fast, and impossible to hang. One check goes:

1. **Extract** the final answer with :func:`cooper.verify.extraction.find_answer` (``strict``: boxed,
   ``####``, "answer is"; ``lenient`` adds the last number). No answer: ``no_answer``.
2. **Normalise** both sides (:func:`~cooper.verify.extraction.clean_answer`,
   :func:`~cooper.verify.extraction.normalize_reference`): math delimiters and currency signs dropped,
   a GSM8K solution cut to its ``####`` answer, ``145.0`` read as ``145``.
3. **Fast path**, in the calling process, where it provably agrees with math-verify: the two
   texts are identical, or both are plain decimals within math-verify's exact range
   (:func:`~cooper.verify.extraction.plain_number`) and compare as exact fractions.
4. **Cache** of earlier (answer, reference) results: RL groups repeat answers a lot.
5. **math-verify** otherwise, in a :class:`~cooper.infra.procpool.ProcessPool` worker:
   ``verify(parse("$reference$"), parse("$answer$"))`` with math-verify's own SIGALRM timeouts
   switched off (``parsing_timeout=None``, ``timeout_seconds=None``), because SIGALRM only works
   in the main thread (huggingface/Math-Verify#50, #55; huggingface/trl#5281) and TRL calls
   reward functions from other threads. The parent enforces a hard wall-clock deadline instead:
   a worker still busy after ``timeout_s`` is killed and replaced, and the item is ``timeout``,
   never correct. Unless its worker was *starved*: on a loaded machine (a busy laptop, a shared
   node, a test suite beside a training run) a check that takes milliseconds idle can miss its
   deadline while its worker waits for a core, and a verdict that depends on the load would
   make the same run give different pairs, updates and reward models. An item whose worker had
   less than :data:`STARVED` of its deadline in CPU time is tried once more, with
   :data:`RETRY_FACTOR` times the deadline; one that computed for its whole deadline (a hostile
   answer) is not, so it still costs one deadline. Equal answers within one batch are checked
   once.

Reasons in a :class:`Verdict`: ``correct``, ``wrong``, ``no_answer``, ``timeout``, ``error``
(no usable reference, a worker that crashed, an unparseable reference). Only ``correct`` is
correct. Timeouts and errors are not cached, so a timeout caused by a loaded machine is retried.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal

from cooper.errors import UserError
from cooper.infra.procpool import ProcessPool
from cooper.verify.extraction import (
    MODES,
    Mode,
    clean_answer,
    find_answer,
    normalize_reference,
    number_to_str,
    plain_number,
)

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 5.0  # the same budget math-verify gives each step by default
RETRY_FACTOR = 4.0  # a starved item is tried once more with this many times the deadline
STARVED = 0.5  # a timed-out worker that had less CPU time than this share of its deadline
DEFAULT_MEMORY_LIMIT_MB = 2048  # per worker; a tower like 10^{10^{10}} needs far more
DEFAULT_CACHE_SIZE = 65536
MAX_CACHED_CHARS = 2000  # longer answers are not cached (a 1 MB key would pin 1 MB)
REASONS = ("correct", "wrong", "no_answer", "timeout", "error")


@dataclass(frozen=True)
class Verdict:
    """The verifier's decision on one completion; ``correct`` only when ``reason == "correct"``."""

    correct: bool
    extracted: str | None  # the final answer as written in the completion, None if none
    reason: str  # one of REASONS


@dataclass
class VerifierStats:
    """Running counts (per :class:`Verifier`): where the answers were decided."""

    items: int = 0
    no_answer: int = 0
    fast_path: int = 0
    cache_hits: int = 0
    worker_checks: int = 0
    retries: int = 0  # starved items tried again with a longer deadline
    timeouts: int = 0  # items that ended as timeout (after a retry, for a starved one)
    errors: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for k, v in counts.items():
                setattr(self, k, getattr(self, k) + v)

    def as_dict(self) -> dict[str, int]:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}


class WorkersError(UserError, ValueError):
    """A bad ``$COOPER_VERIFY_WORKERS``: the CLI says it in one line (a ValueError for callers
    that caught one before)."""


def default_workers() -> int:
    """``$COOPER_VERIFY_WORKERS``, else the usable CPU cores, at most 4.

    Four workers keep a policy's verification off the critical path on a laptop without taking
    every core from the trainer; on a GPU node each training process gets its own pool.
    """
    env = os.environ.get("COOPER_VERIFY_WORKERS")
    if env:
        try:
            n = int(env)
        except ValueError:
            n = 0
        if n < 1:
            raise WorkersError(f"COOPER_VERIFY_WORKERS must be a positive integer (verifier "
                               f"worker processes), got {env!r}; set it to e.g. 4, or unset it")
        return n
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


# ------------------------------------------------------------------ worker side

def _init_worker() -> None:
    """Runs once in the pool's zygote, so every forked worker starts warm: import math-verify,
    quiet its logger, and run one check of each common shape (the first parse builds large
    regexes and the LaTeX parser: ~0.3 s that would otherwise count against a call's timeout)."""
    # With its timeouts off math-verify warns once per process that we must time out ourselves;
    # we do (the parent's deadline), so the warning is noise.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    for answer, reference in (("\\frac{3}{2}", "1.5"), ("\\sqrt{2}/2", "\\frac{\\sqrt{2}}{2}"),
                              ("(1, 2]", "\\left(1, 2\\right]"), ("x^2+1", "1+x^{2}"),
                              ("\\{1,2\\}", "1, 2"), ("50\\%", "0.5"), ("x=3", "3")):
        equivalent(answer, reference)
    _parse_reference.cache_clear()


@lru_cache(maxsize=4096)
def _parse_reference(reference: str) -> list:
    from math_verify import parse

    # "$...$" is how math-verify's own README passes a LaTeX answer to parse().
    return parse(f"${reference}$", parsing_timeout=None)


def equivalent(answer: str, reference: str) -> bool:
    """math-verify's verdict on two normalised answers, without any timeout: run it in a
    worker (this is the function the pool runs). Raises ValueError for a reference that
    math-verify cannot read at all."""
    from math_verify import parse, verify

    gold = _parse_reference(reference)
    if not gold:
        raise ValueError("math-verify cannot parse the reference")
    pred = parse(f"${answer}$", parsing_timeout=None)
    return bool(pred) and bool(verify(gold, pred, timeout_seconds=None))


# ------------------------------------------------------------------ parent side

def fast_equivalent(answer: str, reference: str) -> bool | None:
    """The verdict without math-verify where it is certain to agree with it, else None."""
    if answer == reference:
        return True
    a, b = plain_number(answer), plain_number(reference)
    if a is not None and b is not None:
        return a == b
    return None


def _message_text(message: Any) -> str:
    content = message.get("content", "") if isinstance(message, dict) else message
    if isinstance(content, list):  # content parts: keep the text ones
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content if isinstance(content, str) else ""


def completion_text(completion: Any) -> str:
    """A completion as text: str, bytes (invalid UTF-8 replaced), None (empty), or a chat
    message list as TRL passes conversational completions.

    Of a message list, the text is what the policy wrote: the content of its assistant
    messages (or messages without a role), joined in order. The verifier and the reward model
    both read this one text, so they judge the same thing. Taking only the last message would
    hide the policy's earlier turns from the reward model; joining every message would let a
    tool's or user's message (text the policy did not write) supply the "answer".
    """
    if completion is None:
        return ""
    if isinstance(completion, list | tuple):
        completion = "".join(_message_text(m) for m in completion
                             if not isinstance(m, dict) or m.get("role", "assistant") == "assistant")
    if isinstance(completion, bytes | bytearray):
        return bytes(completion).decode("utf-8", errors="replace")
    if isinstance(completion, int | float) and not isinstance(completion, bool):
        try:
            return number_to_str(completion)
        except ValueError:
            return ""
    if not isinstance(completion, str):
        raise TypeError(f"expected text, got {type(completion).__name__}")
    try:
        completion.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: they would break JSON output and logs later
        completion = completion.encode("utf-8", errors="replace").decode("utf-8")
    return completion


class _LRU:
    def __init__(self, size: int):
        self.size = size
        self._d: OrderedDict[tuple[str, str], bool] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> bool | None:
        with self._lock:
            value = self._d.get(key)
            if value is not None:
                self._d.move_to_end(key)
            return value

    def put(self, key: tuple[str, str], value: bool) -> None:
        if self.size <= 0 or len(key[0]) + len(key[1]) > MAX_CACHED_CHARS:
            return
        with self._lock:
            self._d[key] = value
            self._d.move_to_end(key)
            while len(self._d) > self.size:
                self._d.popitem(last=False)

    def __len__(self) -> int:
        return len(self._d)


def starved(outcome, timeout_s: float) -> bool:
    """A timeout whose worker had less than :data:`STARVED` of the deadline in CPU time (or an
    unknown amount): the machine was busy, not the check slow."""
    return outcome.status == "timeout" and (outcome.cpu_s is None
                                            or outcome.cpu_s < STARVED * timeout_s)


def _check_mode(mode: str) -> None:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")


class Verifier:
    """Extraction + fast path + cache + math-verify in worker processes with hard timeouts.

    Thread-safe; the worker pool starts on the first check that needs it. Use one per process
    (:func:`default_verifier`) or as a context manager to stop its workers early.
    """

    def __init__(self, *, workers: int | None = None, cache_size: int = DEFAULT_CACHE_SIZE,
                 memory_limit_mb: int | None = DEFAULT_MEMORY_LIMIT_MB, fast_path: bool = True):
        self.workers = workers if workers is not None else default_workers()
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        self.fast_path = fast_path
        self.stats = VerifierStats()
        self._cache = _LRU(cache_size)
        self._pool = ProcessPool(self.workers, memory_limit_mb=memory_limit_mb,
                                 initializer=_init_worker, name="verifier",
                                 start_hint="check that 'python -c \"import math_verify\"' works")

    def verify(self, completion: Any, reference: Any, *, mode: Mode = "strict",
               timeout_s: float = DEFAULT_TIMEOUT_S) -> Verdict:
        """Whether ``completion``'s final answer is equivalent to ``reference``."""
        return self.verify_batch([completion], [reference], mode=mode, timeout_s=timeout_s)[0]

    def verify_batch(self, completions: Sequence[Any], references: Sequence[Any], *,
                     mode: Mode = "strict", timeout_s: float = DEFAULT_TIMEOUT_S,
                     retry_timeout_s: float | None = None) -> list[Verdict]:
        """One :class:`Verdict` per (completion, reference) pair, checked in parallel. An item
        that misses ``timeout_s`` while its worker was starved of CPU is checked once more with
        ``retry_timeout_s`` (default :data:`RETRY_FACTOR` times ``timeout_s``)."""
        _check_mode(mode)
        if len(completions) != len(references):
            raise ValueError(f"{len(completions)} completions but {len(references)} references")
        if not timeout_s > 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        verdicts: list[Verdict | None] = [None] * len(completions)
        jobs: dict[tuple[str, str], list[tuple[int, str]]] = {}
        counts = dict(items=len(completions), no_answer=0, fast_path=0, cache_hits=0,
                      worker_checks=0, retries=0, timeouts=0, errors=0)
        for i, (completion, reference) in enumerate(zip(completions, references, strict=True)):
            span = find_answer(completion_text(completion), mode)
            if span is None:
                verdicts[i] = Verdict(False, None, "no_answer")
                counts["no_answer"] += 1
                continue
            ref = normalize_reference(completion_text(reference))
            if not ref:
                verdicts[i] = Verdict(False, span.text, "error")
                counts["errors"] += 1
                log.warning("item %d: empty reference answer; it is marked 'error'", i)
                continue
            key = (clean_answer(span.text), ref)
            known = fast_equivalent(*key) if self.fast_path else None
            if known is not None:
                counts["fast_path"] += 1
            else:
                known = self._cache.get(key)
                counts["cache_hits"] += known is not None
            if known is not None:
                verdicts[i] = Verdict(known, span.text, "correct" if known else "wrong")
            else:
                jobs.setdefault(key, []).append((i, span.text))
        if jobs:
            keys = list(jobs)
            counts["worker_checks"] = len(keys)
            outcomes = dict(zip(keys, self._pool.run(equivalent, keys, timeout_s), strict=True))
            late = [k for k in keys if starved(outcomes[k], timeout_s)]
            if late:  # once more, with a longer deadline: the machine was busy, not the check
                counts["retries"] = len(late)
                retry_s = retry_timeout_s if retry_timeout_s is not None else timeout_s * RETRY_FACTOR
                outcomes.update(zip(late, self._pool.run(equivalent, late, retry_s), strict=True))
            for key in keys:
                outcome = outcomes[key]
                if outcome.status == "ok":
                    correct, reason = bool(outcome.value), "correct" if outcome.value else "wrong"
                    self._cache.put(key, correct)
                else:
                    correct, reason = False, outcome.status
                    counts["timeouts" if reason == "timeout" else "errors"] += 1
                    log.warning("verifier %s on answer %.80r vs reference %.80r%s", reason,
                                key[0], key[1], f": {outcome.error}" if outcome.error else
                                f" after {timeout_s:g} s" + (" and a retry" if key in late else ""))
                for i, text in jobs[key]:
                    verdicts[i] = Verdict(correct, text, reason)
        self.stats.add(**counts)
        return verdicts  # type: ignore[return-value]

    def clear_cache(self) -> None:
        """Forget cached verdicts (benchmarks; a changed notion of equivalence)."""
        self._cache = _LRU(self._cache.size)

    def start(self) -> Verifier:
        """Start the worker processes now (else on the first check that needs one), so the
        first real call is not charged their start-up. Returns self."""
        self._pool.start()
        return self

    def close(self) -> None:
        """Stop the worker processes (they also stop at interpreter exit)."""
        self._pool.close()

    def worker_pids(self) -> list[int]:
        return self._pool.worker_pids()

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_default: Verifier | None = None
_default_lock = threading.Lock()


def default_verifier() -> Verifier:
    """The process-wide verifier behind :func:`verify` (``default_workers()`` workers)."""
    global _default
    with _default_lock:
        if _default is None:
            _default = Verifier()
        return _default


def verify(completion: Any, reference: Any, *, mode: Mode = "strict",
           timeout_s: float = DEFAULT_TIMEOUT_S) -> Verdict:
    """Verify one completion against its reference answer with the default verifier."""
    return default_verifier().verify(completion, reference, mode=mode, timeout_s=timeout_s)


JUDGES: tuple[str, ...] = (*MODES, "gold")
"""what :func:`verify_batch` can judge with: the rule (strict or lenient extraction) or the
testbed's gold judge for integer answers (:mod:`cooper.verify.gold`)"""


def verify_batch(completions: Sequence[Any], references: Sequence[Any], *,
                 mode: Mode | Literal["gold"] = "strict",
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Verdict]:
    """Verify many pairs at once with the default verifier (parallel, deduplicated), or with
    the gold judge (``mode="gold"``: pure Python, no worker, no timeout)."""
    if mode == "gold":
        from cooper.verify.gold import gold_verdict

        if len(completions) != len(references):
            raise ValueError(f"{len(completions)} completions but {len(references)} references")
        return [Verdict(*gold_verdict(completion_text(c), completion_text(r)))
                for c, r in zip(completions, references, strict=True)]
    return default_verifier().verify_batch(completions, references, mode=mode,
                                           timeout_s=timeout_s)
