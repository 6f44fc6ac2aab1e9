"""``examples/cooper_grpo_judged.py`` run as a user would, on tiny models, against a judge that is
a real OpenAI-compatible HTTP server on 127.0.0.1 (``tests/openai_server.py``).

The dataset is ``arith_2x1_compare``, whose comparisons (yes/no against a stored True/False) the
rule never reads, so the judge is asked. The run must ask it over HTTP, log what it asked
through TRL's logs, feed its labels to the reward model's update (with the reward model's own
training rows replayed), save its verdicts in every checkpoint, and, resumed, ask no answer to a
problem a second time.
"""

from __future__ import annotations

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import cli_env
from openai_server import ChatRequest, OpenAIServer

pytestmark = pytest.mark.smoke  # a whole training run on tiny models

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "cooper_grpo_judged.py"


def fields(request: ChatRequest) -> tuple[str, str, str]:
    """The problem, reference answer and solution of a judge's prompt."""
    text = request.last_user
    got = [re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
           for tag in ("problem", "reference_answer", "solution")]
    assert all(got), f"not a judge's prompt: {text[:300]}"
    problem, reference, solution = (m.group(1) for m in got)
    return problem, reference, solution


def boxed(solution: str) -> str | None:
    found = re.findall(r"\\boxed\{([^{}]*)\}", solution)
    return found[-1].strip() if found else None


def value(text: str) -> object:
    """What an answer says, as a judge reads it: 33 and thirty-three alike, yes and True."""
    from cooper.verify.gold import read_value

    v = read_value(text)
    return (type(v), v) if v is not None else text.strip().lower()


def judge_reply(request: ChatRequest) -> str:
    """A judge: YES when the solution's boxed answer says what the reference says."""
    _, reference, solution = fields(request)
    answer = boxed(solution)
    same = answer is not None and value(answer) == value(reference)
    return f"The final answer is {answer!r}.\nVERDICT: {'YES' if same else 'NO'}"


def asked_answer(request: ChatRequest) -> tuple[str, str, str]:
    """What a verdict depends on: the problem, its reference and the final answer as the rule
    extracts it (the whole solution where it extracts none), the judge's own key."""
    from cooper.verify.extraction import clean_answer, find_answer

    problem, reference, solution = fields(request)
    span = find_answer(solution)
    return problem, reference, clean_answer(span.text) if span else "\x00" + solution


def is_twin(request: ChatRequest, requests: list[ChatRequest]) -> bool:
    """Whether ``request`` asks about the wrong twin of another request's solution (the check of
    a "yes": cooper.labelling.counterfactual)."""
    from cooper.labelling.counterfactual import wrong_twin

    problem, reference, solution = fields(request)
    return any(wrong_twin(s, r) == solution for p, r, s in map(fields, requests)
               if p == problem and s != solution)


@pytest.fixture(scope="module")
def compare():
    from cooper.experiment.testbed import TINY_ARITH_COMPARE, tiny_arith_models

    return tiny_arith_models(name=TINY_ARITH_COMPARE)  # answers comparisons in yes/no


def run_example(compare: Path, out: Path, judge_url: str, replay: Path, *extra: str,
                steps: int) -> None:
    cmd = [sys.executable, str(EXAMPLE), "--judge", f"api:test-model@{judge_url}",
           "--policy", str(compare / "policy"), "--reward-model", str(compare / "reward"),
           "--replay-file", str(replay), "--judge-budget", "0.5",
           "--dataset", "arith_2x1_compare", "--limit", "4", "--num-generations", "4",
           "--batch-size", "16", "--max-completion-length", "64", "--max-steps", str(steps),
           "--save-steps", "1", "--output-dir", str(out), *extra]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=cli_env())
    assert proc.returncode == 0, proc.stderr[-4000:]


def log_history(checkpoint: Path) -> list[dict]:
    steps = json.loads((checkpoint / "trainer_state.json").read_text())["log_history"]
    return [r for r in steps if "loss" in r]


def test_the_judged_example_asks_the_judge_over_http_saves_and_resumes(compare, tmp_path):
    from cooper.data.synthetic import compare_triples

    replay = tmp_path / "rm_rows.jsonl"  # the reward model's own training rows, to replay
    replay.write_text("".join(json.dumps(t.to_json()) + "\n"
                              for t in compare_triples("train", 40, random.Random(0))))
    out = tmp_path / "run"
    with OpenAIServer(judge_reply) as server:
        run_example(compare, out, server.url, replay, steps=2)
        first = len(server.requests)
        steps = log_history(out / "checkpoint-2")
        assert [r["step"] for r in steps] == [1, 2]
        # the judge was asked over HTTP, within its budget, and TRL logged what it asked
        assert first > 0 and server.served == {"ok": first}
        assert sum(r["judge/asked"] for r in steps) == first
        for r in steps:
            # the budget caps the answers asked; each "yes" is checked on its twin, one call more
            # (reward.mode=judged checks every "yes")
            assert r["judge/asked"] - r["judge/twins"] <= 0.5 * 16
            assert r["judge/twins"] == r["judge/yes"] and r["judge/doubted"] == 0
            # the reward model was updated every step, 16 of its training rows replayed
            assert r["rm/updated"] == 1.0 and r["rm/pairs_replay"] == 16
        # its labels reached the update: a step that heard a verdict updated on its rollouts
        judged = [r for r in steps if r["judge/yes"] + r["judge/no"] > 0]
        assert judged and all(r["rm/pairs"] > r["rm/pairs_replay"] + r.get("rm/pairs_forms", 0)
                              for r in judged)
        # its verdicts are saved in every checkpoint, beside the reward model (a twin's is not:
        # it only checks a "yes")
        saved = json.loads((out / "checkpoint-2" / "judge.json").read_text())
        twins = sum(r["judge/twins"] for r in steps)
        assert saved["calls"] == first and len(saved["verdicts"]) == first - twins
        assert (out / "checkpoint-2" / "reward_model").is_dir()
        asked = [q for q in server.requests if not is_twin(q, server.requests)]
        assert len(asked) == first - twins
        answers = [judge_reply(q).endswith("YES") for q in asked]
        assert sorted(v for *_, v in saved["verdicts"]) == sorted(answers)

        # resumed for a third step: the verdicts come back, and no answer is asked twice
        run_example(compare, out, server.url, replay, "--resume", steps=3)
        resumed = log_history(out / "checkpoint-3")
        assert [r["step"] for r in resumed] == [1, 2, 3]
        assert len(server.requests) == first + resumed[-1]["judge/asked"]
        # four problems a step, the same four every step: answers judged before the resume
        # came back with the checkpoint and were free
        assert resumed[-1]["judge/cached"] > 0
        after = json.loads((out / "checkpoint-3" / "judge.json").read_text())
        assert after["calls"] == len(server.requests)
        assert {tuple(v[:2]) for v in saved["verdicts"]} <= {tuple(v[:2]) for v in after["verdicts"]}
        keys = [asked_answer(q) for q in server.requests if not is_twin(q, server.requests)]
        twice = {k for k in keys if keys.count(k) > 1}
        assert not twice, f"asked twice: {sorted(twice)[:3]}"
