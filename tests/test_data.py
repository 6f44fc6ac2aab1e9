"""Dataset loaders, reference normalisation, bad-row handling and prompt building."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from cooper.data.problems import DataError, Fields, gsm8k_final_answer, load_problems
from cooper.data.prompts import BOXED_INSTRUCTION, render_prompt
from cooper.errors import UserError
from cooper.verify.extraction import number_to_str


@pytest.mark.parametrize(("name", "split", "n"), [
    ("gsm8k", "train", 7473), ("gsm8k", "test", 1319), ("svamp", "test", 1000),
    ("math500", "test", 500)])
def test_bundled_sizes_and_unique_ids(name, split, n):
    ps = load_problems(name, split)
    assert len(ps) == n
    assert len({p.id for p in ps}) == n
    assert all(p.question.strip() and p.reference.strip() for p in ps)
    assert {p.source for p in ps} == {name}


def test_bundled_references_are_final_answers():
    g = load_problems("gsm8k", "test", limit=1)[0]
    assert g.reference == "18" and g.solution.endswith("#### 18")
    s = load_problems("svamp", limit=1)[0]
    assert s.reference == "51"  # stored as 51.0
    assert s.question.endswith("how much do you have to pay to buy each pack?")
    m = load_problems("math500", limit=1)[0]
    assert m.reference == r"\left( 3, \frac{\pi}{2} \right)"


def test_gsm8k_references_are_numbers():
    for p in load_problems("gsm8k", "train"):
        float(p.reference)  # raises if a comma or text survived


@pytest.mark.parametrize(("x", "s"), [(145.0, "145"), (0.5, "0.5"), (-3, "-3"), (2.25, "2.25"),
                                      (1e20, "1e+20")])
def test_number_to_str(x, s):
    assert number_to_str(x) == s


def test_gsm8k_final_answer_strips_commas_and_needs_marker():
    assert gsm8k_final_answer("so 1,000 + 5\n#### 1,005") == "1005"
    with pytest.raises(ValueError):
        gsm8k_final_answer("no marker")


def test_unknown_dataset_and_split_name_what_exists():
    with pytest.raises(UserError, match="gsm8k, svamp, math500"):
        load_problems("gsm9k")
    with pytest.raises(UserError, match="splits: test"):
        load_problems("svamp", "train")


def _jsonl(path, rows):
    path.write_bytes(b"".join(r if isinstance(r, bytes) else (json.dumps(r) + "\n").encode()
                              for r in rows))
    return path


def test_generic_jsonl_with_field_mapping(tmp_path):
    f = _jsonl(tmp_path / "mine.jsonl", [
        {"q": "What is 1+1?", "ans": 2, "key": "a"},
        {"q": "What is half of 3?", "ans": "1.5", "key": "b"},
        {"q": "Worked?", "ans": "1+1=2\n#### 2", "key": "c"}])
    ps = load_problems(f, fields=Fields(question="q", reference="ans", id="key"))
    assert [p.id for p in ps] == ["a", "b", "c"]
    assert [p.reference for p in ps] == ["2", "1.5", "2"]
    assert ps[2].solution == "1+1=2\n#### 2" and ps[0].source == "mine"


def test_generic_json_and_parquet(tmp_path):
    rows = [{"question": "Q1?", "answer": "1"}, {"question": "Q2?", "answer": "2"}]
    (tmp_path / "a.json").write_text(json.dumps(rows))
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "a.parquet")
    for name in ("a.json", "a.parquet"):
        ps = load_problems(tmp_path / name)
        assert [p.reference for p in ps] == ["1", "2"]
        assert [p.id for p in ps] == ["a-0", "a-1"]


@pytest.mark.parametrize(("bad", "message"), [
    (b"{not json\n", "not valid JSON"),
    (b'{"question": "Q?", "answer": "1", "x": "\xff\xfe"}\n', "invalid UTF-8"),
    (json.dumps({"answer": "1"}).encode() + b"\n", "missing field 'question'"),
    (json.dumps({"question": "  ", "answer": "1"}).encode() + b"\n", "empty or non-text question"),
    (json.dumps({"question": "Q?"}).encode() + b"\n", "missing field 'answer'"),
    (json.dumps({"question": "Q?", "answer": ""}).encode() + b"\n", "reference is empty"),
    (b"[1, 2]\n", "expected an object"),
])
def test_malformed_row_names_file_and_line(tmp_path, bad, message):
    f = _jsonl(tmp_path / "bad.jsonl", [{"question": "Q0?", "answer": "0"}, bad,
                                         {"question": "Q2?", "answer": "2"}])
    with pytest.raises(DataError, match=message) as err:
        load_problems(f)
    assert f"{f}:2" in str(err.value) and "--skip-bad" in str(err.value)
    ps = load_problems(f, skip_bad=True)
    assert [p.reference for p in ps] == ["0", "2"]
    assert len(ps.skipped) == 1 and ps.skipped[0].where == f"{f}:2"


def test_duplicate_ids_and_oversized_rows(tmp_path):
    f = _jsonl(tmp_path / "dup.jsonl", [{"question": "A?", "answer": 1, "id": "x"},
                                         {"question": "B?", "answer": 2, "id": "x"}])
    with pytest.raises(DataError, match=r"dup.jsonl:2: duplicate id 'x' \(first at .*dup.jsonl:1\)"):
        load_problems(f, fields=Fields(id="id"))
    assert len(load_problems(f, fields=Fields(id="id"), skip_bad=True)) == 1
    big = _jsonl(tmp_path / "big.jsonl", [{"question": "Q" * (10 << 20), "answer": 1},
                                           {"question": "ok?", "answer": 2}])
    with pytest.raises(DataError, match="big.jsonl:1: row is 10.0 MiB"):
        load_problems(big)
    assert [p.reference for p in load_problems(big, skip_bad=True)] == ["2"]


def test_file_with_no_usable_rows_is_an_error(tmp_path):
    f = _jsonl(tmp_path / "empty.jsonl", [b"\n", b"{bad\n"])
    with pytest.raises(DataError, match="no usable problems"):
        load_problems(f, skip_bad=True)


def test_render_prompt_uses_chat_template():
    from cooper.experiment.testbed import tiny_tokenizer

    tok = tiny_tokenizer()
    text = render_prompt(tok, "What is 2+2?")
    assert text.startswith("<|im_start|>user\nWhat is 2+2?\n" + BOXED_INSTRUCTION)
    assert text.endswith("<|im_start|>assistant\n")



def test_data_show_prompt_is_what_the_generator_feeds(tiny_models):
    """`cooper data show --prompt` and every generator build the prompt in one place, also for
    a tokenizer without a chat template (their fallbacks used to differ)."""
    from cooper.data.prompts import prompt_messages
    from cooper.experiment.testbed import tiny_tokenizer
    from cooper.infra.generation import HFGenerator
    from cooper.infra.models import load_causal_lm

    tok = tiny_tokenizer()
    tok.chat_template = None
    gen = HFGenerator(load_causal_lm(tiny_models.policy), tok)
    assert render_prompt(tok, "Q?") == gen.render(prompt_messages("Q?"))
    assert render_prompt(tok, "Q?").startswith("Q?\n" + BOXED_INSTRUCTION)


def test_cli_data_show_each_dataset():
    for name, ref in (("gsm8k", "reference: 18"), ("svamp", "reference: 51"),
                      ("math500", r"reference: \left( 3, \frac{\pi}{2} \right)")):
        out = run_cli("data", "show", name, "--n", "1").stdout
        assert "question : " in out and ref in out


def test_cli_data_show_custom_fields_and_bad_file(tmp_path):
    f = _jsonl(tmp_path / "m.jsonl", [{"prob": "What is 3*3?", "sol": 9}])
    out = run_cli("data", "show", f, "--question-field", "prob", "--answer-field", "sol",
                  "--json").stdout
    assert json.loads(out) == {"id": "m-0", "source": "m", "question": "What is 3*3?",
                               "reference": "9"}
    bad = _jsonl(tmp_path / "bad.jsonl", [{"question": "Q?", "answer": 1}, b"oops\n"])
    proc = run_cli("data", "show", bad, check=False)
    assert proc.returncode == 2 and f"{bad}:2: not valid JSON" in proc.stderr
    assert "Traceback" not in proc.stderr
