"""The records of an OpenAI-compatible endpoint: its settings, one request's outcome, counters.

Apart from the client (:mod:`cooper.infra.endpoint`) so that code which only configures an
endpoint or reads its results (argument parsing, model specs, collected rows) does not load the
client and its HTTP stack.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from cooper.errors import UserError

# Why a request failed. "refused": no HTTP answer at all (connection refused, reset or dropped).
FAILURE_KINDS = ("refused", "timeout", "http_5xx", "http_429", "http_4xx", "malformed", "empty",
                 "endpoint_down")
# Worth another attempt: the same request may well succeed a moment later.
RETRYABLE = frozenset({"refused", "timeout", "http_5xx", "http_429", "malformed", "empty"})
# The server is not answering at all: what the circuit breaker counts. A 429 or a bad body
# proves the server is alive, so those do not open the breaker.
UNREACHABLE = frozenset({"refused", "timeout", "http_5xx"})
DUMMY_KEY = "not-needed"  # local servers ignore the key, but the SDK insists on one


@dataclass(frozen=True)
class EndpointConfig:
    """Where an OpenAI-compatible endpoint is and how hard to try it."""

    base_url: str
    """the server's OpenAI-compatible base URL, e.g. http://127.0.0.1:8000/v1"""
    model: str
    """the model name the server expects"""
    api_key_env: str = "OPENAI_API_KEY"
    """environment variable holding the API key (unset: a dummy key, fine for local servers)"""
    concurrency: int = 8
    """requests in flight at once"""
    timeout_s: float = 60.0
    """deadline of one attempt, in seconds"""
    max_retries: int = 3
    """further attempts after the first, for transient failures"""
    backoff_base_s: float = 0.5
    """first retry waits about this long, doubling each time"""
    backoff_max_s: float = 30.0
    """longest single backoff wait"""
    max_retry_after_s: float = 120.0
    """a longer Retry-After ends the request as http_429"""
    breaker_failures: int = 5
    """consecutive unreachable attempts that open the breaker"""
    breaker_cooldown_s: float = 30.0
    """how long the open breaker fails calls at once before it lets one probe through"""
    seed: int | None = None
    """seed of the backoff jitter (None: random)"""

    def __post_init__(self):
        if not self.base_url.startswith(("http://", "https://")):
            raise UserError(f"endpoint URL must start with http:// or https://, got "
                            f"'{self.base_url}' (e.g. http://127.0.0.1:8000/v1)")
        if not self.model:
            raise UserError("endpoint model name is empty; pass the name the server serves")
        if not self.api_key_env or not self.api_key_env.replace("_", "").isalnum():
            raise UserError(f"api_key_env must be an environment variable NAME such as "
                            f"OPENAI_API_KEY, got '{self.api_key_env[:3]}...' (never the key)")
        for name in ("concurrency", "breaker_failures"):
            if getattr(self, name) < 1:
                raise UserError(f"endpoint {name} must be >= 1, got {getattr(self, name)}")
        if self.max_retries < 0:
            raise UserError(f"endpoint max_retries must be >= 0, got {self.max_retries}")
        for name in ("timeout_s", "backoff_base_s", "backoff_max_s", "max_retry_after_s",
                     "breaker_cooldown_s"):
            if not getattr(self, name) > 0:
                raise UserError(f"endpoint {name} must be > 0, got {getattr(self, name)}")


@dataclass(frozen=True)
class ChatResult:
    """The outcome of one chat request: text, or why there is none."""

    text: str | None
    """the reply's content, None when the request failed"""
    failure: str | None = None
    """one of FAILURE_KINDS, None on success"""
    detail: str = ""
    """a short human reason for a failure (scrubbed of the key)"""
    attempts: int = 0
    """HTTP attempts made (0: rejected by the open breaker)"""
    num_tokens: int | None = None
    """completion tokens, when the server reports usage"""
    finish_reason: str | None = None
    """as the server reports it ('stop', 'length', ...)"""

    @property
    def ok(self) -> bool:
        return self.failure is None


@dataclass
class EndpointStats:
    """Counters of one endpoint since it was built."""

    requests: int = 0
    """chat calls"""
    attempts: int = 0
    """HTTP requests sent"""
    retries: int = 0
    """attempts after a failed one"""
    succeeded: int = 0
    failed: int = 0
    """calls that ended without text"""
    failures: Counter[str] = field(default_factory=Counter)
    """failed calls, by final kind"""
    attempt_failures: Counter[str] = field(default_factory=Counter)
    """failed attempts, by kind"""
    breaker_opened: int = 0
    breaker_probes: int = 0
    breaker_rejected: int = 0
    """calls answered endpoint_down without a request"""

    def snapshot(self) -> EndpointStats:
        return EndpointStats(self.requests, self.attempts, self.retries, self.succeeded,
                             self.failed, Counter(self.failures), Counter(self.attempt_failures),
                             self.breaker_opened, self.breaker_probes, self.breaker_rejected)

    def metrics(self, prefix: str = "endpoint") -> dict[str, int]:
        """Flat, namespaced counters for logs and JSON (``endpoint/retries``, ...)."""
        out = {f"{prefix}/{k}": getattr(self, k) for k in (
            "requests", "attempts", "retries", "succeeded", "failed", "breaker_opened",
            "breaker_probes", "breaker_rejected")}
        out.update({f"{prefix}/failures/{k}": v for k, v in sorted(self.failures.items())})
        out.update({f"{prefix}/attempt_failures/{k}": v
                    for k, v in sorted(self.attempt_failures.items())})
        return out
