"""Files written whole or not at all: the one write-then-rename of cooper-rl.

Markers of finished stages, results, resumable chunks and statistics are read back by a rerun,
so a crash must never leave half of one. The data goes to a temporary file in the same folder
(a rename is atomic only within one file system), is flushed to disk, and is renamed over the
target; then the folder itself is synced, so the rename survives a power cut too. A reader sees
the old file or the complete new one. A failed write removes its temporary file and leaves the
target as it was.

Temporary files are named ``.tmp-UNIQUE-NAME``: unique, so two writers of one path never share
one, and hidden, with one prefix, so :func:`remove_temp_files` finds what a killed writer left.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from cooper.errors import UserError

TEMP_PREFIX = ".tmp-"


def temp_path(path: str | os.PathLike) -> Path:
    """A fresh temporary name beside ``path`` (same folder, hence same file system)."""
    path = Path(path)
    return path.with_name(f"{TEMP_PREFIX}{uuid.uuid4().hex}-{path.name}")


def fsync_dir(folder: str | os.PathLike) -> None:
    """Make a rename inside ``folder`` durable; a no-op where the file system cannot sync a
    folder (the rename has happened either way, so failing the write would be wrong)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_open(path: str | os.PathLike, mode: str = "wb") -> Iterator[IO[Any]]:
    """A file to write ``path`` through: when the block ends normally it is synced and renamed
    onto ``path``; when it raises, it is removed and ``path`` is untouched. ``mode`` is "wb" or
    "w" (text, UTF-8)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"atomic_open writes a whole file: mode 'w' or 'wb', not {mode!r}")
    path = Path(path)
    tmp = temp_path(path)
    try:
        with open(tmp, mode, **({} if "b" in mode else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path.parent)


def write_atomic(path: str | os.PathLike, data: str | bytes) -> None:
    """Write ``data`` (text is UTF-8) so that ``path`` is either all of it or untouched."""
    with atomic_open(path, "wb") as f:
        f.write(data.encode("utf-8") if isinstance(data, str) else data)


def write_json(path: str | os.PathLike, obj: Any, *, indent: int | None = 2,
               default: Any = None) -> None:
    """``obj`` as JSON (one trailing newline), written atomically. ``default``: as in
    :func:`json.dumps`, e.g. ``str`` for paths and other values JSON has no type for."""
    write_atomic(path, json.dumps(obj, indent=indent, default=default) + "\n")


def read_json(path: str | os.PathLike) -> Any | None:
    """The JSON in ``path``, or None when there is no such file (a stage not done yet)."""
    path = Path(path)
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


class UnreadableJSON(ValueError):
    """JSON that cannot be parsed; the message says why in a few words, for the caller's own
    error (which file, and what to do about it)."""


def parse_json(data: bytes) -> Any:
    """The JSON in ``data``, or :class:`UnreadableJSON`: ``not JSON: MSG, line L column C`` (cut
    short or edited) or ``not UTF-8 text``."""
    try:
        return json.loads(data)
    except json.JSONDecodeError as e:
        raise UnreadableJSON(f"not JSON: {e.msg}, line {e.lineno} column {e.colno}") from e
    except UnicodeDecodeError as e:
        raise UnreadableJSON("not UTF-8 text") from e


def remove_temp_files(folder: str | os.PathLike) -> None:
    """Remove the temporary files a killed writer left in ``folder`` (not its subfolders)."""
    folder = Path(folder)
    if folder.is_dir():
        for stale in folder.glob(f"{TEMP_PREFIX}*"):
            stale.unlink(missing_ok=True)


# ------------------------------------------------------------------ output paths, checked before work

def _first_existing(path: Path) -> Path:
    for p in (path, *path.parents):
        if p.exists():
            return p
    return Path(".")


def check_out_file(flag: str, out: str | os.PathLike) -> None:
    """``out`` can be written as a file: not an existing folder, and no file where a folder of
    its path must be (mkdir would fail there only after the work is done)."""
    path = Path(out).expanduser()
    if path.is_dir():
        raise UserError(f"{flag} {path} is a directory; give a file path (e.g. "
                        f"{path / 'out'}{path.suffix or ''})")
    if not _first_existing(path.parent).is_dir():
        raise UserError(f"{flag} {path}: {_first_existing(path.parent)} is a file, not a "
                        "folder; pick another path")


def check_out_dir(flag: str, out: str | os.PathLike) -> None:
    """``out`` can be made or used as a folder: not an existing file, nor below one."""
    path = Path(out).expanduser()
    blocker = _first_existing(path)
    if not blocker.is_dir():
        what = f"{path} is a file" if blocker == path else f"{blocker} is a file"
        raise UserError(f"{flag} {path}: {what}; this writes a folder, so pick another path")
