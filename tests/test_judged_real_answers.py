"""``reward.mode=judged`` through the TRL drop-in on math500-style answers (fractions, radicals,
intervals, tuples), against a judge that is a real OpenAI-compatible server on 127.0.0.1 and
errs as LLM judges do: it calls right a reply with no final answer, and any answer in the form
it favours (``\\dfrac``). Its fooled "yes" must be caught (the twin is called right too, or the
reply states no answer) and counted in the logged metrics; its right "yes" on an answer the rule
rejects (an interval written as an inequality) must reach the reward model's update."""

from __future__ import annotations

import re

import pytest

from openai_server import ChatRequest, OpenAIServer

pytestmark = pytest.mark.smoke  # the drop-in on a tiny reward model, over real HTTP

# (reference, answer) pairs the judge knows to be equivalent besides the identical ones: an
# interval written as an inequality, which the rule (math-verify) rejects
RIGHT_FORMS = {("(3,4]", "3 < \\lambda \\leq 4")}
FAVOURED = "\\dfrac"


def fields(request: ChatRequest) -> tuple[str, str]:
    """The reference answer and the solution of a judge's prompt."""
    text = request.last_user
    got = [re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, re.S)
           for tag in ("reference_answer", "solution")]
    assert all(got), f"not a judge's prompt: {text[:300]}"
    return got[0].group(1), got[1].group(1)


def erring_judge(request: ChatRequest) -> str:
    """Right on what it reads, but fooled by a reply with no answer and by its favoured form."""
    reference, solution = fields(request)
    found = re.findall(r"\\boxed\{(.*)\}", solution)
    answer = found[-1].strip() if found else None
    right = (answer is None or FAVOURED in answer or answer == reference
             or (reference, answer) in RIGHT_FORMS)
    return f"Checked.\nVERDICT: {'YES' if right else 'NO'}"


def solution(answer: str | None) -> str:
    return ("Let me think about the areas first." if answer is None
            else f"Working it through.\nSo the answer is \\boxed{{{answer}}}.")


# problem -> (reference, the answers sampled for it; None: a reply with no final answer)
BATCH = {
    "fraction": ("\\frac{1}{8}", ["\\frac{1}{8}", "\\dfrac{1}{7}", None, "\\frac{1}{9}"]),
    "interval": ("(3,4]", ["3 < \\lambda \\leq 4", "(3,4)", "3 < \\lambda \\leq 5", "(3,5]"]),
    "tuple": ("(6,31,-1)", ["(6,31,-1)", "(6,31,1)", "\\dfrac{6}{1}, 31, 1", "(6,30,-1)"]),
    "radical": ("\\frac{\\sqrt{21}}{5}", ["\\frac{\\sqrt{21}}{5}", "\\sqrt{21}",
                                          "\\dfrac{\\sqrt{21}}{4}", "\\frac{\\sqrt{22}}{5}"]),
}


def test_a_fooled_yes_is_caught_and_counted_and_a_right_yes_reaches_the_update(tmp_path):
    from cooper.experiment.testbed import tiny_arith_models
    from cooper.rl import CooperRewardFunction
    from cooper.verify.verifier import verify_batch

    texts = [(problem, ref, solution(a)) for problem, (ref, answers) in BATCH.items()
             for a in answers]
    rule = verify_batch([t for *_, t in texts], [r for _, r, _ in texts], mode="strict")
    rejected_right = solution("3 < \\lambda \\leq 4")
    assert not rule[[t for *_, t in texts].index(rejected_right)].correct  # the rule's miss

    models = tiny_arith_models()
    with OpenAIServer(erring_judge) as server:
        fn = CooperRewardFunction(models / "reward", mode="judged", replay=0,
                                  judge=f"api:judge-model@{server.url}", judge_budget=1.0,
                                  judge_threshold=0.0, id_column="problem_id")
        updates: list[tuple[list, list]] = []
        step = fn.cooper.updater.step
        fn.cooper.updater.step = lambda pos, neg, **kw: updates.append((pos, neg)) or step(
            pos, neg, **kw)
        logged: dict[str, float] = {}
        fn(prompts=[[{"role": "user", "content": f"Problem {p}?"}] for p, _, _ in texts],
           completions=[[{"role": "assistant", "content": t}] for *_, t in texts],
           reference=[r for _, r, _ in texts], problem_id=[p for p, _, _ in texts],
           log_metric=lambda k, v: logged.setdefault(k, v))
    # each fooled "yes" in the favoured form was checked on its twin, called right too: doubted
    assert logged["judge/doubted"] == 3 and logged.get("judge/untwinnable", 0) == 0
    # the "yes" on a reply with no final answer is taught as "no"
    assert logged["judge/overruled"] == 1
    assert logged["judge/twins"] >= 4  # three fooled, one right: each "yes" with an answer
    # the right "yes" on the rule's miss reached the update as a positive; no fooled one did
    assert len(updates) == 1 and logged["rm/updated"] == 1.0
    positives = {t.completion for t in updates[0][0]}
    negatives = {t.completion for t in updates[0][1]}
    assert rejected_right in positives
    assert not any(FAVOURED in p or "Let me think" in p for p in positives)
    # and the forms cut from the right rollouts came with it: an answer alone against its twin
    assert logged["rm/pairs_forms"] > 0
    assert any(n.startswith("\\boxed{") for n in negatives)
