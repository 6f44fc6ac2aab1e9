"""Evaluation: how often a policy is right on held-out benchmarks, by the paper's protocol.

Takes a model and benchmarks (built-in names or local files) with :class:`EvalSettings`
(:mod:`.settings`; defaults: the paper's protocol, :mod:`cooper.infra.protocol`); samples n
completions per problem, checks each with the rule-based verifier and computes mean accuracy,
unbiased pass@k and majority-vote accuracy (:mod:`.sampling`), in a run folder that a rerun
resumes chunk by chunk (:mod:`.run`); hands on ``results.json`` and every sample, and a
paper-style table of several runs (:mod:`.compare`). Training validation and the experiment's
final scores use the same sampling and scoring (:func:`evaluate_problems`).
"""

from cooper.eval.compare import Comparison, compare_runs, comparison_csv, comparison_markdown
from cooper.eval.run import RunResult, format_summary, read_samples, run_eval
from cooper.eval.sampling import (
    BenchmarkMetrics,
    BenchmarkResult,
    SampleRecord,
    evaluate_problems,
    pass_at_k,
)
from cooper.eval.settings import Benchmark, EvalSettings, load_benchmarks

__all__ = ["Benchmark", "BenchmarkMetrics", "BenchmarkResult", "Comparison", "EvalSettings",
           "RunResult", "SampleRecord", "compare_runs", "comparison_csv", "comparison_markdown",
           "evaluate_problems", "format_summary", "load_benchmarks", "pass_at_k", "read_samples",
           "run_eval"]
