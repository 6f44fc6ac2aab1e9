"""One loader for every model role (policy, reward model, assistant, judge).

A model is named by one string, resolved in this order:

1. ``smollm2-135m-instruct`` (the default): the embedded model, prepared on first use
   (see :mod:`cooper.infra.embedded`);
2. ``embedded-trunk-K``: the embedded model cut to its first K decoder layers (built once in
   the cache; a small reward model's base, :func:`embedded_trunk`);
3. a local Hugging Face folder (anything with a ``config.json``);
4. a Hub id such as ``Qwen/Qwen2.5-1.5B-Instruct``: taken from the local Hugging Face cache, or
   downloaded when the Hub is reachable. With no Hub in reach the error names the offline
   options instead of retrying for half a minute.

Float32 models loaded here on a CPU whose maths library is slow for them run their linear layers
through oneDNN instead (:mod:`cooper.infra.cpu_linear`).

Remote code stays off unless the caller passes ``trust_remote_code=True`` (the CLI's
``--trust-remote-code``): a checkpoint must not run code on the user's machine by default.

The tiny random models of the tests and the testbed are built in :mod:`cooper.experiment.testbed`.
"""

from __future__ import annotations

import logging
import os
import socket
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

from cooper.errors import UserError
from cooper.infra import embedded

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)

DEFAULT_MODEL = embedded.EMBEDDED_NAME


class ModelNotFoundError(UserError, FileNotFoundError):
    """A model name that is neither the embedded default, a local folder, nor a reachable id."""


DTYPES = ("auto", "float32", "bfloat16", "float16")
"""the weight dtypes a model can be loaded in ("auto": the checkpoint's own)"""


def check_dtype(dtype: str | None, flag: str = "--dtype") -> None:
    """A clear error for a dtype name transformers would fail on deep inside a load (an
    AttributeError for 'float99'; a pickling error for 'nn', a torch module); None is the
    checkpoint's own. The CLI calls it when it reads ``flag``, the loaders again."""
    if dtype is not None and dtype not in DTYPES:
        raise UserError(f"{flag} must be one of {', '.join(DTYPES)}, got {dtype!r}")


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "", "false", "False"):
        return False
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname, url.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def resolve(name_or_path: str | os.PathLike = DEFAULT_MODEL, *, progress: bool = True) -> Path:
    """Turn a model name into a local folder that ``from_pretrained`` can read."""
    name = str(name_or_path)
    if name in (DEFAULT_MODEL, "default"):
        return embedded.prepare(progress=progress)
    if name.startswith(TRUNK_PREFIX):
        k = name[len(TRUNK_PREFIX):]
        if not k.isdigit() or int(k) < 1:
            raise ModelNotFoundError(
                f"'{name}': the trunk's layer count must be a positive integer "
                f"({TRUNK_PREFIX}16 is the embedded model's first 16 layers)")
        return embedded_trunk(int(k))
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"{path} exists but is not a Hugging Face model folder (no config.json). "
                "Pass a folder written by save_pretrained, or the embedded default "
                f"'{DEFAULT_MODEL}'.")
        return path
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import HFValidationError, LocalEntryNotFoundError
    from huggingface_hub.utils import validate_repo_id

    try:  # a missing folder spelled 'dir/' or 'a/b c' is no Hub id either: say so, no traceback
        if name.startswith((".", "/", "~")) or name.count("/") != 1:
            raise HFValidationError(name)
        validate_repo_id(name)
    except HFValidationError:
        raise ModelNotFoundError(
            f"No model folder at '{name}'. Pass an existing folder, a Hub id like "
            f"'Qwen/Qwen2.5-1.5B-Instruct', or the embedded default '{DEFAULT_MODEL}'."
        ) from None

    try:
        return Path(snapshot_download(name, local_files_only=True))
    except LocalEntryNotFoundError:
        pass
    if not _hub_reachable():
        raise ModelNotFoundError(
            f"'{name}' is not in the local Hugging Face cache and the Hub cannot be reached "
            "from this machine. Offline options: the embedded default "
            f"'{DEFAULT_MODEL}' (no download needed); a local folder made on a connected "
            f"machine with `hf download {name} --local-dir DIR` and copied here; or set HF_HOME "
            "to a Hugging Face cache that holds it.")
    return Path(snapshot_download(name))


def load_tokenizer(name_or_path: str | os.PathLike = DEFAULT_MODEL, *,
                   trust_remote_code: bool = False,
                   padding_side: str = "left") -> PreTrainedTokenizerBase:
    """Tokenizer with a pad token (the EOS token when the checkpoint has none).

    Left padding by default: batched generation needs every prompt to end at the same column.
    """
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(resolve(name_or_path), trust_remote_code=trust_remote_code)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    tok.padding_side = padding_side
    return tok


def load_causal_lm(name_or_path: str | os.PathLike = DEFAULT_MODEL, *,
                   trust_remote_code: bool = False, dtype: str | None = None,
                   **kwargs) -> PreTrainedModel:
    """A causal LM (policy, assistant, judge, generator). ``dtype``: "float32", "bfloat16", ..."""
    from transformers import AutoModelForCausalLM

    check_dtype(dtype)
    from cooper.infra import cpu_linear  # imports torch: not when the CLI only builds commands

    model = AutoModelForCausalLM.from_pretrained(
        resolve(name_or_path), trust_remote_code=trust_remote_code,
        dtype=dtype or "auto", **kwargs)
    cpu_linear.apply(model)
    return model


def load_sequence_classifier(name_or_path: str | os.PathLike = DEFAULT_MODEL, *,
                             trust_remote_code: bool = False, dtype: str | None = None,
                             **kwargs) -> PreTrainedModel:
    """A one-logit sequence classifier (the reward model) from any causal LM checkpoint.

    A causal LM checkpoint gets a freshly initialised score head (transformers logs that).
    The pad token id is set on the config: the classifier reads the logit at the last
    non-pad token, and fails on batches without it.
    """
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    check_dtype(dtype)
    path = resolve(name_or_path)
    tok = load_tokenizer(path, trust_remote_code=trust_remote_code)
    # transformers reports a new score head as a table of MISSING / UNEXPECTED keys; a head we
    # initialise on purpose is said once in plain words instead (cooper -v keeps the table)
    verbose = log.isEnabledFor(logging.DEBUG)
    before = hf_logging.get_verbosity()
    if not verbose:
        hf_logging.set_verbosity_error()
    try:
        model, info = AutoModelForSequenceClassification.from_pretrained(
            path, num_labels=1, trust_remote_code=trust_remote_code, dtype=dtype or "auto",
            output_loading_info=True, **kwargs)
    finally:
        hf_logging.set_verbosity(before)
    missing = [k for k in info.get("missing_keys", []) if k]
    if any(k.startswith("score.") for k in missing):
        log.info("reward head initialised: %s has not been trained as a reward model yet", path)
    other = [k for k in missing if not k.startswith("score.")]
    if other:
        log.warning("%s: %d weights missing from the checkpoint were initialised at random "
                    "(%s, ...): is this the model you meant?", path, len(other), other[0])
    model.config.pad_token_id = tok.pad_token_id
    from cooper.infra import cpu_linear

    cpu_linear.apply(model)
    return model


TRUNK_PREFIX = "embedded-trunk-"  # a model name: embedded-trunk-K, the first K layers


def embedded_trunk(layers: int, *, source: str | os.PathLike | None = None,
                   cache: Path | None = None) -> Path:
    """The embedded model cut to its first ``layers`` decoder layers (its embeddings, tokenizer
    and final norm kept; the LM head is dropped when a score head is put on it).

    A reward model built on it starts from pretrained token and number representations, so it learns
    to compare an answer with the reference from a few thousand triples, which a tiny model trained
    from scratch does not (docs/experiment_history.md); and it scores a step's samples in about a
    second on one CPU thread. Built once into the model cache (``source`` and ``cache``, for tests:
    another causal LM folder, and where to keep its cut).
    """
    import tempfile

    name = Path(source).name if source else embedded.EMBEDDED_NAME
    target = (cache or embedded.cache_root() / "models") / f"{name}-first{layers}"
    if (target / "config.json").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    src = Path(source) if source else embedded.prepare(progress=False)
    with embedded._lock(target.parent / f".{target.name}.lock"), embedded.keeping_random_state():
        if (target / "config.json").is_file():
            return target
        model = load_causal_lm(src, dtype="float32")
        total = len(model.model.layers)
        if layers > total:
            raise UserError(f"{name} has {total} layers; ask for at most {total}")
        model.model.layers = model.model.layers[:layers]
        model.config.num_hidden_layers = layers
        if getattr(model.config, "layer_types", None):  # newer configs list a type per layer
            model.config.layer_types = model.config.layer_types[:layers]
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".tmp-") as tmp:
            build = Path(tmp) / "trunk"
            model.save_pretrained(build)
            load_tokenizer(src).save_pretrained(build)
            build.rename(target)
    return target
