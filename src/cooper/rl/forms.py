"""Reachable-form pairs cut from a step's own right rollouts (``rm_update.rollout_forms``).

A judge that errs on a form (it calls every answer in words right, or a reply with nothing in
it) leaves that form to the reward model alone, and a policy finds it: where the rule cannot
read an answer, only the reward model stands between a wrong answer in that form and its pay.
The pairs here teach, every update, that the form alone never decides the score, before a judge
asked about it can teach the opposite. They need no template and no judge: each is cut from a
rollout the step labelled right (the rule's positive, or the judge's after its "yes" was
checked), so they hold for any dataset and any answer type:

- ``answer_alone``: the right final answer boxed alone, against its wrong twin boxed alone
  (:func:`cooper.labelling.counterfactual.make_twin`: one change in the answer's own text,
  certified not equivalent to it): the form where only the value tells right from wrong;
- ``spelling``: for an integer answer, the right value boxed alone in another writing against
  each of its slips, its last or its tens digit one off (digits as words, words as digits, in a
  drawn case: ``\\boxed{Seventy-Two}`` against ``\\boxed{Sixty-Two}``, ``Seventy-One``...): a
  policy reaches another spelling in one step, and where the rule cannot read it and a judge
  errs on it, no right answer in that writing is ever confirmed, so without these pairs nothing
  teaches that its value decides. Boxed alone, only the value tells right from wrong, so it is
  the form a reward model learns last: one slip a rollout left it paying 45% of the sums'
  wrong answers in words (a validation seed, docs/experiment_blind_history.md), so each right
  answer meets all of its slips, and one of them once more in the rollout's own working;
- ``hedge``: the rollout against itself with its final answer replaced by a hedge naming the
  right answer and the twin (``7 or 8``, in either order);
- an answer-free cut against the rollout, one kind drawn per rollout (:data:`ANSWER_FREE`): its
  opening line alone (``opener``), its working cut before the final answer (``cut``), its
  final answer emptied (``emptied``: ``\\boxed{}``), its last character alone
  (``punctuation``), the question written back (``question``), or nothing (``empty``). No
  reply without an answer is right, whatever a judge says of it (Master-RM's answer-free
  negatives; the robustness suite measures such replies with strings of its own, so what it
  measures is not what is trained here).

A rollout whose answer has no certified twin gives only its answer-free pair. Pure functions of
the rollouts and a seeded ``random.Random``.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence

from cooper.labelling.counterfactual import make_twin
from cooper.types import Pair, Rollout
from cooper.verify.extraction import find_answer
from cooper.verify.gold import MAX_WORDS, in_words, read_integer

ANSWER_FREE = ("opener", "cut", "emptied", "punctuation", "question", "empty")
FORM_KINDS = ("answer_alone", "spelling", "hedge", *ANSWER_FREE)
_CASES = (str.lower, str.upper, str.title, str.capitalize)
# a spelling pair's wrong values: a carry missed or added, or one off. rm-check's measurement
# (cooper.experiment.reachable_forms.SLIPS) keeps its own copy on purpose: a change to what is
# trained must not move what measures it
SLIPS = (-10, -1, 1, 10)
SOURCE = "form:"  # each pair's negative_source is SOURCE + its kind (counted as rm/pairs_forms)
_LEAD_OUT = re.compile(r"(?:\\boxed\{|\\fbox\{|\$+|\\\(|\\\[|\*\*|\s)+$")


def answer_free(completion: str, question: str, kind: str) -> str | None:
    """``completion`` cut to a reply with no final answer, of ``kind`` (:data:`ANSWER_FREE`);
    None where the cut is not answer-free or says nothing new (a one-line reply has no opener
    apart from itself)."""
    span = find_answer(completion, "strict")
    if kind == "empty":
        text = ""
    elif kind == "question":
        text = question.strip()
    elif kind == "punctuation":
        stripped = completion.rstrip()
        text = stripped[-1] if stripped and not stripped[-1].isalnum() else "."
    elif kind == "opener":
        first = completion.strip().split("\n", 1)[0]
        text = re.split(r"(?<=[.!?:])\s", first, maxsplit=1)[0].strip()
    elif span is None:
        return None
    elif kind == "cut":  # the working up to the final answer, its lead-in left dangling
        text = _LEAD_OUT.sub("", completion[:span.start]).rstrip()
    elif kind == "emptied":
        text = completion[:span.start] + completion[span.end:]
    else:
        raise ValueError(f"kind must be one of {', '.join(ANSWER_FREE)}, got {kind!r}")
    if text == completion or find_answer(text, "strict") is not None:
        return None
    return text


def spelled(right: str, rng: random.Random) -> list[tuple[str, str]]:
    """A right integer answer in another writing than ``right``'s against each of its slips in
    that writing, one drawn case for all (digits as words, words as digits): the right value
    with its last or its tens digit one off (a slip or a missed carry, :data:`SLIPS`), so that
    only the value tells them apart; none where ``right`` is not an integer or words cannot
    write it."""
    a = read_integer(right)
    if a is None or abs(a) + 10 > MAX_WORDS:
        return []
    wrongs = [a + d for d in SLIPS if (a + d < 0) == (a < 0) and a + d != 0]
    if re.search(r"\d", right):  # digits: in words, in a drawn case
        case = rng.choice(_CASES)
        return [(case(in_words(a)), case(in_words(b))) for b in wrongs]
    return [(str(a), str(b)) for b in wrongs]


def positive_forms(p: Rollout, rng: random.Random) -> list[Pair]:
    """The form pairs of one right rollout ``p``: its answer alone against its twin alone, its
    value in another writing against each slip (an integer), and its hedge against it (where a
    twin is certified), and one answer-free cut against it."""
    def pair(positive: str, negative: str, kind: str) -> Pair:
        return Pair(p.problem_id, p.question, p.reference, positive, negative, SOURCE + kind)

    out = []
    twin = make_twin(p.completion, p.reference, question=p.question)
    span = find_answer(p.completion, "strict")
    if twin.text is not None and twin.answer is not None and span is not None:
        right = p.completion[span.start:span.end]
        out.append(pair(f"\\boxed{{{right}}}", f"\\boxed{{{twin.answer}}}", "answer_alone"))
        other = spelled(right, rng)
        out += [pair(f"\\boxed{{{r}}}", f"\\boxed{{{w}}}", "spelling") for r, w in other]
        if other:  # and in the rollout's own working: the boxed value still decides
            r, w = rng.choice(other)
            out.append(pair(*(p.completion[:span.start] + x + p.completion[span.end:]
                              for x in (r, w)), "spelling"))
        named = [right, twin.answer]
        rng.shuffle(named)
        hedge = p.completion[:span.start] + " or ".join(named) + p.completion[span.end:]
        out.append(pair(p.completion, hedge, "hedge"))
    kinds = list(ANSWER_FREE)
    rng.shuffle(kinds)
    for kind in kinds:  # the first kind this rollout can be cut to
        cut = answer_free(p.completion, p.question, kind)
        if cut is not None:
            out.append(pair(p.completion, cut, kind))
            break
    return out


def rollout_form_pairs(positives: Sequence[Rollout], n: int, rng: random.Random) -> list[Pair]:
    """Up to ``n`` form pairs from the step's right rollouts ``positives``, each pair once, the
    budget shared by the forms in turn (the answer alone, another spelling, a hedge, a reply
    with no answer: one of each, then again), each form's pairs taken one problem after another
    in a seeded order (a problem's second right rollout only once every problem gave its first).

    Why shared: every right rollout gives an answer-alone, a hedge and an answer-free pair, but
    only an integer answer gives spelling pairs, so taken rollout by rollout the forms every
    rollout gives crowd out the rest. Why one problem after another: right rollouts often share
    a problem and an answer, whose answer-alone and spelling pairs are then the same strings.
    (On validation seed 42 the two took case or spelling from 7.3% to 2.9% paid at the end,
    and left the answer alone in words where it was: docs/experiment_blind_history.md.)
    ``positives`` must be the same on every process (the caller shards)."""
    if n <= 0:
        return []
    by_problem: dict[str, list[Rollout]] = {}
    for p in {(p.problem_id, p.completion): p for p in positives}.values():
        by_problem.setdefault(p.problem_id, []).append(p)
    groups = list(by_problem.values())
    rng.shuffle(groups)
    for g in groups:
        rng.shuffle(g)
    pool = [g[i] for i in range(max(map(len, groups), default=0)) for g in groups if i < len(g)]
    queues: dict[str, list[Pair]] = {}  # per form, in the pool's order, each pair once
    seen: set[tuple[str, str, str]] = set()
    for p in pool[:n]:  # each rollout gives at least one pair: n of them are enough
        for q in positive_forms(p, rng):
            if (key := (q.problem_id, q.positive, q.negative)) not in seen:
                seen.add(key)
                kind = q.negative_source.removeprefix(SOURCE)
                queues.setdefault("answer_free" if kind in ANSWER_FREE else kind, []).append(q)
    order = [queues[k] for k in ("answer_alone", "spelling", "hedge", "answer_free") if k in queues]
    pairs: list[Pair] = []
    for i in range(max(map(len, order), default=0)):
        pairs += [q[i] for q in order if i < len(q)]
    return pairs[:n]
