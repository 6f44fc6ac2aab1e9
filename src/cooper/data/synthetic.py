"""Synthetic arithmetic, where the verifier is exact.

``load_problems("arith", split)`` gives two-digit addition and subtraction problems ("What is
47 + 38?"); ``arith_small`` gives single-digit additions ("What is 4 + 7?"), which a tiny model
learns in a minute; ``arith_2x1`` gives sums of a two-digit and a one-digit number in either
order ("What is 7 + 46?"), 1,800 problems dealt once, by a seeded shuffle, into train (1,200),
validation (300) and test (300): a tiny model learns the carry in a few minutes and is then
right on about half of the problems it has never seen. All are generated deterministically: the
same split has the same problems on every machine, and no test problem appears in the train
split (``arith_small`` has only 100 distinct problems, so its two splits overlap by design).
Worked solutions are one line (``47 + 38 = 85. The answer is \\boxed{85}.``).

The tiny models warm-started on these problems (the CPU testbed of the tests and the
reward-hacking experiment) are built by :mod:`cooper.experiment.testbed`.
"""

from __future__ import annotations

import random

from cooper.types import Problem

SPLITS = {"train": (0, 5000), "test": (1, 500)}  # split -> (seed, size)
SPLITS_2X1 = {"train": (600, 1800), "validation": (300, 600), "test": (0, 300)}  # [start, end)
Item = tuple[int, int, str]


def _two_by_one(split: str) -> list[Item]:
    """All 1,800 sums of a two-digit and a one-digit number (both orders), shuffled once with a
    fixed seed and cut into the three splits: disjoint by construction."""
    items = [(a, b, "+") for a in range(10, 100) for b in range(10)]
    items += [(b, a, "+") for a, b, _ in items]
    random.Random(2026).shuffle(items)
    start, end = SPLITS_2X1[split]
    return items[start:end]


def _two_digit(seed: int, n: int, exclude: set[Item]) -> list[Item]:
    rng = random.Random(seed)
    out: list[Item] = []
    seen = set(exclude)
    while len(out) < n:
        a, b = rng.randint(10, 99), rng.randint(1, 99)
        op = rng.choice("+-")
        if (a, b, op) not in seen:
            seen.add((a, b, op))
            out.append((a, b, op))
    return out


def _single_digit(seed: int, n: int) -> list[Item]:
    rng = random.Random(seed)
    return [(rng.randint(0, 9), rng.randint(0, 9), "+") for _ in range(n)]


def arithmetic_problems(split: str = "train", name: str = "arith") -> list[Problem]:
    """The deterministic problems of a split of ``arith``, ``arith_small`` or ``arith_2x1``."""
    splits = SPLITS_2X1 if name == "arith_2x1" else SPLITS
    if split not in splits:
        raise ValueError(f"{name} has splits {', '.join(splits)}, not '{split}'")
    if name == "arith_2x1":
        items = _two_by_one(split)
    elif name == "arith_small":
        items = _single_digit(*SPLITS[split])
    elif name == "arith":
        test = _two_digit(*SPLITS["test"], exclude=set())
        items = test if split == "test" else _two_digit(*SPLITS["train"], exclude=set(test))
    else:
        raise ValueError(f"unknown synthetic dataset {name!r}")
    problems = []
    for i, (a, b, op) in enumerate(items):
        c = a + b if op == "+" else a - b
        problems.append(Problem(
            id=f"{name}-{split}-{i}", question=f"What is {a} {op} {b}?", reference=str(c),
            source=name, solution=f"{a} {op} {b} = {c}. The answer is \\boxed{{{c}}}."))
    return problems
