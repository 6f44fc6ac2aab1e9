"""Completions of the embedded default model that ship with the package.

Sampling the recipe's completions of SmolLM2-135M-Instruct takes half an hour or more on a
laptop CPU, so the demo cannot sample the data its reward model is trained on, and a reward model
trained without real completions of the policy does not recognise them (docs/reward_model.md,
"Measured figures"). The project therefore ships what its own sampling commands wrote, once:

- ``arith_small`` / ``train``: one completion for each of the first 1920 problems of the
  default mix's build order (seed 0), the ``OUT.samples.parquet`` that the command of
  :data:`SHIPPED` writes. It is what ``cooper data build --samples-file embedded`` reads.
- ``arith_small`` / ``test``: two completions for each of the first 200 test problems, the
  held-out real completions a reward model is scored on (never trained on).

Each file is exactly what the command beside it writes (``cooper data samples --check`` samples
again and compares). Sampling on CPU is deterministic on one machine, but another CPU can round
differently and draw other tokens: that is why the files ship instead of being sampled by the
demo. The completions are the output of SmolLM2-135M-Instruct (Apache-2.0) on problems this
project generates (:mod:`cooper.data.synthetic`); they are released with the project under its
Apache-2.0 licence.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from cooper.errors import UserError

EMBEDDED = "embedded"
"""what ``--samples-file`` takes to mean the shipped file of the dataset and split"""


@dataclass(frozen=True)
class ShippedSamples:
    """One shipped file and the command that writes it."""

    dataset: str
    split: str
    file: str
    """its name in cooper/data/bundled/samples/"""
    command: str
    """the command that writes it (``{count}`` problems), byte for byte on the machine that
    made it"""
    count: int
    """problems sampled"""
    written: str
    """the file ``command`` writes, relative to the folder it runs in"""
    chunk: int
    """problems per committed chunk: the first ``k * chunk`` problems are sampled in the same
    batches whatever ``count`` is, so a check can sample a few and compare"""

    @property
    def path(self) -> Path:
        return Path(str(resources.files("cooper.data") / "bundled" / "samples" / self.file))

    def command_for(self, count: int | None = None) -> str:
        return self.command.format(count=self.count if count is None else count)


SHIPPED = {
    ("arith_small", "train"): ShippedSamples(
        "arith_small", "train", "arith_small_train.parquet",
        "cooper data build --dataset arith_small --split train --n 2000 --out train.jsonl "
        "--sample-from smollm2-135m-instruct --samples {count} --sample-max-tokens 128 "
        "--batch-size 128 --threads 1",
        1920, "train.samples.parquet", 64),
    ("arith_small", "test"): ShippedSamples(
        "arith_small", "test", "arith_small_test.parquet",
        "cooper data collect --dataset arith_small --split test --limit {count} --n 2 "
        "--temperature 0.7 --top-p 0.95 --max-tokens 128 --seed 7 "
        "--generators smollm2-135m-instruct --out test.parquet --threads 1",
        200, "test.parquet", 32),
}


def shipped_samples(dataset: str, split: str) -> ShippedSamples:
    """The shipped completions of the embedded model on ``dataset``/``split``, or a clear
    error naming the ones that exist."""
    try:
        return SHIPPED[(dataset, split)]
    except KeyError:
        have = ", ".join(f"{d}/{s}" for d, s in SHIPPED)
        raise UserError(f"no shipped completions of the embedded model for {dataset}/{split} "
                        f"(shipped: {have}); sample them with --sample-from "
                        "smollm2-135m-instruct --samples N") from None
