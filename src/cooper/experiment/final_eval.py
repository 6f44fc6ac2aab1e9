"""Scoring a policy on the experiment's benchmarks (``final_eval`` settings).

The same scoring serves the initial policy (stage 1, the report's "no RL" row) and each arm's
final policy, so the rows of the final table are comparable: the benchmarks, problems, sampling
(the paper's protocol by default, :mod:`cooper.infra.protocol`) and seed are those of
``final_eval`` and ``train.seed``.

One checkpoint is a lottery: with the testbed's learning rate an arm's test accuracy moves by
several points between checkpoints 25 steps apart, and its evaluation has a sampling error of its
own. So an arm's headline is the mean over its last ``final_eval.policies`` policies,
``final_eval.every_steps`` apart (kept during training, ``keep_policy_steps``), each scored like
the final one (:func:`last_policies`); the final policy alone stays beside it.
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from cooper.config.experiment import ExperimentConfig
from cooper.data.problems import benchmark_label, load_problems
from cooper.eval.sampling import BenchmarkResult, evaluate_problems
from cooper.infra.files import write_json
from cooper.infra.generation import HFGenerator, SamplingConfig, VLLMGenerator
from cooper.types import Problem

log = logging.getLogger(__name__)


def evaluate_policy(exp: ExperimentConfig, model: str, path: Path) -> dict[str, Any]:
    """The policy on every benchmark (``final_eval``); written to ``path`` and returned."""
    t0 = time.perf_counter()
    scores: dict[str, Any] = {}
    for label, problems, r in sample_policy(exp, model):
        scores[label] = {"accuracy": r.metrics.accuracy, "problems": r.metrics.num_problems,
                         "samples": r.metrics.samples_per_problem,
                         "mean_tokens": r.metrics.mean_tokens}
        if r.metrics.rule_accuracy is not None:  # the gold judge scored; the rule's beside
            scores[label]["rule_accuracy"] = r.metrics.rule_accuracy
            if families := family_accuracies(r.samples, problems):
                scores[label]["families"] = families
    result = {"benchmarks": scores,
              "average": sum(v["accuracy"] for v in scores.values()) / len(scores),
              "seconds": time.perf_counter() - t0}
    if all("rule_accuracy" in v for v in scores.values()):
        result["rule_average"] = sum(v["rule_accuracy"] for v in scores.values()) / len(scores)
    if families := _mean_families([v for v in scores.values()]):
        result["families"] = families
    write_json(path, result, default=str)
    return result


def sample_policy(exp: ExperimentConfig, model: str
                  ) -> Iterator[tuple[str, list[Problem], BenchmarkResult]]:
    """The policy's samples on each benchmark, judged as held-out answers are (``final_eval``'s
    problems, sampling and seed): (label, problems, result), one benchmark at a time."""
    e = exp.final_eval
    gen = (VLLMGenerator.load(model) if e.backend == "vllm"
           else HFGenerator.load(model, batch_size=e.batch_size, dtype=exp.train.policy.dtype))
    sampling = SamplingConfig(n=e.samples, temperature=e.temperature, top_p=e.top_p,
                              max_new_tokens=e.max_new_tokens, seed=exp.train.seed)
    for name, split in exp.benchmark_list():
        label = benchmark_label(name, split)  # as `cooper eval` names it
        problems = list(load_problems(name, split, limit=e.limit))
        yield label, problems, evaluate_problems(gen, problems, sampling, benchmark=label,
                                                 verify_mode=exp.held_out_mode())


def family_accuracies(samples, problems) -> dict[str, float] | None:
    """Each family's accuracy (:func:`cooper.rl.blind_spot.family`: numbers, yes/no) where the
    benchmark holds more than one; None otherwise."""
    from cooper.rl.blind_spot import family

    kinds = {p.id: family(p.reference) for p in problems}
    if len(set(kinds.values())) < 2:
        return None
    out = {}
    for f in sorted(set(kinds.values())):
        hits = [s.correct for s in samples if kinds[s.problem_id] == f]
        out[f] = sum(hits) / len(hits)
    return out


def _mean_families(results: list[dict[str, Any]]) -> dict[str, float] | None:
    """Each family's accuracy averaged over the results that have it (benchmarks, policies)."""
    per: dict[str, list[float]] = {}
    for r in results:
        for f, x in (r.get("families") or {}).items():
            per.setdefault(f, []).append(x)
    return {f: statistics.fmean(xs) for f, xs in per.items()} or None


def last_policies(exp: ExperimentConfig, kept: dict[int, Path], final_step: int,
                  final: dict[str, Any], path: Path) -> dict[str, Any]:
    """The mean of the final policy's scores (``final``, after ``final_step``) and those of the
    policies ``kept`` after earlier steps ({step: folder}, scored here): per benchmark and on
    average, with each policy's scores (``points``) and the standard deviation of their
    averages. A kept folder that is missing is left out, logged and listed (``missing``).
    Written to ``path`` and returned; it has the shape of :func:`evaluate_policy`'s result."""
    points, missing, seconds = [], [], final["seconds"]
    for step, folder in sorted(kept.items()):
        if not (folder / "config.json").is_file():
            log.warning("%s: no policy kept after step %d; the headline leaves it out", folder,
                        step)
            missing.append(step)
            continue
        r = evaluate_policy(exp, str(folder), path.with_name(f"final_eval.step-{step}.json"))
        points.append((step, r))
        seconds += r["seconds"]
    points.append((final_step, final))
    averages = [r["average"] for _, r in points]
    mean = statistics.fmean(averages)
    sd = statistics.stdev(averages) if len(averages) > 1 else 0.0
    scores = {label: {**v, **{key: sum(r["benchmarks"][label][key] for _, r in points)
                                   / len(points) for key in ("accuracy", "rule_accuracy")
                              if key in v}} for label, v in final["benchmarks"].items()}
    for label, v in scores.items():  # each family's accuracy, the mean over the policies
        if families := _mean_families([r["benchmarks"][label] for _, r in points]):
            v["families"] = families
    result = {"benchmarks": scores, "average": mean, "sd": sd,
              "points": [{"step": s, "average": r["average"],
                          "benchmarks": {k: v["accuracy"] for k, v in r["benchmarks"].items()}}
                         for s, r in points],
              "missing": missing, "seconds": seconds}
    if "rule_average" in final:
        result["rule_average"] = statistics.fmean(r["rule_average"] for _, r in points)
    if families := _mean_families([r for _, r in points]):
        result["families"] = families
    write_json(path, result, default=str)
    return result
