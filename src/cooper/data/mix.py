"""``cooper data build``: a labelled reward-model set with every kind of wrong, honestly labelled.

Takes a dataset's problems with gold solutions, a :class:`~cooper.config.data_mix.DataMixConfig`
(the label balance and a weight per kind) and, optionally, completions sampled from a local
model; hands on :class:`~cooper.types.LabelledTriple` rows with their ``kind`` and a
:class:`BuildSummary`.

How rows are made (all seeded, so the same settings give the same file):

1. **Targets.** ``n`` rows split into positives and negatives by ``positive_fraction``, and
   within each label into kinds by weight (largest remainders, so the counts sum exactly).
   A sampled kind gets at most the sampled completions of its verdict that exist; the rest of
   its share goes to the other kinds of its label, in proportion to their weights, and the
   summary says so (a model that writes no correct solution is normal on a CPU).
2. **Problems in a seeded order.** Each problem gives at most one positive and one negative,
   so a question appears on both sides and no question is a shortcut. Sampled completions are
   tried first on the problems that have them (they are the scarce kind); otherwise the next
   pending kind in a seeded order that applies to this problem is made.
3. **Honest labels.** Every row is checked with the verifier (strict mode, the one that picks
   Cooper's positives): a positive must verify as correct; a negative must be ``wrong`` or have
   ``no_answer`` (a timeout or error is not proof of wrongness). A candidate that fails is
   dropped and counted by kind and verdict, and its slot goes to the next problem. Problems
   whose gold solution does not verify are skipped and counted.

The kinds are documented in :mod:`cooper.config.data_mix`; the negatives are made by
:mod:`cooper.data.negative_kinds`, the positives' surface forms by :mod:`cooper.data.surface_forms`.
"""

from __future__ import annotations

import json
import logging
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cooper.config.data_mix import POSITIVE_KINDS, SAMPLED_KINDS, DataMixConfig
from cooper.data.negative_kinds import NEGATIVE_MAKERS, KindContext, MakeFn
from cooper.data.perturb import gold_solution, rewrite_final_answer
from cooper.data.surface_forms import in_form
from cooper.errors import UserError
from cooper.infra.files import write_atomic, write_json
from cooper.types import LabelledTriple, Problem, Triple
from cooper.verify.extraction import normalize_reference
from cooper.verify.verifier import Verdict, Verifier, default_verifier

log = logging.getLogger(__name__)

NEGATIVE_REASONS = ("wrong", "no_answer")  # verifier reasons that prove a negative wrong


def _positive(form: str) -> MakeFn:
    def make(p: Problem, gold: str, rng: random.Random, ctx: KindContext) -> str | None:
        # "original" is the text as shipped; "hashes" is the form without annotations; the
        # other two keep them half the time, so annotations never tell the label
        keep = form == "original" or (form in ("boxed", "answer_is") and rng.random() < 0.5)
        return in_form(gold, form, annotations=keep)
    return make


POSITIVE_MAKERS: dict[str, MakeFn] = {
    f"gold_{form}": _positive(form) for form in ("original", "hashes", "boxed", "answer_is")}


@dataclass
class KindSummary:
    """What happened to one kind: its target, the rows written, the candidates dropped."""

    label: int
    weight: float  # normalised weight within its label (0 when left out)
    target: int  # rows asked for after the sampled kinds' shortfall was moved
    rows: int = 0
    dropped: dict[str, int] = field(default_factory=dict)  # verifier reason -> candidates
    not_applicable: int = 0  # problems the kind could not be made for (nothing to change)


@dataclass
class BuildSummary:
    """Counts of one build, printed and saved beside the output as JSON."""

    dataset: str
    rows: int = 0
    positives: int = 0
    negatives: int = 0
    problems_used: int = 0
    skipped_problems: dict[str, int] = field(default_factory=dict)
    kinds: dict[str, KindSummary] = field(default_factory=dict)
    sampled: dict[str, int] = field(default_factory=dict)  # completions by verifier verdict
    notes: list[str] = field(default_factory=list)
    mix: dict[str, Any] = field(default_factory=dict)

    @property
    def dropped(self) -> int:
        return sum(sum(k.dropped.values()) for k in self.kinds.values())

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dropped": self.dropped}


def _split(total: int, weights: Mapping[str, float]) -> dict[str, int]:
    """``total`` split by ``weights`` with largest remainders (sums exactly; ties by order)."""
    if not weights:
        return {}
    exact = {k: total * w / sum(weights.values()) for k, w in weights.items()}
    counts = {k: int(v) for k, v in exact.items()}
    order = sorted(exact, key=lambda k: -(exact[k] - counts[k]))
    for k in order[:total - sum(counts.values())]:
        counts[k] += 1
    return counts


def targets(mix: DataMixConfig, n: int, available: Mapping[str, int] | None = None,
            notes: list[str] | None = None) -> dict[str, int]:
    """Rows per kind for ``n`` rows. ``available`` caps the sampled kinds at the number of
    problems with a usable sampled completion (None: no sampling); a capped kind's shortfall
    is split over the other kinds of its label by weight."""
    sampling = available is not None
    n_pos = round(n * mix.positive_fraction)
    out: dict[str, int] = {}
    for positive, total in ((True, n_pos), (False, n - n_pos)):
        weights = mix.weights(positive, sampling=sampling)
        capped: dict[str, int] = {}  # sampled kinds held at what exists
        while True:
            rest = {k: w for k, w in weights.items() if k not in capped}
            counts = {**_split(total - sum(capped.values()), rest), **capped}
            # a label may hold several sampled kinds: cap until none is over what exists
            over = [k for k in SAMPLED_KINDS if k in rest and available is not None
                    and counts[k] > available.get(k, 0)]
            if not over:
                break
            for kind in over:
                have = capped[kind] = available.get(kind, 0)
                if notes is not None:
                    notes.append(f"{kind}: {have} problem(s) with a usable sampled completion "
                                 f"for a target of {counts[kind]}; the other "
                                 f"{counts[kind] - have} row(s) go to the other kinds of its label")
            if not any(k not in capped for k in weights):
                raise UserError(f"{', '.join(over)}: only {sum(capped.values())} problem(s) have "
                                "a sampled completion that qualifies and no other kind of that "
                                "label has a weight; give another kind a weight")
        out.update(counts)
    return out


def check_size(n: int, n_problems: int, positive_fraction: float, where: str) -> None:
    """Fail at once when ``n`` rows cannot come from ``n_problems`` problems: each gives at most
    one positive and one negative, so a label's share of ``n`` must not exceed them. Without
    this an impossible ``n`` is found only after every problem was tried, and a huge one first
    allocates a slot per requested row (gigabytes)."""
    n_pos = round(n * positive_fraction)
    if n_pos <= n_problems and n - n_pos <= n_problems:
        return
    most = min(n, 2 * n_problems)  # the largest n whose both labels fit (rounding as targets)
    while most > 0 and (round(most * positive_fraction) > n_problems
                        or most - round(most * positive_fraction) > n_problems):
        most -= 1
    raise UserError(f"only {most} of the {n} rows could be made from {where or 'the problems'}: "
                    f"each of its {n_problems} problems gives at most one correct and one wrong "
                    f"row, and --n {n} asks {n_pos} correct and {n - n_pos} wrong "
                    f"(positive_fraction {positive_fraction:g}); lower --n to at most {most} or "
                    "use a larger split")


def problem_order(problems: Sequence[Problem], seed: int) -> list[Problem]:
    """The seeded order in which the builder uses problems (sample from its head)."""
    order = list(problems)
    random.Random(seed).shuffle(order)
    return order


def _honest(verdict: Verdict, positive: bool) -> bool:
    return verdict.correct if positive else verdict.reason in NEGATIVE_REASONS


def _slots(counts: Mapping[str, int], seed: int, label: str) -> list[str]:
    slots = [k for k, c in counts.items() for _ in range(c)]
    random.Random(f"{seed}/slots/{label}").shuffle(slots)
    return slots


def build_mix(problems: Sequence[Problem], n: int, mix: DataMixConfig, *,
              sampled: Mapping[str, Sequence[str]] | None = None,
              verifier: Verifier | None = None,
              dataset: str = "") -> tuple[list[LabelledTriple], BuildSummary]:
    """``n`` labelled rows from ``problems`` by ``mix`` (see the module docstring).

    ``sampled`` maps a problem id to completions a model wrote for it (None: no sampling; the
    sampled kinds are left out). Raises a :class:`UserError` when the problems run out.
    """
    if n < 2:
        raise UserError(f"n must be at least 2 (a positive and a negative), got {n}")
    check_size(n, len(problems), mix.positive_fraction, dataset)
    verifier = verifier or default_verifier()
    summary = BuildSummary(dataset=dataset, mix=asdict(mix))
    by_id = {p.id: p for p in problems}
    pools: dict[str, dict[str, list[str]]] = {k: {} for k in SAMPLED_KINDS}
    if sampled is not None:
        _sort_sampled(sampled, by_id, verifier, pools, summary, mix.seed,
                      rewrite=mix.sampled_answer_changed > 0)
    # a problem gives at most one row per label: count problems, not completions
    available = None if sampled is None else {k: len(pools[k]) for k in SAMPLED_KINDS}
    if sampled is None:
        summary.notes.append("no --sample-from: the sampled kinds are left out")
    counts = targets(mix, n, available, summary.notes)
    for positive in (True, False):
        for kind, w in mix.weights(positive, sampling=sampled is not None).items():
            summary.kinds[kind] = KindSummary(int(positive), round(w, 6), counts.get(kind, 0))
    pending = {True: _slots({k: c for k, c in counts.items() if k in POSITIVE_KINDS},
                            mix.seed, "positive"),
               False: _slots({k: c for k, c in counts.items() if k not in POSITIVE_KINDS},
                             mix.seed, "negative")}
    ctx = KindContext(pool=list(problems), verifier=verifier)
    rows: list[LabelledTriple] = []
    for p in problem_order(problems, mix.seed):
        if not pending[True] and not pending[False]:
            break
        gold = gold_solution(p)
        if gold is None:
            _count(summary.skipped_problems, "no worked solution")
            continue
        reference = normalize_reference(p.reference)
        if not verifier.verify(gold, reference).correct:  # a positive must be true: check gold
            _count(summary.skipped_problems, "gold not verified")
            continue
        used = False
        for positive in (True, False):
            made = _make_one(p, gold, reference, positive, pending[positive], pools, ctx,
                             mix.seed, summary)
            if made is not None:
                kind, text = made
                rows.append(LabelledTriple(Triple(p.question, p.reference, text), positive,
                                           f"{p.id}/{kind}", p.source, kind))
                summary.kinds[kind].rows += 1
                used = True
        summary.problems_used += used
    summary.rows = len(rows)
    summary.positives = sum(1 for r in rows if r.label)
    summary.negatives = summary.rows - summary.positives
    if len(rows) < n:
        short = {k: s.target - s.rows for k, s in summary.kinds.items() if s.rows < s.target}
        where = dataset or "the problems"
        missing = ", ".join(f"{k} {c}" for k, c in short.items())
        raise UserError(f"only {len(rows)} of the {n} rows could be made from {where} (short: "
                        f"{missing}); lower --n, use a larger split, or give those kinds less "
                        "weight")
    return rows, summary


def write_build(out: Path, rows: Sequence[LabelledTriple], summary: BuildSummary) -> Path:
    """Write the rows to ``out`` (.jsonl, atomically) and the summary beside it; returns the
    summary's path (``NAME.stats.json``)."""
    write_atomic(out, "".join(json.dumps(r.to_json(), ensure_ascii=False) + "\n" for r in rows))
    stats = out.with_name(out.stem + ".stats.json")
    write_json(stats, summary.to_dict())
    return stats


def _count(counter: dict[str, int], key: str) -> None:
    counter[key] = counter.get(key, 0) + 1


def _sort_sampled(sampled: Mapping[str, Sequence[str]], by_id: Mapping[str, Problem],
                  verifier: Verifier, pools: dict[str, dict[str, list[str]]],
                  summary: BuildSummary, seed: int, *, rewrite: bool) -> None:
    """Verify every sampled completion once; file it under sampled_correct or sampled_wrong;
    with ``rewrite`` (the kind has a weight), rewrite each correct one into
    sampled_answer_changed."""
    items = [(pid, text) for pid, texts in sampled.items() if pid in by_id for text in texts]
    unknown = [pid for pid in sampled if pid not in by_id]
    if unknown:
        raise UserError(f"sampled completions for unknown problem id(s): {', '.join(unknown[:3])}")
    verdicts = verifier.verify_batch([t for _, t in items],
                                     [normalize_reference(by_id[pid].reference) for pid, _ in items])
    tally: Counter[str] = Counter()
    for (pid, text), v in zip(items, verdicts, strict=True):
        tally[v.reason] += 1
        if v.correct:
            pools["sampled_correct"].setdefault(pid, []).append(text)
        elif v.reason in NEGATIVE_REASONS:
            pools["sampled_wrong"].setdefault(pid, []).append(text)
    summary.sampled = dict(sorted(tally.items()))
    # each correct one, its final answer changed consistently; the rewrite checks with the
    # verifier that the new answer is wrong, and gives None when the answer has no number
    for pid, texts in pools["sampled_correct"].items() if rewrite else ():
        reference = normalize_reference(by_id[pid].reference)
        for i, text in enumerate(texts):
            rng = random.Random(f"{seed}/sampled_answer_changed/{pid}/{i}")
            wrong = rewrite_final_answer(text, reference, rng, verifier=verifier)
            if wrong is not None:
                pools["sampled_answer_changed"].setdefault(pid, []).append(wrong)
    undecided = sum(c for r, c in tally.items() if r not in ("correct",) + NEGATIVE_REASONS)
    if undecided:
        summary.notes.append(f"{undecided} sampled completion(s) left out: the verifier timed out "
                             "or failed on them (never guessed)")


def _make_one(p: Problem, gold: str, reference: str, positive: bool, pending: list[str],
              pools: Mapping[str, Mapping[str, list[str]]], ctx: KindContext, seed: int,
              summary: BuildSummary) -> tuple[str, str] | None:
    """The first pending kind of this label that can be made honestly for ``p``, or None."""
    if not pending:
        return None
    # scarce kinds first: a sampled completion exists only for the few problems sampled
    kinds = [k for k in SAMPLED_KINDS if k in pending and p.id in pools[k]]
    kinds += [k for k in dict.fromkeys(pending) if k not in SAMPLED_KINDS]
    for kind in kinds:
        rng = random.Random(f"{seed}/{kind}/{p.id}")
        if kind in SAMPLED_KINDS:
            texts = [rng.choice(pools[kind][p.id])]  # verified already, when sorted
        else:
            maker = POSITIVE_MAKERS[kind] if positive else NEGATIVE_MAKERS[kind]
            text = maker(p, gold, rng, ctx)
            if text is None:
                summary.kinds[kind].not_applicable += 1
                continue
            verdict = ctx.verifier.verify(text, reference)
            if not _honest(verdict, positive):  # the label would lie: drop and count
                _count(summary.kinds[kind].dropped, verdict.reason)
                continue
            texts = [text]
        pending.remove(kind)
        return kind, texts[0]
    return None
