"""A real OpenAI-compatible chat-completions server on 127.0.0.1, with injectable faults.

Tests of anything that talks to an endpoint (data collection, the judge, the trainer's
assistant) run against this server over real HTTP instead of a mocked client, so the client's
timeouts, retries, error mapping and connection handling are exercised for real.

    from openai_server import OpenAIServer

    with OpenAIServer(reply=lambda req: "so \\\\boxed{4}") as server:
        endpoint = Endpoint(EndpointConfig(server.url, model="test"))
        server.script("http_500", "http_429")   # the next two chat requests fail so, in order
        server.fault_rate = 0.1                 # then 10% of requests fail at random (seeded)
        ...
        assert server.served["http_500"] == 1

It speaks ``POST /v1/chat/completions`` and ``GET /v1/models``. Faults (:data:`FAULTS`):

- ``refused``: the connection is closed without an answer (to see a true "connection refused",
  :meth:`OpenAIServer.stop` the server, or use :func:`unused_port_url`);
- ``http_500``: status 500 with a JSON error body;
- ``http_429``: status 429 with a ``Retry-After`` header (``retry_after``, seconds);
- ``slow``: the normal reply, sent after ``slow_s`` seconds (set it past the client's timeout);
- ``malformed``: status 200, ``application/json``, a truncated JSON body;
- ``empty``: status 200, a well-formed completion whose content is ``""``.

A scripted fault (:meth:`script`) takes precedence; otherwise each chat request fails with
probability ``fault_rate``, the kind drawn uniformly from ``fault_kinds``, from a generator
seeded with ``seed`` (so a test's fault pattern is repeatable for a given request order).
The reply text comes from ``reply(request) -> str`` (default: an echo of the last user message),
so a test can play a judge or an assistant. With ``api_key`` set, a request without
``Authorization: Bearer <api_key>`` gets a 401.
"""

from __future__ import annotations

import json
import random
import socket
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = ("refused", "http_500", "http_429", "slow", "malformed", "empty")


@dataclass(frozen=True)
class ChatRequest:
    """One chat-completions request as the server received it."""

    model: str
    messages: list[dict[str, Any]]
    temperature: float | None = None
    top_p: float | None = None
    max_tokens: int | None = None
    seed: int | None = None
    authorization: str | None = None  # the raw header, so tests can check what was sent
    received_at: float = field(default=0.0, compare=False)  # time.monotonic()

    @property
    def last_user(self) -> str:
        users = [m.get("content", "") for m in self.messages if m.get("role") == "user"]
        return str(users[-1]) if users else ""


def echo(request: ChatRequest) -> str:
    """The default reply: the last user message, quoted."""
    return f"you said: {request.last_user}"


def unused_port_url() -> str:
    """A base URL on 127.0.0.1 where nothing listens (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


class OpenAIServer:
    """A threaded HTTP server speaking the OpenAI chat-completions API, with fault injection."""

    def __init__(self, reply: Callable[[ChatRequest], str] = echo, *, model: str = "test-model",
                 fault_rate: float = 0.0, fault_kinds: tuple[str, ...] = FAULTS, seed: int = 0,
                 slow_s: float = 2.0, retry_after: float = 0.1, api_key: str | None = None):
        unknown = set(fault_kinds) - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown fault kinds {sorted(unknown)}; known: {FAULTS}")
        self.reply, self.model = reply, model
        self.fault_rate, self.fault_kinds = fault_rate, tuple(fault_kinds)
        self.slow_s, self.retry_after, self.api_key = slow_s, retry_after, api_key
        self.requests: list[ChatRequest] = []  # every chat request received, faulted ones too
        self.served: Counter[str] = Counter()  # outcome per chat request: "ok" or a fault kind
        self._rng = random.Random(seed)
        self._script: deque[str] = deque()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = 0  # chosen on first start, kept across restarts so the URL stays valid

    # ------------------------------------------------------------------ control

    @property
    def url(self) -> str:
        """The base URL to give a client, e.g. ``http://127.0.0.1:PORT/v1``."""
        if not self.port:
            raise RuntimeError("server not started")
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> OpenAIServer:
        """Listen (again) on the same port; returns self."""
        if self._httpd is not None:
            return self
        self._stopping.clear()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", self.port), _handler_for(self))
        self._httpd.daemon_threads = True
        self.port = self._httpd.server_address[1]
        self._thread = threading.Thread(target=self._httpd.serve_forever, args=(0.05,),
                                        name="openai-test-server",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening: from now on connections to :attr:`url` are refused."""
        if self._httpd is None:
            return
        self._stopping.set()  # wakes handlers sleeping in a "slow" fault
        self._httpd.shutdown()
        self._httpd.server_close()
        assert self._thread is not None
        self._thread.join(timeout=5)
        self._httpd = self._thread = None

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def script(self, *faults: str) -> None:
        """The next chat requests fail with these faults, in order ("ok" lets one through)."""
        for f in faults:
            if f not in FAULTS and f != "ok":
                raise ValueError(f"unknown fault {f!r}; known: {FAULTS} or 'ok'")
        with self._lock:
            self._script.extend(faults)

    def fail_next(self, fault: str, k: int = 1) -> None:
        """The next ``k`` chat requests fail with ``fault``."""
        self.script(*[fault] * k)

    def reset(self) -> None:
        """Forget received requests, counts and any remaining script."""
        with self._lock:
            self.requests.clear()
            self.served.clear()
            self._script.clear()

    # ------------------------------------------------------------------ request handling

    def _next_fault(self) -> str | None:
        with self._lock:
            if self._script:
                f = self._script.popleft()
                return None if f == "ok" else f
            if self.fault_rate > 0 and self._rng.random() < self.fault_rate:
                return self._rng.choice(self.fault_kinds)
            return None

    def _record(self, request: ChatRequest, outcome: str) -> None:
        with self._lock:
            self.requests.append(request)
            self.served[outcome] += 1


def _handler_for(server: OpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real servers do

        def log_message(self, *args) -> None:  # tests read outcomes from server.served
            pass

        def _send_json(self, status: int, body: Any, headers: dict[str, str] | None = None,
                       raw: bytes | None = None) -> None:
            data = raw if raw is not None else json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            try:
                self.wfile.write(data)
            except OSError:  # the client gave up (timeout) and closed the socket
                pass

        def do_GET(self) -> None:
            if self.path.rstrip("/") == "/v1/models":
                self._send_json(200, {"object": "list", "data": [
                    {"id": server.model, "object": "model", "created": 0, "owned_by": "test"}]})
            else:
                self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            if self.path.rstrip("/") != "/v1/chat/completions":
                self._send_json(404, {"error": {"message": "not found", "type": "not_found"}})
                return
            try:
                body = json.loads(raw)
                request = ChatRequest(
                    model=body["model"], messages=body["messages"],
                    temperature=body.get("temperature"), top_p=body.get("top_p"),
                    max_tokens=body.get("max_tokens"), seed=body.get("seed"),
                    authorization=self.headers.get("Authorization"),
                    received_at=time.monotonic())
            except (ValueError, KeyError, TypeError) as e:
                self._send_json(400, {"error": {"message": f"bad request: {e}",
                                                "type": "invalid_request_error"}})
                return
            if server.api_key is not None and request.authorization != f"Bearer {server.api_key}":
                server._record(request, "unauthorized")
                self._send_json(401, {"error": {"message": "invalid api key",
                                                "type": "invalid_request_error"}})
                return
            fault = server._next_fault()
            server._record(request, fault or "ok")
            if fault == "refused":
                # drop the connection without a byte of answer
                self.close_connection = True
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                return
            if fault == "http_500":
                self._send_json(500, {"error": {"message": "injected server error",
                                                "type": "server_error"}})
                return
            if fault == "http_429":
                self._send_json(429, {"error": {"message": "injected rate limit",
                                                "type": "rate_limit_exceeded"}},
                                headers={"Retry-After": f"{server.retry_after:g}"})
                return
            if fault == "malformed":
                self._send_json(200, None, raw=b'{"id": "x", "choices": [{"message": {"conte')
                return
            if fault == "slow" and server._stopping.wait(server.slow_s):
                return  # server stopping: do not answer
            text = "" if fault == "empty" else server.reply(request)
            self._send_json(200, {
                "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion",
                "created": int(time.time()), "model": request.model,
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": text}}],
                "usage": {"prompt_tokens": 0, "completion_tokens": len(text.split()),
                          "total_tokens": len(text.split())}})

    return Handler


def rewrite_reply(request: ChatRequest) -> str:
    """Plays the trainer's assistant: the solution between the prompt's markers with its final
    answer changed by rule (see :data:`cooper.rl.negatives.ASSISTANT_TEMPLATE`)."""
    import re

    from cooper.data.perturb import rewrite_final_answer

    text = request.last_user
    solution = re.search(r"<<<SOLUTION\n(.*)\nSOLUTION>>>", text, re.S)
    reference = re.search(r"The correct final answer is (.*?); yours must differ", text, re.S)
    if not (solution and reference):
        return ""
    rng = random.Random(request.seed)
    return rewrite_final_answer(solution.group(1), reference.group(1), rng) or ""


if __name__ == "__main__":
    # A stand-in for a remote assistant, e.g. for the step benchmark's endpoint mode:
    #   python tests/openai_server.py --port 8123 --delay 10 --reply rewrite
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free one)")
    p.add_argument("--delay", type=float, default=0.0, help="seconds before every reply")
    p.add_argument("--reply", choices=("echo", "rewrite"), default="echo")
    a = p.parse_args()
    srv = OpenAIServer({"echo": echo, "rewrite": rewrite_reply}[a.reply], slow_s=a.delay,
                       fault_rate=1.0 if a.delay > 0 else 0.0, fault_kinds=("slow",))
    srv.port = a.port
    srv.start()
    print(srv.url, flush=True)
    threading.Event().wait()
