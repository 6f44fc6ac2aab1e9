"""Benchmark evaluation: sample n completions per problem, verify each one, and score.

The paper's protocol (``docs/method.md``, "The paper's numbers"): temperature 0.7, top-p 0.95,
8 samples per problem, mean accuracy. Per benchmark we report (definitions in
``docs/evaluation.md``):

- **accuracy**: the mean verdict over every problem x sample (the paper's number);
- **pass@k**: the unbiased estimator of Chen et al. (2021), averaged over problems;
- **majority-vote accuracy** (maj@n): per problem, the most frequent *normalised extracted
  answer* wins and the problem counts as solved when that answer's sample was verified
  correct.

Majority voting groups answers by normalised string, not by verifier equivalence: grouping by
the verifier would take O(n^2) verifier calls per problem, each with a timeout, and
"equivalent" is not guaranteed to be transitive, so groups could depend on comparison order.
Normalised strings are cheap, deterministic and catch the common variants (``\\dfrac`` vs
``\\frac``, ``1,000`` vs ``1000``, ``18.0`` vs ``18``, ``$``, ``\\$``, ``\\left``, spaces,
degree and percent signs).

:func:`evaluate_problems` is the in-memory entry point (the trainer's periodic validation and
experiments call it; it writes no files). The resumable on-disk run behind ``cooper eval``
lives in :mod:`cooper.eval.run`; both cut the problems into the same chunks
(:func:`chunk_problems`), so they produce the same samples for the same settings.
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from cooper.data.prompts import check_template, prompt_messages
from cooper.errors import UserError
from cooper.infra.generation import Generator, Messages, OnSamples, SamplingConfig
from cooper.types import Problem
from cooper.verify.extraction import clean_answer, number_to_str
from cooper.verify.verifier import JUDGES, verify_batch

# Problems per chunk. A chunk is generated and verified as a unit and is the unit a resumed
# run skips; several batches per chunk leave room for length sorting to group similar prompts.
DEFAULT_CHUNK_PROBLEMS = 32


@dataclass(frozen=True)
class SampleRecord:
    """One sampled completion with its verdict (one line of ``samples/NAME.jsonl``)."""

    benchmark: str
    problem_id: str
    sample: int
    """index among the problem's n samples, 0..n-1"""
    prompt: str
    """the text the model was given (chat template applied when the backend has one)"""
    completion: str
    reference: str
    extracted: str | None
    """the verifier's extracted final answer, None when none was found"""
    correct: bool
    reason: str
    """the verifier's reason for its verdict"""
    num_tokens: int
    """generated tokens, end-of-sequence included, padding excluded"""
    finish_reason: str
    """'stop' or 'length' (cut at max_new_tokens)"""
    rule_correct: bool | None = None
    """the rule's verdict beside the gold judge's, when the gold judge scores (``correct``)"""


@dataclass(frozen=True)
class ProblemScore:
    """Per-problem summary of its n samples."""

    problem_id: str
    num_samples: int
    num_correct: int
    majority_answer: str | None
    """normalised winning answer; None when no sample had one"""
    majority_correct: bool


@dataclass(frozen=True)
class BenchmarkMetrics:
    """The numbers of one benchmark (fractions in [0, 1])."""

    benchmark: str
    num_problems: int
    samples_per_problem: int
    accuracy: float
    """mean verdict over all samples"""
    pass_at_k: dict[int, float]
    """k -> mean unbiased pass@k over problems"""
    majority_accuracy: float
    """maj@n: the fraction of problems whose most frequent answer is right"""
    mean_tokens: float
    """generated tokens per sample"""
    truncated_fraction: float
    """fraction of samples cut at max_new_tokens"""
    rule_accuracy: float | None = None
    """the rule's accuracy beside the gold judge's (``accuracy``) when the gold judge scores"""


@dataclass
class BenchmarkResult:
    """Metrics plus everything they were computed from."""

    metrics: BenchmarkMetrics
    problems: list[ProblemScore]
    samples: list[SampleRecord]
    seconds: float = 0.0
    """time spent generating and verifying (0 for reused samples)"""


# ------------------------------------------------------------------ metrics (pure functions)

def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples of which c are correct: ``1 - C(n-c, k) / C(n, k)``.

    The probability that at least one of k samples drawn without replacement from the n is
    correct (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1).
    Computed as a product, ``1 - prod_{i=n-c+1}^{n} (1 - k/i)``, which avoids huge binomials.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def default_ks(n: int) -> list[int]:
    """The k values reported for n samples: powers of two up to n, and n itself."""
    ks = [1 << i for i in range(n.bit_length()) if 1 << i <= n]
    return ks if ks[-1] == n else [*ks, n]


_NOISE = re.compile(r"\\left|\\right|\\displaystyle|\\[!,;: ]|\$")
_DEGREES = re.compile(r"\^\s*\{?\\circ\}?|°")
_THOUSANDS = re.compile(r"[-+]?\d{1,3}(,\d{3})+(\.\d+)?")
_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def normalize_answer(answer: str) -> str:
    """A canonical string for majority voting: ``'$1,000.0$'`` and ``'1000'`` both give ``'1000'``.

    First the verifier's own clean-up (:func:`cooper.verify.extraction.clean_answer`: math delimiters,
    currency, a final period), then spacing and notation variants that do not change a value.
    """
    s = _NOISE.sub("", clean_answer(answer))
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac")
    s = _DEGREES.sub("", s).replace("\\%", "").replace("%", "")
    s = re.sub(r"\s+", "", s).rstrip(".")
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    if _NUMBER.fullmatch(s):
        x = float(s)
        if math.isfinite(x):
            s = number_to_str(x)
    return s


def majority_vote(answers: Sequence[str | None],
                  correct: Sequence[bool]) -> tuple[str | None, bool]:
    """(winning normalised answer, whether it is correct) over one problem's samples.

    Samples without an extracted answer do not vote. Ties go to the answer that appeared first,
    so the result does not depend on anything but the samples' order. The winner is correct when
    its first sample was verified correct (samples with the same normalised answer get the same
    verdict from a deterministic verifier).
    """
    if len(answers) != len(correct):
        raise ValueError("answers and correct must have the same length")
    votes: dict[str, list[int]] = {}  # normalised answer -> sample indices, in first-seen order
    for i, a in enumerate(answers):
        if a is not None and a.strip():
            votes.setdefault(normalize_answer(a), []).append(i)
    if not votes:
        return None, False
    winner = max(votes, key=lambda a: len(votes[a]))  # max keeps the first of equal counts
    return winner, bool(correct[votes[winner][0]])


def score_problem(samples: Sequence[SampleRecord]) -> ProblemScore:
    """One problem's summary from its samples (any order; sorted by sample index here)."""
    ordered = sorted(samples, key=lambda s: s.sample)
    answer, ok = majority_vote([s.extracted for s in ordered], [s.correct for s in ordered])
    return ProblemScore(ordered[0].problem_id, len(ordered), sum(s.correct for s in ordered),
                        answer, ok)


def summarize(benchmark: str, samples: Sequence[SampleRecord],
              ks: Sequence[int] | None = None) -> tuple[BenchmarkMetrics, list[ProblemScore]]:
    """Benchmark metrics from its samples (problems in order of first appearance)."""
    if not samples:
        raise UserError(f"{benchmark}: no samples to score")
    by_problem: dict[str, list[SampleRecord]] = {}
    for s in samples:
        by_problem.setdefault(s.problem_id, []).append(s)
    scores = [score_problem(v) for v in by_problem.values()]
    n = scores[0].num_samples
    if any(p.num_samples != n for p in scores):
        raise ValueError(f"{benchmark}: problems have different sample counts")
    ks = list(ks) if ks is not None else default_ks(n)
    check_ks(ks, n)
    metrics = BenchmarkMetrics(
        benchmark=benchmark, num_problems=len(scores), samples_per_problem=n,
        accuracy=sum(s.correct for s in samples) / len(samples),
        pass_at_k={k: _mean([pass_at_k(n, p.num_correct, k) for p in scores]) for k in ks},
        majority_accuracy=_mean([float(p.majority_correct) for p in scores]),
        mean_tokens=_mean([s.num_tokens for s in samples]),
        truncated_fraction=_mean([float(s.finish_reason == "length") for s in samples]),
        rule_accuracy=(_mean([float(s.rule_correct) for s in samples])
                       if all(s.rule_correct is not None for s in samples) else None))
    return metrics, scores


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def check_ks(ks: Sequence[int], n: int) -> None:
    bad = [k for k in ks if not 1 <= k <= n]
    if bad:
        raise UserError(f"pass@k needs 1 <= k <= n (samples per problem, {n}); got k = "
                        f"{', '.join(map(str, bad))}. Raise --n or drop those k")


# ------------------------------------------------------------------ prompts and chunks





def chunk_problems(problems: Sequence[Problem], size: int) -> list[list[Problem]]:
    """Consecutive chunks of ``size`` problems, in dataset order (the last may be shorter).

    Deterministic, so a resumed run forms the same chunks, hence the same generator batches,
    hence (with :class:`~cooper.infra.generation.HFGenerator`'s per-batch seeds) the same samples.
    """
    if size < 1:
        raise UserError(f"chunk size must be >= 1 problem, got {size}")
    return [list(problems[i:i + size]) for i in range(0, len(problems), size)]


# ------------------------------------------------------------------ sampling and verification

def check_verify_mode(mode: str) -> str:
    if mode not in JUDGES:
        raise UserError(f"unknown verifier mode '{mode}'; choose {', '.join(JUDGES)}")
    return mode


RULE_BESIDE_GOLD = "strict"
"""the rule whose verdict a gold-judged evaluation keeps beside the judge's"""


def sample_chunk(generator: Generator, problems: Sequence[Problem], sampling: SamplingConfig, *,
                 benchmark: str, prompt_template: str | None = None,
                 verify_mode: str = "strict", verify_timeout_s: float | None = None,
                 on_samples: OnSamples | None = None) -> list[SampleRecord]:
    """Generate ``sampling.n`` completions for each problem and verify every one.

    Records come back grouped by problem (in input order), samples 0..n-1 within a problem.
    """
    check_verify_mode(verify_mode)
    convs = [prompt_messages(p.question, prompt_template) for p in problems]
    gens = generator.generate(convs, sampling, on_samples=on_samples)
    render: Callable[[Messages], str] | None = getattr(generator, "render", None)
    # a backend without a renderer (an endpoint) gets the user message as the prompt
    prompts = [render(c) if render else c[-1]["content"] for c in convs]
    flat = [(p, prompt, j, g) for p, prompt, gs in zip(problems, prompts, gens, strict=True)
            for j, g in enumerate(gs)]
    kwargs = {} if verify_timeout_s is None else {"timeout_s": verify_timeout_s}
    texts, references = [g.text for *_, g in flat], [p.reference for p, *_ in flat]
    verdicts = verify_batch(texts, references, mode=verify_mode, **kwargs)
    # the gold judge scores; the rule's verdicts stay beside it, to show what the rule misses
    rule = ([v.correct for v in verify_batch(texts, references, mode=RULE_BESIDE_GOLD, **kwargs)]
            if verify_mode == "gold" else [None] * len(flat))
    return [SampleRecord(benchmark=benchmark, problem_id=p.id, sample=j, prompt=prompt,
                         completion=g.text, reference=p.reference, extracted=v.extracted,
                         correct=bool(v.correct), reason=v.reason, num_tokens=g.num_tokens,
                         finish_reason=g.finish_reason, rule_correct=r)
            for (p, prompt, j, g), v, r in zip(flat, verdicts, rule, strict=True)]


def evaluate_problems(generator: Generator, problems: Sequence[Problem],
                      sampling: SamplingConfig, *, benchmark: str = "eval",
                      prompt_template: str | None = None, verify_mode: str = "strict",
                      verify_timeout_s: float | None = None, ks: Sequence[int] | None = None,
                      chunk_size: int = DEFAULT_CHUNK_PROBLEMS,
                      progress: bool = False) -> BenchmarkResult:
    """Evaluate ``generator`` on ``problems`` in memory: samples, per-problem scores, metrics.

    Same chunks, prompts and verifier as ``cooper eval``, so the same settings give the same
    numbers. ``ks`` defaults to :func:`default_ks` of ``sampling.n``.
    """
    from tqdm.auto import tqdm

    if not problems:
        raise UserError(f"{benchmark}: no problems to evaluate")
    if ks is not None:
        check_ks(ks, sampling.n)
    check_verify_mode(verify_mode)
    if prompt_template is not None:
        check_template(prompt_template)
    bar = tqdm(total=len(problems) * sampling.n, desc=benchmark, unit="sample",
               disable=not progress)
    t0 = time.perf_counter()
    samples: list[SampleRecord] = []
    for chunk in chunk_problems(problems, chunk_size):
        samples += sample_chunk(generator, chunk, sampling, benchmark=benchmark,
                                prompt_template=prompt_template, verify_mode=verify_mode,
                                verify_timeout_s=verify_timeout_s, on_samples=bar.update)
    bar.close()
    metrics, scores = summarize(benchmark, samples, ks)
    return BenchmarkResult(metrics, scores, samples, time.perf_counter() - t0)
