"""The endpoint client against a real HTTP server on 127.0.0.1: faults, retries, breaker, threads."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from cooper.errors import UserError
from cooper.infra.endpoint import Endpoint, EndpointConfig, EndpointGenerator
from cooper.infra.generation import SamplingConfig
from cooper.infra.resilience import CircuitBreaker, parse_retry_after
from openai_server import OpenAIServer, unused_port_url

HI = [{"role": "user", "content": "hi"}]


def fast(url: str, **kw) -> EndpointConfig:
    """Short timeouts and waits so fault tests take milliseconds."""
    base = dict(timeout_s=1.0, max_retries=0, backoff_base_s=0.01, backoff_max_s=0.05,
                breaker_failures=100, breaker_cooldown_s=0.3, seed=0)
    return EndpointConfig(url, "test-model", **{**base, **kw})


@pytest.fixture
def server():
    with OpenAIServer(slow_s=2.5, retry_after=0.2) as s:
        yield s


def test_success_sends_the_sampling_settings_and_the_key_from_the_named_variable(server, monkeypatch):
    monkeypatch.setenv("MY_TEST_KEY", "sk-abc")
    with Endpoint(fast(server.url, api_key_env="MY_TEST_KEY")) as ep:
        r = ep.chat(HI, temperature=0.3, top_p=0.9, max_tokens=17, seed=5)
    assert r.ok and r.text == "you said: hi" and r.attempts == 1 and r.finish_reason == "stop"
    req = server.requests[0]
    assert (req.model, req.temperature, req.top_p, req.max_tokens, req.seed) == (
        "test-model", 0.3, 0.9, 17, 5)
    assert req.authorization == "Bearer sk-abc"
    assert ep.stats.succeeded == 1 and ep.stats.failed == 0


@pytest.mark.parametrize("fault, kind", [("refused", "refused"), ("http_500", "http_5xx"),
                                         ("http_429", "http_429"), ("slow", "timeout"),
                                         ("malformed", "malformed"), ("empty", "empty")])
def test_each_fault_ends_as_its_counted_failure_kind(server, fault, kind):
    server.fail_next(fault)
    with Endpoint(fast(server.url)) as ep:
        t0 = time.monotonic()
        r = ep.chat(HI)
        took = time.monotonic() - t0
    assert not r.ok and r.failure == kind and r.text is None and r.attempts == 1
    assert ep.stats.failures[kind] == 1 and ep.stats.attempt_failures[kind] == 1
    assert server.served[fault] == 1
    if fault == "slow":  # the deadline, not the server, ended the wait
        assert 0.95 < took < 2.2


def test_connection_refused_by_a_port_nobody_listens_on():
    with Endpoint(fast(unused_port_url(), max_retries=2)) as ep:
        r = ep.chat(HI)
    assert r.failure == "refused" and r.attempts == 3
    assert ep.stats.retries == 2 and ep.stats.attempt_failures["refused"] == 3


def test_transient_failures_are_retried_and_counted(server):
    server.script("http_500", "malformed", "empty")
    with Endpoint(fast(server.url, max_retries=3)) as ep:
        r = ep.chat(HI)
    assert r.ok and r.attempts == 4
    s = ep.stats
    assert (s.requests, s.attempts, s.retries, s.succeeded, s.failed) == (1, 4, 3, 1, 0)
    assert dict(s.attempt_failures) == {"http_5xx": 1, "malformed": 1, "empty": 1}
    assert len(server.requests) == 4


def test_retries_run_out(server):
    server.fail_next("http_500", 5)
    with Endpoint(fast(server.url, max_retries=2)) as ep:
        r = ep.chat(HI)
    assert r.failure == "http_5xx" and r.attempts == 3 and len(server.requests) == 3


def test_429_waits_what_retry_after_asks(server):
    server.script("http_429")
    with Endpoint(fast(server.url, max_retries=1, backoff_base_s=0.001)) as ep:
        r = ep.chat(HI)
    assert r.ok and r.attempts == 2
    gap = server.requests[1].received_at - server.requests[0].received_at
    assert gap >= 0.2  # the server's Retry-After, not the 1 ms backoff


@pytest.mark.serial
def test_429_asking_too_long_a_wait_fails_at_once(server):
    server.retry_after = 30
    server.script("ok", "http_429")
    with Endpoint(fast(server.url, max_retries=3, max_retry_after_s=1)) as ep:
        assert ep.chat(HI).ok  # a first request pays the client's one-time start-up, not timed
        t0 = time.monotonic()
        r = ep.chat(HI)
    assert r.failure == "http_429" and "30" in r.detail and r.attempts == 1
    assert time.monotonic() - t0 < 1  # no wait at all (the cap's wait alone would be 1 s)


def test_client_errors_are_not_retried(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "wrong")
    with OpenAIServer(api_key="right") as server, Endpoint(fast(server.url, max_retries=3)) as ep:
        r = ep.chat(HI)
    assert r.failure == "http_4xx" and "401" in r.detail and r.attempts == 1


def test_breaker_stops_hammering_a_dead_endpoint_and_recovers(server):
    server.fail_next("http_500", 10_000)
    cfg = fast(server.url, max_retries=3, breaker_failures=3, breaker_cooldown_s=0.4,
               concurrency=4)
    with Endpoint(cfg) as ep:
        results = ep.chat_many([HI] * 40)
        # K consecutive failures open it; at most concurrency-1 attempts were already in flight
        assert len(server.requests) <= 3 + 3
        assert all(not r.ok for r in results)
        assert sum(r.failure == "endpoint_down" for r in results) >= 30
        s = ep.stats
        assert s.breaker_opened == 1 and s.breaker_rejected >= 30 and ep.breaker_state == "open"

        # still dead after the cooldown: one probe, then open again
        time.sleep(0.45)
        hits = len(server.requests)
        results = ep.chat_many([HI] * 10)
        assert len(server.requests) == hits + 1
        assert ep.stats.breaker_probes == 1 and ep.stats.breaker_opened == 2

        # it answers again: the next probe closes the breaker and traffic flows
        server.reset()
        time.sleep(0.45)
        assert ep.chat(HI).ok and ep.breaker_state == "closed"
        assert all(r.ok for r in ep.chat_many([HI] * 5))
        assert ep.stats.breaker_probes == 2


def test_breaker_bookkeeping_with_a_fake_clock():
    now = [0.0]
    b = CircuitBreaker(threshold=2, cooldown_s=10, clock=lambda: now[0])
    b.record(False)
    assert b.allow() and b.state == "closed"
    b.record(True)  # success resets the count
    b.record(False)
    b.record(False)
    assert b.state == "open" and not b.allow()
    now[0] = 10.0
    assert b.allow() and b.state == "half_open" and not b.allow()  # one probe at a time
    b.record(False)
    assert b.state == "open" and b.opened == 2 and not b.allow()
    now[0] = 20.0
    assert b.allow()
    b.release_probe()  # a cancelled probe frees the slot
    assert b.allow()
    b.record(True)
    assert b.state == "closed" and b.allow() and b.probes == 3


def test_concurrency_limit_holds(server):
    active, peak, lock = [0], [0], threading.Lock()

    def reply(req):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.1)
        with lock:
            active[0] -= 1
        return "ok"

    server.reply = reply
    with Endpoint(fast(server.url, concurrency=3)) as ep:
        assert all(r.ok for r in ep.chat_many([HI] * 9))
    assert peak[0] == 3


def test_blocking_calls_work_from_threads_and_inside_a_running_event_loop(server):
    with Endpoint(fast(server.url)) as ep:
        async def inside_a_loop():
            # a blocking call where asyncio.run() would fail with "loop already running"
            blocking = ep.chat([{"role": "user", "content": "sync"}])
            awaited = await ep.achat([{"role": "user", "content": "async"}])
            return blocking, awaited

        blocking, awaited = asyncio.run(inside_a_loop())
        assert blocking.text == "you said: sync" and awaited.text == "you said: async"
        with ThreadPoolExecutor(4) as pool:
            texts = list(pool.map(lambda i: ep.chat([{"role": "user", "content": str(i)}]).text,
                                  range(8)))
        assert texts == [f"you said: {i}" for i in range(8)]
        # submit returns at once; the caller collects later
        futures = [ep.submit([{"role": "user", "content": f"f{i}"}]) for i in range(3)]
        assert [f.result(timeout=5).text for f in futures] == [f"you said: f{i}" for i in range(3)]
        assert ep.stats.requests == 13


def test_generator_protocol_seeds_samples_and_lists_failures(server):
    server.script("ok", "http_500")  # second sample of the first conversation fails
    # one request at a time, so "the second request" is that sample whatever the machine's load
    gen = EndpointGenerator(Endpoint(fast(server.url, concurrency=1)))
    out = gen.generate([HI, [{"role": "user", "content": "yo"}]],
                       SamplingConfig(n=2, temperature=1.0, max_new_tokens=9, seed=7))
    gen.endpoint.close()
    assert [len(x) for x in out] == [2, 2]
    assert out[0][0].text == "you said: hi" and out[0][0].failure is None
    assert out[0][1].text == "" and out[0][1].finish_reason == "error"
    assert out[0][1].failure.startswith("http_5xx")
    assert sorted(r.seed for r in server.requests) == [7, 7, 8, 8]
    assert {r.max_tokens for r in server.requests} == {9}


def test_the_key_never_reaches_results_stats_or_logs(server, monkeypatch, caplog):
    key = "sk-planted-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    caplog.set_level(logging.DEBUG)  # the SDK's and HTTP library's debug logs too
    server.script("http_500", "malformed", "refused")
    with Endpoint(fast(server.url, max_retries=3)) as ep:
        results = [ep.chat(HI), ep.chat(HI)]
        text = repr(results) + repr(ep.stats) + repr(ep.stats.metrics()) + repr(ep) + repr(
            ep.config)
    assert server.requests[0].authorization == f"Bearer {key}"  # it was really sent
    assert key not in text and key not in caplog.text


def test_retry_after_parsing():
    assert parse_retry_after({"retry-after": "2"}) == 2
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({"retry-after": "-1"}) is None
    from email.utils import formatdate

    later = parse_retry_after({"retry-after": formatdate(time.time() + 60, usegmt=True)})
    assert 55 < later <= 60


@pytest.mark.parametrize("bad", [dict(base_url="localhost:8000"), dict(model=""),
                                 dict(api_key_env="sk-this-is-a-key!"), dict(concurrency=0),
                                 dict(timeout_s=0), dict(max_retries=-1)])
def test_bad_settings_raise_a_user_error(bad):
    kw = dict(base_url="http://127.0.0.1:1/v1", model="m") | bad
    with pytest.raises(UserError) as e:
        EndpointConfig(**kw)
    assert "sk-this" not in str(e.value)


@pytest.mark.serial
def test_close_cancels_requests_in_flight_instead_of_hanging(server):
    server.slow_s = 5
    server.fail_next("slow")
    ep = Endpoint(fast(server.url, timeout_s=10))
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(ep.chat, HI)
        while not server.requests:
            time.sleep(0.01)
        t0 = time.monotonic()
        ep.close()
        with pytest.raises(BaseException) as e:
            pending.result(timeout=5)
    assert type(e.value).__name__ == "CancelledError" and time.monotonic() - t0 < 3
    assert ep.chat(HI).ok  # usable again after close
    ep.close()
