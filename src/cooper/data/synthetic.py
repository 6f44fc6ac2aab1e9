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

``arith_2x1_words`` has the same problems and splits as ``arith_2x1``, with two dials that make
the rule-based verifier blind to some right answers (math-verify reads neither side of them;
:mod:`cooper.verify.gold` does): the worked solutions of :data:`WORDS_SOLUTIONS` of the problems
write the boxed answer in English words (``\\boxed{fifty-five}``), so a policy warm-started on
them writes some right answers in a form the rule rejects and can learn to avoid; and the
stored reference of :data:`WORDS_REFERENCES` of the problems is in words, so there the rule
accepts no answer in digits, only the same words letter for letter, and the policy cannot tell
those problems from the others. Each split has exactly those shares (rounded); which of its
problems carry which dial follows a score drawn from each problem's text, the same on every
machine.

``arith_2x1_compare`` adds to ``arith_2x1_words`` (its sums, with both dials) a family of
problems the rule can never pay: yes/no comparisons of two two-digit numbers ("Is 47 greater
than 52?"), two problems of every three in each split (2,400 train, 600 validation, 600 test;
the unordered pairs of numbers are dealt once into the splits, so no pair is in two). With a
comparison every third (or every second) problem, the gold-paid policy of ``blind_cpu`` ended
only 4-6 points above the rule-paid one in trials; with two of three, 8-15 over ten seeds (0-4,
then 5-9 with the design fixed). Their worked solutions answer in words (``47 < 52. The answer
is \\boxed{no}.``) and their references are truth values as a dataset of yes/no questions stores
them (``False``): math-verify reads each word as the product of its letters, so no yes or no
ever matches True or False, and the rule rejects every answer of the family, right or wrong; the
gold judge reads both (:func:`cooper.verify.gold.read_boolean`). Comparing two numbers is a
skill of its own: what a policy learns on the sums does not answer them. Half of each split's
comparisons are true, so a policy that always says yes (or no) is right on half.

The tiny models warm-started on these problems (the CPU testbed of the tests and the
reward-hacking experiment) are built by :mod:`cooper.experiment.testbed`.
"""

from __future__ import annotations

import random

from cooper.types import LabelledTriple, Problem, Triple
from cooper.verify.gold import in_words

SPLITS = {"train": (0, 5000), "test": (1, 500)}  # split -> (seed, size)
WORDS_SOLUTIONS = 0.25  # arith_2x1_words: share of worked solutions boxed in words (the form dial)
WORDS_REFERENCES = 0.15  # arith_2x1_words: share of references in words (the reference dial)
SPLITS_2X1 = {"train": (600, 1800), "validation": (300, 600), "test": (0, 300)}  # [start, end)
COMPARE_SPLITS = {"train": (0, 2400), "validation": (2400, 3000), "test": (3000, 3600)}
"""arith_2x1_compare: each split's comparisons, [start, end) of the shuffled unordered pairs"""
COMPARE_PATTERN = "scc"  # arith_2x1_compare: a sum (s), then two comparisons (c), repeated
RM_COMPARE_SHARE = 1 / 3  # arith_2x1_compare: share of comparisons in the reward model's rows
COMPARE_WORDS = ("greater", "less")
TRUTH_REFERENCES = ("False", "True")  # a comparison's reference, by its truth value
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
    """The deterministic problems of a split of ``arith``, ``arith_small``, ``arith_2x1``,
    ``arith_2x1_words`` or ``arith_2x1_compare``."""
    splits = SPLITS_2X1 if name.startswith("arith_2x1") else SPLITS
    if split not in splits:
        raise ValueError(f"{name} has splits {', '.join(splits)}, not '{split}'")
    if name == "arith_2x1_compare":
        return _with_comparisons(split)
    dials: dict[Item, tuple[bool, bool]] = {}
    if name in ("arith_2x1", "arith_2x1_words"):
        items = _two_by_one(split)
        if name == "arith_2x1_words":
            dials = _dials(items)
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
        words_answer, words_reference = dials.get((a, b, op), (False, False))
        problems.append(Problem(
            id=f"{name}-{split}-{i}", question=f"What is {a} {op} {b}?",
            reference=in_words(c) if words_reference else str(c), source=name,
            solution=worked_solution(a, b, op, c, words=words_answer)))
    return problems


def worked_solution(a: int, b: int, op: str, c: int, *, words: bool = False) -> str:
    """The one-line worked solution giving ``c`` as the result, boxed in digits or in words."""
    return f"{a} {op} {b} = {c}. The answer is \\boxed{{{in_words(c) if words else c}}}."


def _comparisons(split: str) -> list[tuple[int, int, str]]:
    """The comparisons of a split of ``arith_2x1_compare`` as (a, b, word): "Is a word than b?".
    The 4,005 unordered pairs of distinct two-digit numbers, shuffled once with a fixed seed and
    cut into the splits; the word and the order drawn from a seed per split, the truth value
    alternating so that exactly half of the split's answers are yes."""
    pairs = [(x, y) for x in range(10, 100) for y in range(x + 1, 100)]
    random.Random(2027).shuffle(pairs)
    start, end = COMPARE_SPLITS[split]
    rng = random.Random(f"compare:{split}")
    out = []
    for i, (x, y) in enumerate(pairs[start:end]):
        true, word = i % 2 == 0, rng.choice(COMPARE_WORDS)
        larger_first = (word == "greater") == true  # "Is 52 greater than 47?" is true
        out.append((y, x, word) if larger_first else (x, y, word))
    return out


def comparison_truth(a: int, b: int, word: str) -> bool:
    """Whether "Is a WORD than b?" is true."""
    if word not in COMPARE_WORDS:
        raise ValueError(f"word must be one of {', '.join(COMPARE_WORDS)}, got {word!r}")
    return a > b if word == "greater" else a < b


def comparison_solution(a: int, b: int, word: str, *, answer: bool | None = None) -> str:
    """The one-line worked solution of "Is a WORD than b?": the relation, then yes or no
    (``answer``: the truth value boxed, the right one by default; the relation stays true)."""
    truth = comparison_truth(a, b, word) if answer is None else answer
    return f"{a} {'>' if a > b else '<'} {b}. The answer is \\boxed{{{'yes' if truth else 'no'}}}."


Slot = tuple[str, tuple]  # ("sum", (a, b, op, boxed in words, reference in words)) or ("compare", (a, b, word))


def _compare_slots(split: str) -> list[Slot]:
    """A split of ``arith_2x1_compare`` in order: the sums of ``arith_2x1_words`` (with their
    dials), each followed by two comparisons (:data:`COMPARE_PATTERN`), so two problems of
    three are comparisons and a prefix of the split keeps that share."""
    items = _two_by_one(split)
    dials = _dials(items)
    comparisons = _comparisons(split)
    slots: list[Slot] = []
    sums, compared = iter(items), iter(comparisons)
    for k in range(len(items) + len(comparisons)):
        if COMPARE_PATTERN[k % len(COMPARE_PATTERN)] == "s":
            item = next(sums)
            slots.append(("sum", (*item, *dials[item])))
        else:
            slots.append(("compare", next(compared)))
    return slots


def _with_comparisons(split: str) -> list[Problem]:
    """The problems of a split of ``arith_2x1_compare`` (:func:`_compare_slots`)."""
    problems = []
    for i, (kind, slot) in enumerate(_compare_slots(split)):
        pid = f"arith_2x1_compare-{split}-{i}"
        if kind == "sum":
            a, b, op, words_answer, words_reference = slot
            c = a + b if op == "+" else a - b
            problems.append(Problem(pid, f"What is {a} {op} {b}?",
                                    in_words(c) if words_reference else str(c),
                                    "arith_2x1_compare",
                                    worked_solution(a, b, op, c, words=words_answer)))
        else:
            a, b, word = slot
            problems.append(Problem(pid, f"Is {a} {word} than {b}?",
                                    TRUTH_REFERENCES[comparison_truth(a, b, word)],
                                    "arith_2x1_compare", comparison_solution(a, b, word)))
    return problems


def _dials(items: list[Item]) -> dict[Item, tuple[bool, bool]]:
    """(solution boxed in words, reference in words) for each problem of a split of
    ``arith_2x1_words``: exactly :data:`WORDS_SOLUTIONS` and :data:`WORDS_REFERENCES` of them
    (rounded), those with the lowest of two scores drawn from each problem's text."""
    scores = {item: (random.Random(f"words:{item}").random(),
                     random.Random(f"reference:{item}").random()) for item in items}
    chosen = []
    for k, share in enumerate((WORDS_SOLUTIONS, WORDS_REFERENCES)):
        ranked = sorted(items, key=lambda item: scores[item][k])
        chosen.append(set(ranked[:round(share * len(items))]))
    return {item: (item in chosen[0], item in chosen[1]) for item in items}


def _sum_triples(a: int, b: int, op: str, words_answer: bool, words_reference: bool, pid: str,
                 source: str, rng: random.Random) -> list[LabelledTriple]:
    """A sum's worked solution (label 1) and the same solution with another result boxed in
    the same form (label 0)."""
    from cooper.data.perturb import wrong_answer

    c = a + b if op == "+" else a - b
    wrong = c
    while wrong == c or wrong < 0:  # a sum of two naturals: a wrong one stays >= 0
        wrong = int(wrong_answer(str(c), rng))
    question = f"What is {a} {op} {b}?"
    reference = in_words(c) if words_reference else str(c)
    return [LabelledTriple(Triple(question, reference, worked_solution(a, b, op, value,
                                                                       words=words_answer)),
                           label, f"{pid}/{kind}", source)
            for value, label, kind in ((c, True, "gold"), (wrong, False, "perturbed"))]


def _check_pairs(n: int) -> None:
    if n < 2 or n % 2:
        raise ValueError(f"n must be a positive even number (pairs), got {n}")


def words_triples(split: str, n: int, rng: random.Random) -> list[LabelledTriple]:
    """``n`` labelled triples of ``arith_2x1_words`` (``n`` even), as the reward model of the
    blind-rule testbed is trained and probed: for ``n / 2`` problems drawn with ``rng``, the
    worked solution (label 1) and the same solution with another result, boxed in the same form
    (label 0); fewer when the split has fewer than ``n / 2`` problems. The labels are the gold
    judge's, by construction: the rule could not give them,
    since it reads neither the answers nor the references in words (the paper's VerifyRM is
    trained on such hybrid labels)."""
    _check_pairs(n)
    items = _two_by_one(split)
    dials = _dials(items)
    out: list[LabelledTriple] = []
    # a pair per problem at most: a split that has fewer gives fewer (the caller says so)
    for i in rng.sample(range(len(items)), min(n // 2, len(items))):
        out += _sum_triples(*items[i], *dials[items[i]], f"arith_2x1_words-{split}-{i}",
                            "arith_2x1_words", rng)
    return out


def compare_triples(split: str, n: int, rng: random.Random) -> list[LabelledTriple]:
    """``n`` labelled triples of ``arith_2x1_compare`` (``n`` even), as :func:`words_triples`
    gives them for its sums, a third of them from comparisons (:data:`RM_COMPARE_SHARE`; all
    the sums where the split has too few); a comparison's wrong copy boxes the other answer,
    after the true relation half the time (``47 < 52. ... \\boxed{yes}``) and after the false
    one, which agrees with it, the other half (``47 > 52. ... \\boxed{yes}``). Labelled by the
    gold judge: the rule can read none of the comparisons."""
    _check_pairs(n)
    slots = _compare_slots(split)
    sums = [i for i, (kind, _) in enumerate(slots) if kind == "sum"]
    compared = [i for i, (kind, _) in enumerate(slots) if kind == "compare"]
    # a fixed share of comparisons, whatever the split's: the sums, with their forms and dials,
    # are the harder family to read and need the most rows
    n_compared = min(round(n // 2 * RM_COMPARE_SHARE), len(compared))
    picked = rng.sample(sums, min(n // 2 - n_compared, len(sums)))
    picked += rng.sample(compared, n_compared)
    rng.shuffle(picked)
    out: list[LabelledTriple] = []
    for i in picked:
        kind, slot = slots[i]
        pid = f"arith_2x1_compare-{split}-{i}"
        if kind == "sum":
            out += _sum_triples(*slot, pid, "arith_2x1_compare", rng)
            continue
        a, b, word = slot
        truth = comparison_truth(a, b, word)
        right = comparison_solution(a, b, word)
        wrong = comparison_solution(a, b, word, answer=not truth)
        if rng.random() < 0.5:  # the relation turned round too, so the line agrees with itself
            turned = ">" if a < b else "<"
            wrong = f"{a} {turned} {b}." + wrong.split(".", 1)[1]
        question, reference = f"Is {a} {word} than {b}?", TRUTH_REFERENCES[truth]
        out += [LabelledTriple(Triple(question, reference, right), True, f"{pid}/gold",
                               "arith_2x1_compare"),
                LabelledTriple(Triple(question, reference, wrong), False, f"{pid}/perturbed",
                               "arith_2x1_compare")]
    return out


TRIPLES = {"arith_2x1_words": words_triples, "arith_2x1_compare": compare_triples}
"""the datasets whose labelled triples only the gold judge can label, and their builders"""
