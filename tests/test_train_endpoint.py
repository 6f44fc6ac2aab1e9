"""The trainer's endpoint assistant against a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import re
import time

import pytest

from conftest import cli_env, run_cli
from openai_server import OpenAIServer, unused_port_url
from test_train_smoke import metrics, tiny_args

pytestmark = pytest.mark.smoke  # a whole command or training run on tiny models


@pytest.fixture(scope="module")
def arith():
    from cooper.experiment.testbed import tiny_arith_models

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


def _reference(request) -> int:
    return int(re.search(r"correct final answer is (-?\d+)", request.last_user).group(1))


class CorrectEveryThird:
    """A wrong solution, except for every third request answered: there the "negative" is
    correct. Decided by the order of the requests, not by the problems, so that it happens
    whatever problems the policy gets right."""

    def __init__(self):
        self.correct: set[int] = set()  # id() of the requests answered with the reference
        self.calls = 0

    def __call__(self, request) -> str:
        self.calls += 1
        ref = _reference(request)
        answer = ref if self.calls % 3 == 2 else ref + 1
        if answer == ref:
            self.correct.add(id(request))
        return f"Adding them gives {answer}. The answer is \\boxed{{{answer}}}."


@pytest.fixture(scope="module")
def disturbed(tmp_path_factory):
    """The tests' policy rebuilt from a disturbed start (another warm-start seed), with the same
    random reward model: what another machine's floating point could have built. A test whose
    premise is what the policy happens to produce must hold on it too."""
    import shutil

    from cooper.experiment.testbed import build_tests_policy, tiny_arith_models

    out = tmp_path_factory.mktemp("disturbed")
    build_tests_policy(out, seed=1)
    shutil.copytree(tiny_arith_models() / "reward", out / "reward")
    return out


@pytest.mark.parametrize("policy", ["shipped", "disturbed"])
def test_every_endpoint_fault_falls_back_is_counted_and_training_goes_on(policy, request,
                                                                         tmp_path):
    arith = request.getfixturevalue("arith" if policy == "shipped" else "disturbed")
    faults = ("refused", "http_500", "http_429", "slow", "malformed", "empty")
    reply = CorrectEveryThird()
    with OpenAIServer(reply=reply, slow_s=3, retry_after=0.1) as server:
        server.script(*faults)  # the first six requests fail, one of each kind, then it answers
        t0 = time.monotonic()
        # one request at a time and no retries: request i is the i-th the server saw. Four
        # prompts of four samples a step: a policy right on a third of them makes about 20
        # positives in 4 steps (each one request), well past the six scripted faults
        run_cli(*endpoint_args(arith, tmp_path, server.url, "assistant.timeout_s=1",
                               "assistant.max_retries=0", "assistant.concurrency=1",
                               "rollout.prompts_per_step=4",
                               "rm_update.positives_per_prompt=4", "max_steps=4"))
        took = time.monotonic() - t0
        answered = server.requests[len(faults):]
        served = dict(server.served)
    rows = [r for r in metrics(tmp_path) if "loss" in r]
    assert [r["step"] for r in rows] == [1, 2, 3, 4] and took < 120  # no deadlock, no crash
    # the premise: more positives (requests) than scripted faults, else nothing is answered
    positives = sum(r.get("rm/positives", 0) for r in rows)
    assert positives > len(faults), (
        f"premise broken: the {policy} policy made {positives} positives in 4 steps, not more "
        f"than the {len(faults)} scripted faults (its rollouts: "
        f"{[r['reward/rule_mean'] for r in rows]} right)")
    assert all(served.get(f) == 1 for f in faults) and answered, served
    last = rows[-1]
    # each fault counted by kind: "slow" ran past the timeout, a dropped connection is "refused"
    for kind in ("refused", "http_5xx", "http_429", "timeout", "malformed", "empty"):
        assert last[f"assistant/failures/{kind}"] == 1, kind
    assert last["assistant/failed"] == 6 and last["assistant/succeeded"] == len(answered)
    # a failed request, and a "negative" whose answer is the reference, both go to the fallback
    correct = sum(id(r) in reply.correct for r in answered)
    assert correct >= 1  # the correct "negative" was seen, and rejected
    rm = [r for r in rows if "rm/pairs" in r]
    assert sum(r["rm/valid_negatives"] for r in rm) == len(answered) - correct
    assert sum(r["rm/fallback_negatives"] + r["rm/dropped_pairs"] for r in rm) == 6 + correct
    assert sum(r["rm/positives"] for r in rm) == 6 + len(answered)


def test_a_failing_endpoint_is_not_hammered(arith, tmp_path):
    with OpenAIServer(reply=wrong_solution()) as server:
        server.fail_next("http_500", 10_000)  # it answers, always with an error
        run_cli(*endpoint_args(arith, tmp_path, server.url, "assistant.max_retries=3",
                               "assistant.concurrency=1", "max_steps=4"))
        sent = len(server.requests)
    rows = [r for r in metrics(tmp_path) if "loss" in r]
    last = rows[-1]
    assert len(rows) == 4 and sum(r["rm/fallback_negatives"] for r in rows if "rm/pairs" in r) > 0
    # the breaker opened after 5 consecutive failures; later requests were answered
    # "endpoint_down" at once instead of being sent (each would have cost 4 attempts)
    assert last["assistant/breaker_opened"] >= 1 and last["assistant/breaker_rejected"] > 0
    assert sent == last["assistant/attempts"] <= 5 + last["assistant/breaker_probes"]
    assert last["assistant/failures/endpoint_down"] == last["assistant/breaker_rejected"]


def test_a_planted_api_key_reaches_the_server_but_no_file_or_log(arith, tmp_path):
    key = "sk-cooper-planted-9f8e7d6c5b4a"
    out = tmp_path / "run"
    with OpenAIServer(reply=wrong_solution(), api_key=key, slow_s=3) as server:
        # error paths too: an error body or a retry must not echo the key
        server.script("http_500", "malformed", "refused", "http_429")
        proc = run_cli("--verbose", *endpoint_args(
            arith, out, server.url, "assistant.api_key_env=COOPER_TEST_ASSISTANT_KEY",
            "assistant.timeout_s=1", "save_steps=1", "report_to=tensorboard"),
            env=cli_env(COOPER_TEST_ASSISTANT_KEY=key))
        auth = {r.authorization for r in server.requests}
        served = dict(server.served)
    assert auth == {f"Bearer {key}"} and served.get("ok", 0) > 0  # it was really sent, and used
    assert "unauthorized" not in served
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.name == "metrics.jsonl" for p in files) and any("checkpoint-" in str(p) for p in files)
    leaked = [str(p) for p in files if key.encode() in p.read_bytes()]
    assert not leaked, f"the key was written to {leaked}"
    assert key not in proc.stdout and key not in proc.stderr
    assert "COOPER_TEST_ASSISTANT_KEY" in (out / "config.yaml").read_text()  # the name is kept
