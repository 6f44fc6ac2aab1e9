"""The trainer's endpoint assistant against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import re
import time

import pytest

from conftest import run_cli
from openai_server import OpenAIServer, unused_port_url
from test_train_smoke import metrics, tiny_args


@pytest.fixture(scope="module")
def arith():
    from cooper.synthetic import tiny_arith_models

    return tiny_arith_models()


def wrong_solution(delay_s: float = 0.0):
    """Play the assistant: restate the problem with a final answer one more than the correct."""
    def reply(request) -> str:
        time.sleep(delay_s)
        m = re.search(r"correct final answer is (-?\d+)", request.last_user)
        wrong = int(m.group(1)) + 1 if m else 1
        return f"I add the numbers and get {wrong}. The answer is \\boxed{{{wrong}}}."
    return reply


def endpoint_args(arith, out, url, *extra):
    return tiny_args(arith, out, "cooper", "assistant.backend=endpoint",
                     f"assistant.base_url={url}", "assistant.model=test-model",
                     "assistant.timeout_s=5", "assistant.max_retries=1", "max_steps=3", *extra)


def steps_with_pairs(out):
    return [r for r in metrics(out) if "loss" in r and r["rm/positives"] > 0]


def test_endpoint_assistant_writes_the_negatives(arith, tmp_path):
    with OpenAIServer(reply=wrong_solution()) as server:
        run_cli(*endpoint_args(arith, tmp_path, server.url))
        asked = [r for r in server.requests if "<<<SOLUTION" in r.last_user]
    rows = steps_with_pairs(tmp_path)
    assert rows and asked
    assert sum(r["rm/valid_negatives"] for r in rows) == sum(r["rm/pairs"] for r in rows) > 0
    assert all(r["rm/fallback_negatives"] == 0 for r in rows)
    assert rows[-1]["assistant/succeeded"] == len(asked)


def test_negatives_overlap_the_policy_update(arith, tmp_path):
    # every assistant reply takes 1 s; the trainer keeps training meanwhile
    with OpenAIServer(reply=wrong_solution(delay_s=1.0)) as server:
        run_cli(*endpoint_args(arith, tmp_path, server.url))
    rows = steps_with_pairs(tmp_path)
    assert rows
    for r in rows:
        assert r["perf/negatives_total"] >= 1.0
        assert r["perf/negatives"] < r["perf/negatives_total"]  # part of it was hidden


def test_a_dead_endpoint_falls_back_and_is_counted(arith, tmp_path):
    run_cli(*endpoint_args(arith, tmp_path, unused_port_url()))
    rows = [r for r in metrics(tmp_path) if "loss" in r]
    assert len(rows) == 3  # training went on
    with_pairs = [r for r in rows if r["rm/positives"] > 0]
    assert with_pairs and sum(r["rm/fallback_negatives"] for r in with_pairs) > 0
    assert all(r["rm/valid_negatives"] == 0 for r in with_pairs)
    assert rows[-1]["assistant/failed"] > 0 and rows[-1]["assistant/succeeded"] == 0
