"""Atomic file writes (cooper.infra.files): whole or untouched, nothing left behind."""

from __future__ import annotations

import os

import pytest

from cooper.infra import files
from cooper.infra.files import (
    atomic_open,
    read_json,
    remove_temp_files,
    write_atomic,
    write_json,
)


def test_write_atomic_text_and_bytes(tmp_path):
    path = tmp_path / "a.txt"
    write_atomic(path, "héllo\n")
    assert path.read_bytes() == "héllo\n".encode()
    write_atomic(path, b"\x00\x01")  # replaces the old content
    assert path.read_bytes() == b"\x00\x01"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt"]  # no temporary file left


def test_write_json_and_read_json(tmp_path):
    path = tmp_path / "r.json"
    assert read_json(path) is None  # absent: a stage not done yet
    write_json(path, {"a": [1, 2], "p": tmp_path}, default=str)
    assert read_json(path) == {"a": [1, 2], "p": str(tmp_path)}
    assert path.read_text().endswith("}\n")
    write_json(path, [1], indent=None)
    assert path.read_text() == "[1]\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


def test_failure_mid_write_leaves_old_file(tmp_path):
    path = tmp_path / "marker.json"
    write_json(path, {"old": True})
    with pytest.raises(RuntimeError), atomic_open(path, "w") as f:
        f.write('{"new": ')
        raise RuntimeError("killed mid-write")
    assert read_json(path) == {"old": True}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["marker.json"]


def test_failed_rename_leaves_old_file(tmp_path, monkeypatch):
    path = tmp_path / "out.txt"
    write_atomic(path, "old")

    def no_replace(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(files.os, "replace", no_replace)
    with pytest.raises(OSError, match="disk full"):
        write_atomic(path, "new")
    assert path.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.txt"]


def test_unserialisable_json_leaves_no_file(tmp_path):
    path = tmp_path / "x.json"
    with pytest.raises(TypeError):
        write_json(path, {"x": object()})
    assert not list(tmp_path.iterdir())


def test_folder_that_cannot_be_synced_is_not_an_error(tmp_path, monkeypatch):
    # some file systems refuse fsync on a folder; the rename has happened, so the write counts
    real_fsync = os.fsync

    def fsync(fd):
        if os.path.isdir(f"/proc/self/fd/{fd}"):
            raise OSError("not supported")
        return real_fsync(fd)

    monkeypatch.setattr(files.os, "fsync", fsync)
    write_atomic(tmp_path / "a", "x")
    assert (tmp_path / "a").read_text() == "x"


def test_temp_names_are_unique_and_removable(tmp_path):
    names = {files.temp_path(tmp_path / "a.json").name for _ in range(50)}
    assert len(names) == 50 and all(n.startswith(files.TEMP_PREFIX) for n in names)
    (tmp_path / next(iter(names))).write_text("half")
    (tmp_path / "keep.json").write_text("{}")
    remove_temp_files(tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["keep.json"]
    remove_temp_files(tmp_path / "missing")  # no folder: nothing to do


def test_atomic_open_rejects_append(tmp_path):
    with pytest.raises(ValueError), atomic_open(tmp_path / "a", "a"):
        pass
