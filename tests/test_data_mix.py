"""`cooper data build`: every kind is what it claims, labels are honest, the mix is checked."""

from __future__ import annotations

import json
import random

import pytest

from cooper.cli import main
from cooper.config.data_mix import (
    NEGATIVE_KINDS,
    POSITIVE_KINDS,
    SAMPLED_KINDS,
    DataMixConfig,
    kind_names,
    mix_from_overrides,
)
from cooper.data.mix import POSITIVE_MAKERS, build_mix, targets
from cooper.data.negative_kinds import NEGATIVE_MAKERS, KindContext
from cooper.data.perturb import gold_solution
from cooper.data.problems import load_problems
from cooper.data.surface_forms import FORMS, in_form, split_solution, strip_annotations
from cooper.errors import UserError
from cooper.types import Problem
from cooper.verify.verifier import Verifier

GSM8K = ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.\n"
         "Natalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72")


@pytest.fixture(scope="module")
def verifier():
    with Verifier(workers=1) as v:
        yield v


@pytest.fixture(scope="module")
def problems():
    """A few problems of each bundled shape: GSM8K (####), MATH500 (LaTeX boxes), arithmetic."""
    out = []
    for name, split in (("gsm8k", "train"), ("math500", "test"), ("arith_small", "train")):
        out += load_problems(name, split, limit=12).problems
    return out


def _only(**weights) -> DataMixConfig:
    """A mix with every weight 0 except the ones given."""
    zero = {k: 0.0 for k in kind_names()}
    return DataMixConfig(**{**zero, **weights})


# ------------------------------------------------------------------ kinds


def test_every_kind_has_a_maker():
    sampled_negatives = {"sampled_wrong", "sampled_answer_changed"}
    assert set(POSITIVE_MAKERS) | set(SAMPLED_KINDS) == set(POSITIVE_KINDS) | sampled_negatives
    assert set(NEGATIVE_MAKERS) | sampled_negatives == set(NEGATIVE_KINDS)


def test_surface_forms_split_and_verify(verifier, problems):
    assert split_solution(GSM8K) == (GSM8K[:GSM8K.index("\n####")], "72")
    assert split_solution("6 + 6 = 12. The answer is \\boxed{12}.") == ("6 + 6 = 12.", "12")
    # a box inside prose is unwrapped in place; the sentence stays
    assert split_solution("So the area is $\\boxed{\\frac{1}{2}}$.") == (
        "So the area is $\\frac{1}{2}$.", "\\frac{1}{2}")
    assert strip_annotations(GSM8K).startswith("Natalia sold 48/2 = 24 clips")
    assert in_form(GSM8K, "boxed").endswith("April and May.\nThe answer is \\boxed{72}.")
    assert in_form(GSM8K, "answer_is").endswith("\nThe answer is 72.")
    assert "<<" in in_form(GSM8K, "hashes", annotations=True)
    for p in problems:  # every form of every gold solution is still correct
        for form in FORMS:
            text = in_form(gold_solution(p), form)
            assert verifier.verify(text, p.reference).correct, (p.id, form, text[-80:])


def test_positive_kinds_verify(verifier, problems):
    ctx = KindContext(problems, verifier)
    for kind, make in POSITIVE_MAKERS.items():
        for p in problems:
            text = make(p, gold_solution(p), random.Random(f"{kind}{p.id}"), ctx)
            assert verifier.verify(text, p.reference).correct, (kind, p.id, text[-80:])


def test_negative_kinds_are_wrong(verifier, problems):
    ctx = KindContext(problems, verifier)
    seen: dict[str, set[str]] = {}
    for kind, make in NEGATIVE_MAKERS.items():
        for p in problems:
            for k in range(3):
                text = make(p, gold_solution(p), random.Random(f"{kind}/{p.id}/{k}"), ctx)
                if text is None:  # not applicable (nothing to change): fine, never a lie
                    continue
                verdict = verifier.verify(text, p.reference)
                assert verdict.reason in ("wrong", "no_answer"), (kind, p.id, text, verdict)
                seen.setdefault(kind, set()).add(text)
    assert set(seen) == set(NEGATIVE_MAKERS)  # every kind made something
    for kind in ("degenerate_opener", "degenerate_foreign", "template_only", "empty_answer"):
        assert len(seen[kind]) >= 4, kind  # variety, not one fixed string
    assert any("解" in t for t in seen["degenerate_foreign"]) or len(seen["degenerate_foreign"]) > 8
    assert "" in seen["empty_answer"]


def test_final_changed_keeps_the_working_and_changes_only_the_answer(verifier):
    p = Problem(id="a", question="What is 47 + 38?", reference="85", source="arith",
                solution="47 + 38 = 85. The answer is \\boxed{85}.")
    ctx = KindContext([p], verifier)
    for k in range(6):
        text = NEGATIVE_MAKERS["final_changed"](p, gold_solution(p), random.Random(k), ctx)
        body, statement = text.rsplit("\n", 1)
        assert body == "47 + 38 = 85." and "85" not in statement, text
        assert verifier.verify(text, "85").reason == "wrong"


# ------------------------------------------------------------------ the mix setting


@pytest.mark.parametrize("overrides, message", [
    (["answer_chnged=0.2"], "did you mean 'answer_changed'"),
    (["answer_changed=-1"], "answer_changed must be a weight >= 0"),
    (["answer_changed=nan"], "answer_changed must be a weight >= 0"),
    (["answer_changed=lots"], "is not a valid float"),
    (["positive_fraction=1"], "strictly between 0 and 1"),
    ([",".join(f"{k}=0" for k in NEGATIVE_KINDS)], "every negative kind has weight 0"),
])
def test_mix_validation_errors(overrides, message):
    with pytest.raises(UserError, match=message):
        mix_from_overrides(overrides)


def test_mix_weights_and_targets():
    mix = mix_from_overrides(["answer_changed=0.5", "seed=3"])
    assert mix.seed == 3 and mix.answer_changed == 0.5
    fractions = mix.fractions(sampling=False)
    assert "sampled_wrong" not in fractions and abs(sum(fractions.values()) - 1) < 1e-9
    assert abs(sum(v for k, v in fractions.items() if k in POSITIVE_KINDS) - 0.5) < 1e-9
    counts = targets(DataMixConfig(), 101)
    assert sum(counts.values()) == 101
    assert sum(c for k, c in counts.items() if k in POSITIVE_KINDS) == 50  # round(50.5) = 50
    # a sampled kind capped at what exists; its share goes to its label's other kinds
    notes: list[str] = []
    capped = targets(DataMixConfig(), 200, {"sampled_correct": 2, "sampled_wrong": 50}, notes)
    assert capped["sampled_correct"] == 2 and capped["sampled_answer_changed"] == 0
    assert capped["sampled_wrong"] == 40  # 100 * 0.6 / 1.5, once the rewritten kind has none
    assert sum(c for k, c in capped.items() if k in POSITIVE_KINDS) == 100
    assert len(notes) == 2 and "sampled_correct: 2 problem(s) with a usable" in notes[0]
    # two sampled kinds of one label both short: each held at what exists, the rest elsewhere
    capped = targets(DataMixConfig(), 200, {"sampled_correct": 60, "sampled_wrong": 5,
                                            "sampled_answer_changed": 3})
    assert (capped["sampled_wrong"], capped["sampled_answer_changed"]) == (5, 3)
    assert sum(c for k, c in capped.items() if k not in POSITIVE_KINDS) == 100
    with pytest.raises(UserError, match="no other kind of that label"):
        targets(_only(gold_boxed=1, sampled_wrong=1, sampled_answer_changed=1), 20,
                {"sampled_wrong": 2, "sampled_answer_changed": 1})
    with pytest.raises(UserError, match="no positive kind"):
        _only(sampled_correct=1, answer_changed=1).weights(True, sampling=False)


# ------------------------------------------------------------------ the builder


def test_build_is_balanced_verified_and_seeded(verifier):
    pool = load_problems("gsm8k", "train", limit=300).problems
    rows, summary = build_mix(pool, 120, DataMixConfig(), verifier=verifier, dataset="gsm8k")
    assert len(rows) == 120 and summary.positives == summary.negatives == 60
    assert {r.kind for r in rows} == {k for k, s in summary.kinds.items() if s.target}
    assert all(s.rows == s.target for s in summary.kinds.values())
    assert len({r.id for r in rows}) == 120
    verdicts = verifier.verify_batch([r.triple.completion for r in rows],
                                     [r.triple.reference for r in rows])
    assert all(v.correct == r.label for v, r in zip(verdicts, rows, strict=True))
    again, _ = build_mix(pool, 120, DataMixConfig(), verifier=verifier)
    assert [r.to_json() for r in again] == [r.to_json() for r in rows]
    other, _ = build_mix(pool, 120, DataMixConfig(seed=1), verifier=verifier)
    assert [r.to_json() for r in other] != [r.to_json() for r in rows]


def test_dishonest_candidates_are_dropped_and_counted(verifier):
    # questions that state their own answer: restating them is *correct* by the verifier
    pool = [Problem(f"p{i}", (f"The answer is {i + 3}. " if i % 2 == 0 else "") +
                    f"What is {i} + 3?", str(i + 3), "toy",
                    f"{i} + 3 = {i + 3}. The answer is \\boxed{{{i + 3}}}.") for i in range(40)]
    rows, summary = build_mix(pool, 20, _only(gold_boxed=1, restated_question=1),
                              verifier=verifier)
    k = summary.kinds["restated_question"]
    assert k.rows == 10 and k.dropped.get("correct", 0) >= 5
    assert summary.dropped == k.dropped["correct"]
    assert all("The answer is" not in r.triple.completion for r in rows if not r.label)
    # another problem's solution whose answer is equal in value, written otherwise
    pool = [Problem("a", "Half of 1?", "0.5", "toy", "1/2 = 0.5. The answer is \\boxed{0.5}."),
            Problem("b", "One over two?", "\\frac{1}{2}", "toy", "The answer is \\boxed{\\frac{1}{2}}.")]
    with pytest.raises(UserError, match="only 2 of the 4 rows"):
        build_mix(pool, 4, _only(gold_boxed=1, other_problem=1), verifier=verifier)


def test_sampled_completions_are_sorted_by_the_verifier(verifier):
    pool = load_problems("arith_small", "train", limit=60).problems
    p, q = pool[0], pool[1]
    sampled = {p.id: [f"The answer is \\boxed{{{p.reference}}}."],
               q.id: [f"The answer is \\boxed{{{int(q.reference) + 1}}}.", "I don't know"]}
    rows, summary = build_mix(pool, 40, DataMixConfig(), sampled=sampled, verifier=verifier)
    assert summary.sampled == {"correct": 1, "no_answer": 1, "wrong": 1}
    kinds = {r.kind: r for r in rows}
    assert kinds["sampled_correct"].label is True and kinds["sampled_correct"].id == f"{p.id}/sampled_correct"
    assert summary.kinds["sampled_wrong"].rows == 1  # one problem, one negative
    assert any("sampled_correct: 1 problem(s)" in n for n in summary.notes)
    with pytest.raises(UserError, match="unknown problem id"):
        build_mix(pool, 4, DataMixConfig(), sampled={"nope": ["x"]}, verifier=verifier)


def test_a_correct_sample_with_its_answer_changed_is_a_negative_of_the_same_problem(verifier):
    pool = load_problems("arith_small", "train", limit=60).problems
    p = pool[0]
    right = (f"Let me add. {p.question[8:-1]} = {p.reference}.\n"
             f"The answer is \\boxed{{{p.reference}}}.")
    mix = _only(gold_boxed=1, sampled_correct=1, answer_changed=1, sampled_answer_changed=1)
    rows, summary = build_mix(pool, 8, mix, sampled={p.id: [right]}, verifier=verifier)
    ours = {r.kind: r for r in rows if r.id.startswith(p.id + "/")}
    assert set(ours) == {"sampled_correct", "sampled_answer_changed"}  # a pair, one problem
    wrong = ours["sampled_answer_changed"].triple.completion
    assert ours["sampled_answer_changed"].label is False and wrong != right
    # the model's own wording, every statement of the result changed, and verified wrong
    assert wrong.startswith("Let me add. ") and p.reference not in wrong.split("=", 1)[1]
    assert verifier.verify(wrong, p.reference).reason == "wrong"
    assert summary.kinds["sampled_answer_changed"].rows == 1
    # without a correct sample there is nothing to rewrite: its share goes to answer_changed
    rows, summary = build_mix(pool, 8, mix, sampled={p.id: ["no idea"]}, verifier=verifier)
    assert summary.kinds["sampled_answer_changed"].rows == 0
    assert sum(r.kind == "answer_changed" for r in rows) == 4


# ------------------------------------------------------------------ the command


def test_cli_writes_rows_with_kinds_and_a_summary(tmp_path, capsys):
    out = tmp_path / "train.jsonl"
    code = main(["data", "build", "--dataset", "arith_small", "--n", "60", "--out", str(out),
                 "--mix", "answer_changed=0.5,number_only=0", "--seed", "2"])
    printed = capsys.readouterr().out
    assert code == 0 and "wrote 60 rows (30 correct, 30 wrong)" in printed
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 60 and all({"kind", "label", "id", "source"} <= set(r) for r in rows)
    assert "number_only" not in {r["kind"] for r in rows}
    stats = json.loads((tmp_path / "train.stats.json").read_text())
    assert stats["rows"] == 60 and stats["mix"]["seed"] == 2 and stats["mix"]["number_only"] == 0
    assert stats["kinds"]["answer_changed"]["target"] == 12  # 30 * 0.5 / 1.23
    assert "no --sample-from" in printed
    assert main(["data", "build", "--show-mix"]) == 0
    assert "degenerate_foreign" in capsys.readouterr().out


@pytest.mark.parametrize("args, message", [
    (["--dataset", "arith_small", "--out", "x.jsonl"], "--n required"),
    (["--dataset", "arith_small", "--n", "4", "--out", "x.csv"], "must be a .jsonl"),
    (["--dataset", "arith_small", "--n", "4", "--out", "x.jsonl", "--samples", "3"],
     "goes with --sample-from"),
    (["--dataset", "arith_small", "--n", "4", "--out", "x.jsonl", "--samples-file", "a.jsonl",
      "--sample-from", "m", "--samples", "3"], "keep one"),
    (["--dataset", "arith_small", "--n", "4", "--out", "x.jsonl", "--samples-file", "a.jsonl"],
     "must be an existing .parquet"),
    (["--dataset", "gsm8k", "--split", "train", "--n", "4", "--out", "x.jsonl", "--samples-file",
      "embedded"], "no shipped completions of the embedded model for gsm8k/train"),
    (["--dataset", "arith_small", "--n", "4", "--out", "x.jsonl", "--mix", "seed=1",
      "--seed", "2"], "seed is given twice"),
    (["--show-mix", "--mix", "gold_boxd=1"], "did you mean 'gold_boxed'"),
])
def test_cli_errors_say_how_to_fix(tmp_path, capsys, monkeypatch, args, message):
    monkeypatch.chdir(tmp_path)
    assert main(["data", "build", *args]) == 2
    assert message in capsys.readouterr().err


def test_cli_samples_from_a_local_model(tmp_path, capsys, tiny_models):
    out = tmp_path / "s.jsonl"
    code = main(["data", "build", "--dataset", "arith_small", "--n", "40", "--out", str(out),
                 "--sample-from", str(tiny_models.policy), "--samples", "6",
                 "--sample-max-tokens", "12", "--threads", "1"])
    printed = capsys.readouterr().out
    assert code == 0 and (tmp_path / "s.samples.parquet").is_file()
    stats = json.loads((tmp_path / "s.stats.json").read_text())
    assert sum(stats["sampled"].values()) == 6  # every sample verified, none lost
    # a random model writes no correct answer: said, and its share went elsewhere
    assert stats["kinds"]["sampled_correct"]["rows"] == 0
    assert "sampled_correct: 0 problem(s)" in printed
    kinds = [json.loads(line)["kind"] for line in out.read_text().splitlines()]
    # 8 asked (20 * 0.6 / 1.5), held at the 6 problems with a wrong sample
    assert kinds.count("sampled_wrong") == stats["kinds"]["sampled_wrong"]["target"] == 6
    assert sum(1 for line in out.read_text().splitlines() if json.loads(line)["label"]) == 20

    # the same completions from the file instead of the model: the same rows, byte for byte
    again = tmp_path / "again.jsonl"
    assert main(["data", "build", "--dataset", "arith_small", "--n", "40", "--out", str(again),
                 "--samples-file", str(tmp_path / "s.samples.parquet")]) == 0
    assert "read 6 sampled completion(s) of 6 problem(s)" in capsys.readouterr().out
    assert again.read_bytes() == out.read_bytes()
    assert json.loads((tmp_path / "again.stats.json").read_text()) == stats
    # --samples N keeps the file's completions of the first N problems of the build order only
    fewer = tmp_path / "fewer.jsonl"
    assert main(["data", "build", "--dataset", "arith_small", "--n", "40", "--out", str(fewer),
                 "--samples-file", str(tmp_path / "s.samples.parquet"), "--samples", "2"]) == 0
    assert "read 2 sampled completion(s) of 2 problem(s)" in capsys.readouterr().out
    kinds = [json.loads(line)["kind"] for line in fewer.read_text().splitlines()]
    assert kinds.count("sampled_wrong") == 2


def test_samples_file_of_two_generators_is_refused(tmp_path, capsys):
    rows = [{"question": "1+1?", "reference": "2", "completion": "\\boxed{2}",
             "problem_id": "p", "generator": g} for g in ("a", "b")]
    path = tmp_path / "two.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["data", "build", "--dataset", "arith_small", "--n", "4", "--out",
                 str(tmp_path / "x.jsonl"), "--samples-file", str(path)]) == 2
    assert "2 generators (a, b)" in capsys.readouterr().err


def test_samples_file_leaves_failed_requests_out_and_says_so(tmp_path, caplog):
    from cooper.labelling.label import sampled_completions

    rows = [{"question": "1+1?", "reference": "2", "completion": c, "problem_id": p,
             "generator": "g", "status": st}
            for c, p, st in (("\\boxed{2}", "a", "ok"), ("", "b", "failed"), ("3", "a", "ok"))]
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert sampled_completions(path) == {"a": ["\\boxed{2}", "3"]}
    assert "1 of 3 row(s) are failed requests" in caplog.text
