"""Scoring a policy on the experiment's benchmarks (``final_eval`` settings).

The same scoring serves the initial policy (stage 1, the report's "no RL" row) and each arm's
final policy, so the rows of the final table are comparable: the benchmarks, problems, sampling
(the paper's protocol by default, :mod:`cooper.infra.protocol`) and seed are those of
``final_eval`` and ``train.seed``.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from cooper.config.experiment import ExperimentConfig
from cooper.data.problems import benchmark_label, load_problems
from cooper.eval.sampling import evaluate_problems
from cooper.infra.files import write_json
from cooper.infra.generation import HFGenerator, SamplingConfig, VLLMGenerator


def evaluate_policy(exp: ExperimentConfig, model: str, path: Path) -> dict[str, Any]:
    """The policy on every benchmark (``final_eval``); written to ``path`` and returned."""
    e = exp.final_eval
    t0 = time.perf_counter()
    gen = (VLLMGenerator.load(model) if e.backend == "vllm"
           else HFGenerator.load(model, batch_size=e.batch_size, dtype=exp.train.policy.dtype))
    sampling = SamplingConfig(n=e.samples, temperature=e.temperature, top_p=e.top_p,
                              max_new_tokens=e.max_new_tokens, seed=exp.train.seed)
    scores: dict[str, Any] = {}
    for name, split in exp.benchmark_list():
        label = benchmark_label(name, split)  # as `cooper eval` names it
        problems = list(load_problems(name, split, limit=e.limit))
        r = evaluate_problems(gen, problems, sampling, benchmark=label,
                              verify_mode=exp.train.reward.verifier_mode)
        scores[label] = {"accuracy": r.metrics.accuracy, "problems": r.metrics.num_problems,
                         "samples": r.metrics.samples_per_problem,
                         "mean_tokens": r.metrics.mean_tokens}
    result = {"benchmarks": scores,
              "average": sum(v["accuracy"] for v in scores.values()) / len(scores),
              "seconds": time.perf_counter() - t0}
    write_json(path, result, default=str)
    return result
