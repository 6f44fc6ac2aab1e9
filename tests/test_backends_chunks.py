"""Model specs on the command line, and the committed-parts store behind resumable jobs."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cooper.errors import UserError
from cooper.infra.chunks import ChunkStore
from cooper.infra.endpoint import EndpointConfig
from cooper.labelling.backends import endpoint_config, parse_spec, parse_specs


def test_spec_grammar():
    s = parse_spec("smollm2-135m-instruct")
    assert (s.kind, s.model, s.label) == ("hf", "smollm2-135m-instruct", "hf:smollm2-135m-instruct")
    assert parse_spec("hf:./ckpt/policy").model == "./ckpt/policy"
    s = parse_spec("api:Qwen/Qwen2.5-1.5B-Instruct@http://127.0.0.1:8000/v1")
    assert (s.kind, s.model, s.url, s.key_env) == (
        "api", "Qwen/Qwen2.5-1.5B-Instruct", "http://127.0.0.1:8000/v1", None)
    assert s.label == "api:Qwen/Qwen2.5-1.5B-Instruct@http://127.0.0.1:8000/v1"
    s = parse_spec("gpt=api:gpt-4o-mini@https://api.example.com/v1#MY_KEY")
    assert (s.label, s.model, s.url, s.key_env) == (
        "gpt", "gpt-4o-mini", "https://api.example.com/v1", "MY_KEY")
    specs = parse_specs("a=hf:m, b=hf:m ,api:x@http://h:1/v1")
    assert [x.label for x in specs] == ["a", "b", "api:x@http://h:1/v1"]


@pytest.mark.parametrize("bad", ["", "api:model-without-url", "api:@http://h/v1",
                                 "api:m@http://h/v1#sk-not-a-var-name!", "hf:", "m,m"])
def test_bad_specs_are_user_errors(bad):
    with pytest.raises(UserError) as e:
        parse_specs(bad)
    assert "sk-not" not in str(e.value)  # a key typed by mistake is not echoed


def test_endpoint_config_takes_url_model_and_key_variable_from_the_spec():
    base = EndpointConfig("http://unset", "unset", concurrency=3, timeout_s=2)
    cfg = endpoint_config(parse_spec("api:m@http://h:1/v1#K2"), base, default_key_env="K1")
    assert (cfg.base_url, cfg.model, cfg.api_key_env, cfg.concurrency, cfg.timeout_s) == (
        "http://h:1/v1", "m", "K2", 3, 2)
    assert endpoint_config(parse_spec("api:m@http://h:1/v1"), base, "K1").api_key_env == "K1"


SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def test_parts_commit_resume_and_assemble(tmp_path):
    out = tmp_path / "x.parquet"
    store = ChunkStore(out, SCHEMA, ("k",))
    store.commit([{"k": 1, "v": "a"}, {"k": 2, "v": "failed"}])
    store.commit([{"k": 2, "v": "retried"}, {"k": 3, "v": "c"}])
    (store.parts_dir / ".tmp-123-part-00002.parquet").write_bytes(b"half a part")
    assert not out.exists()
    # a new store (a rerun) sees the committed rows; the later part wins; debris is ignored
    again = ChunkStore(out, SCHEMA, ("k",))
    assert {k[0]: r["v"] for k, r in again.existing().items()} == {1: "a", 2: "retried", 3: "c"}
    assert not list(store.parts_dir.glob(".tmp-*"))
    rows = again.finalize(order=lambda r: -r["k"])
    assert [r["k"] for r in rows] == [3, 2, 1]
    assert pq.read_table(out).to_pylist() == rows and not store.parts_dir.exists()
    # after assembly the output itself is the record of finished rows
    assert len(ChunkStore(out, SCHEMA, ("k",)).existing()) == 3


def test_rows_are_routed_to_several_outputs(tmp_path):
    out, side = tmp_path / "kept.parquet", tmp_path / "dropped.parquet"
    store = ChunkStore(out, SCHEMA, ("k",), extra_outputs=[side])
    store.commit([{"k": i, "v": str(i)} for i in range(5)])
    store.finalize(route=lambda r: r["k"] % 2)
    assert [r["k"] for r in pq.read_table(out).to_pylist()] == [0, 2, 4]
    assert [r["k"] for r in pq.read_table(side).to_pylist()] == [1, 3]
    assert len(ChunkStore(out, SCHEMA, ("k",), extra_outputs=[side]).existing()) == 5


def test_foreign_files_are_refused(tmp_path):
    with pytest.raises(UserError):
        ChunkStore(tmp_path / "x.jsonl", SCHEMA, ("k",))
    out = tmp_path / "x.parquet"
    pq.write_table(pa.table({"other": [1]}), out)
    with pytest.raises(UserError, match="lacks column"):
        ChunkStore(out, SCHEMA, ("k",)).existing()
