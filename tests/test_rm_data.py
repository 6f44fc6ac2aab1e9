"""Reading labelled triples: our layout, VerifyBench's, parquet, and bad rows."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cooper.data.problems import DataError
from cooper.data.triples import load_triples
from cooper.types import Triple


def _jsonl(path, rows):
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_our_layout_and_verifybench_layout(tmp_path):
    f = _jsonl(tmp_path / "mixed.jsonl", [
        {"question": "Q1", "reference": "5", "completion": "c1", "label": True,
         "id": "a", "source": "gsm8k"},
        {"question": "Q2", "answer": 145.0, "completion": "c2", "gold_correct": 0},
    ])
    rows = load_triples(f)
    assert [r.triple for r in rows] == [Triple("Q1", "5", "c1"), Triple("Q2", "145", "c2")]
    assert rows.labels == [True, False]
    assert [r.id for r in rows] == ["a", "mixed-1"]
    assert [r.source for r in rows] == ["gsm8k", "mixed"]  # no source column: the file name


def test_parquet(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"question": ["Q"], "reference": ["1"], "completion": ["c"],
                             "label": [1]}), path)
    assert load_triples(path).rows[0].label is True


@pytest.mark.parametrize("row, message", [
    ({"question": "Q", "reference": "1", "completion": "c"}, "missing field.*'label'"),
    ({"question": "Q", "reference": "1", "completion": "c", "label": "yes"}, "bad 'label'"),
    ({"question": "", "reference": "1", "completion": "c", "label": 1}, "empty"),
    ({"question": "Q", "reference": "1", "completion": 3, "label": 1}, "expected text"),
    ("{not json", "not valid JSON"),
])
def test_bad_rows_name_file_and_line(tmp_path, row, message):
    good = {"question": "Q", "reference": "1", "completion": "c", "label": 1}
    f = _jsonl(tmp_path / "bad.jsonl", [good, row])
    with pytest.raises(DataError, match=message) as err:
        load_triples(f)
    assert f"{f}:2" in str(err.value) and "--skip-bad" in str(err.value)
    rows = load_triples(f, skip_bad=True)
    assert len(rows) == 1 and len(rows.skipped) == 1 and rows.skipped[0].where == f"{f}:2"


def test_labels_optional_for_scoring(tmp_path):
    f = _jsonl(tmp_path / "u.jsonl", [{"question": "Q", "reference": "1", "completion": "c"}])
    assert load_triples(f, require_label=False).rows[0].label is None


def test_kind_is_read_and_written_back(tmp_path):
    from cooper.types import LabelledTriple

    f = _jsonl(tmp_path / "k.jsonl", [
        {"question": "Q", "reference": "5", "completion": "c", "label": 0, "kind": "empty_answer"},
        {"question": "Q", "reference": "5", "completion": "c", "label": 1},
    ])
    rows = load_triples(f)
    assert [r.kind for r in rows] == ["empty_answer", None]
    assert rows.rows[0].to_json()["kind"] == "empty_answer"
    assert "kind" not in rows.rows[1].to_json()  # files without kinds keep their layout
    assert LabelledTriple(Triple("Q", "1", "c"), True, "i", "s").kind is None
