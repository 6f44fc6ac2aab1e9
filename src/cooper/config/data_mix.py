"""Settings of ``cooper data build``: which kinds of completions the reward model learns from.

A reward model trained only on answer-changed gold solutions learns "a wrong final number is
bad" and nothing else, so any text without a wrong number (an opener sentence, a lone ``解``)
looks good to it (issue 19; the "master keys" of arXiv 2507.08794). The builder therefore mixes
many kinds of completions. Each kind has a weight *within its label*: the positives are drawn
from the positive kinds in proportion to their weights, the negatives likewise, and
``positive_fraction`` splits the file between the two labels (0.5: balanced, the default).
Changing one weight therefore never unbalances the labels. Weights need not sum to 1; they are
normalised.

The kinds (made by :mod:`cooper.data.surface_forms`, :mod:`cooper.data.negative_kinds` and,
for the ``sampled_*`` kinds, from completions of a local model) are the fields below. Sampled
kinds take part only when the command samples from a model (``--sample-from``); without one, or
when the model produces no completion of a kind, that kind's share goes to the other kinds of
its label, and the summary says so. Values are checked when the dataclass is built and again
after command-line overrides (:meth:`DataMixConfig.validate`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

from cooper.config.engine import apply_settings, parse_overrides
from cooper.errors import UserError

POSITIVE_KINDS = ("gold_original", "gold_hashes", "gold_boxed", "gold_answer_is",
                  "sampled_correct")
NEGATIVE_KINDS = ("answer_changed", "final_changed", "cut_before_answer", "other_problem", "degenerate_opener",
                  "degenerate_punctuation", "degenerate_foreign", "restated_question",
                  "empty_answer", "template_only", "correctness_claim", "number_only",
                  "sampled_wrong", "sampled_answer_changed")
SAMPLED_KINDS = ("sampled_correct", "sampled_wrong", "sampled_answer_changed")


@dataclass
class DataMixConfig:
    """The mix of ``cooper data build``: label balance, a weight per kind, the seed."""

    positive_fraction: float = 0.5
    """fraction of rows labelled correct (0.5: balanced labels)"""
    seed: int = 0
    """seed of the problem order and of every random choice; same seed, same file"""

    # ---- positives (weights within the positives)
    gold_original: float = 0.2
    """the dataset's worked solution as shipped (GSM8K: with <<48/2=24>> calculator
    annotations and a final '#### n' line)"""
    gold_hashes: float = 0.2
    """the worked solution without calculator annotations, ending '#### n'"""
    gold_boxed: float = 0.25
    """the worked solution ending 'The answer is \\boxed{n}.' (annotations kept half the time)"""
    gold_answer_is: float = 0.2
    """the worked solution ending 'The answer is n.' (annotations kept half the time)"""
    sampled_correct: float = 1.0
    """completions sampled from --sample-from that the verifier finds correct"""

    # ---- negatives (weights within the negatives)
    answer_changed: float = 0.12
    """a gold solution (any surface form) with its final answer changed consistently"""
    final_changed: float = 0.18
    """a gold solution with its working as written and only the final answer changed"""
    cut_before_answer: float = 0.08
    """a gold solution cut off before it states its final answer"""
    other_problem: float = 0.08
    """the gold solution of another problem, whose answer differs"""
    degenerate_opener: float = 0.08
    """an opener with nothing after it: 'Let's solve this problem step by step.'"""
    degenerate_punctuation: float = 0.05
    """punctuation alone: '.', '...', ':', '?'"""
    degenerate_foreign: float = 0.08
    """a fragment in another language or script: '解', 'かいせつ', 'Решение', 'Lösung:'"""
    restated_question: float = 0.05
    """the question repeated back, with no solution"""
    empty_answer: float = 0.03
    """an empty or whitespace-only completion"""
    template_only: float = 0.05
    """an answer template left empty: 'The answer is \\boxed{}', '#### '"""
    correctness_claim: float = 0.05
    """a claim of correctness with no solution: 'This is correct.', 'VERDICT: YES'"""
    number_only: float = 0.05
    """the reference number alone, without any working or answer statement"""
    sampled_wrong: float = 0.6
    """completions sampled from --sample-from that the verifier finds wrong"""
    sampled_answer_changed: float = 0.5
    """a sampled completion that the verifier finds correct, with its final answer changed
    consistently: the model's own wording, a wrong answer (with sampled_correct, a pair of
    texts that differ only in the answer)"""

    def __post_init__(self) -> None:
        self.validate()

    def weights(self, positive: bool, *, sampling: bool = True) -> dict[str, float]:
        """Normalised weights of one label's kinds (sampled kinds left out without sampling)."""
        kinds = POSITIVE_KINDS if positive else NEGATIVE_KINDS
        raw = {k: getattr(self, k) for k in kinds if sampling or k not in SAMPLED_KINDS}
        total = sum(raw.values())
        if total <= 0:
            what = "positive" if positive else "negative"
            raise UserError(f"no {what} kind has a weight above 0"
                            + ("" if sampling else " once the sampled kinds are left out (no "
                               "--sample-from)") + f"; give one of {', '.join(raw)} a weight")
        return {k: w / total for k, w in raw.items() if w > 0}

    def fractions(self, *, sampling: bool = True) -> dict[str, float]:
        """Each kind's expected fraction of the whole file."""
        out = {k: self.positive_fraction * w
               for k, w in self.weights(True, sampling=sampling).items()}
        out.update({k: (1 - self.positive_fraction) * w
                    for k, w in self.weights(False, sampling=sampling).items()})
        return out

    def validate(self) -> None:
        """Raise a :class:`UserError` naming every bad value and how to fix it."""
        problems = []
        if not (isinstance(self.positive_fraction, int | float)
                and 0 < self.positive_fraction < 1):
            problems.append(f"positive_fraction must be strictly between 0 and 1 (got "
                            f"{self.positive_fraction}); 0.5 balances the labels")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool):
            problems.append(f"seed must be an integer (got {self.seed!r})")
        for name in POSITIVE_KINDS + NEGATIVE_KINDS:
            w = getattr(self, name)
            if not isinstance(w, int | float) or isinstance(w, bool) or not math.isfinite(w) \
                    or w < 0:
                problems.append(f"{name} must be a weight >= 0 (got {w!r}); 0 leaves the kind out")
        if not problems:
            for positive, kinds in ((True, POSITIVE_KINDS), (False, NEGATIVE_KINDS)):
                if sum(getattr(self, k) for k in kinds) <= 0:
                    label = "positive" if positive else "negative"
                    problems.append(f"every {label} kind has weight 0; give one of "
                                    f"{', '.join(kinds)} a weight above 0")
        if problems:
            raise UserError("bad data mix: " + "; ".join(problems))


def kind_names() -> tuple[str, ...]:
    """Every kind, positives first (the fields of :class:`DataMixConfig` that are weights)."""
    return POSITIVE_KINDS + NEGATIVE_KINDS


def mix_from_overrides(items: Sequence[str], base: DataMixConfig | None = None) -> DataMixConfig:
    """``base`` (default: the defaults) with ``KIND=WEIGHT`` overrides applied and checked.

    Each item may hold several comma-separated overrides (``answer_changed=0.2,seed=3``). An
    unknown name stops with the closest known one; a bad value with what is allowed.
    """
    cfg = replace(base) if base is not None else DataMixConfig()
    pairs = [part.strip() for item in items for part in item.split(",") if part.strip()]
    apply_settings(cfg, parse_overrides(pairs))
    cfg.validate()
    return cfg


def _check_fields() -> None:
    # the kind lists above and the weight fields must name the same kinds
    names = {f.name for f in fields(DataMixConfig)} - {"positive_fraction", "seed"}
    assert names == set(kind_names()), names ^ set(kind_names())


_check_fields()
