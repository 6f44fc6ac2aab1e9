"""One loader for every model role (policy, reward model, assistant, judge), and tiny test models.

A model is named by one string, resolved in this order:

1. ``smollm2-135m-instruct`` (the default): the embedded model, prepared on first use
   (see :mod:`cooper.infra.embedded`);
2. a local Hugging Face folder (anything with a ``config.json``);
3. a Hub id such as ``Qwen/Qwen2.5-1.5B-Instruct``: taken from the local Hugging Face cache, or
   downloaded when the Hub is reachable. With no Hub in reach the error names the offline
   options instead of retrying for half a minute.

Remote code stays off unless the caller passes ``trust_remote_code=True`` (the CLI's
``--trust-remote-code``): a checkpoint must not run code on the user's machine by default.

:func:`build_tiny_models` writes a tiny random causal LM and a tiny sequence classifier that
share a character-level tokenizer, built from a config with no download: the models of the
unit and smoke tests. The classifier's folder carries a minimal ``cooper_rm.json``, so it is read
in our input format, not as a released VerifyRM.
"""

from __future__ import annotations

import logging
import os
import socket
import string
from dataclasses import dataclass
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
    path = Path(name).expanduser()
    if path.exists():
        if not (path / "config.json").is_file():
            raise ModelNotFoundError(
                f"{path} exists but is not a Hugging Face model folder (no config.json). "
                "Pass a folder written by save_pretrained, or the embedded default "
                f"'{DEFAULT_MODEL}'.")
        return path
    if name.startswith((".", "/", "~")) or name.count("/") != 1:
        raise ModelNotFoundError(
            f"No model folder at '{name}'. Pass an existing folder, a Hub id like "
            f"'Qwen/Qwen2.5-1.5B-Instruct', or the embedded default '{DEFAULT_MODEL}'.")
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

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

    return AutoModelForCausalLM.from_pretrained(
        resolve(name_or_path), trust_remote_code=trust_remote_code,
        dtype=dtype or "auto", **kwargs)


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
    return model


# --------------------------------------------------------------------------- tiny models

TINY_SPECIALS = ["<pad>", "<unk>", "<|im_start|>", "<|im_end|>"]
CHATML_TEMPLATE = (
    "{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + '<|im_end|>\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{'<|im_start|>assistant\n'}}{% endif %}")


def tiny_tokenizer() -> PreTrainedTokenizerBase:
    """A character-level tokenizer over printable ASCII with ChatML specials (102 tokens)."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    chars = [c for c in string.printable if c not in "\x0b\x0c"]
    vocab = {t: i for i, t in enumerate(TINY_SPECIALS + chars)}
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    backend.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(
        tokenizer_object=backend, pad_token="<pad>", unk_token="<unk>",
        bos_token="<|im_start|>", eos_token="<|im_end|>",
        additional_special_tokens=["<|im_start|>", "<|im_end|>"])
    tok.chat_template = CHATML_TEMPLATE
    tok.padding_side = "left"
    return tok


@dataclass(frozen=True)
class TinyModels:
    """Folders of a tiny causal LM and a tiny one-logit classifier sharing a tokenizer."""

    policy: Path
    reward: Path


def build_tiny_models(out_dir: str | os.PathLike, *, hidden_size: int = 32, layers: int = 2,
                      heads: int = 2, seed: int = 0) -> TinyModels:
    """Write two tiny random Llama models (``out/policy``, ``out/reward``); no download."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM, LlamaForSequenceClassification

    out = Path(out_dir)
    tok = tiny_tokenizer()
    config = LlamaConfig(
        vocab_size=len(tok), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=heads,
        max_position_embeddings=2048, pad_token_id=tok.pad_token_id,
        bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id, tie_word_embeddings=False)
    torch.manual_seed(seed)
    policy = LlamaForCausalLM(config)
    policy.generation_config.pad_token_id = tok.pad_token_id
    config_rm = LlamaConfig.from_dict(config.to_dict())
    config_rm.num_labels = 1
    reward = LlamaForSequenceClassification(config_rm)
    paths = TinyModels(out / "policy", out / "reward")
    for model, path in ((policy, paths.policy), (reward, paths.reward)):
        model.save_pretrained(path)
        tok.save_pretrained(path)
    mark_as_ours(paths.reward)
    return paths


def mark_as_ours(folder: str | os.PathLike) -> None:
    """Give an untrained sequence classifier of ours a minimal ``cooper_rm.json`` (our template,
    no budget or temperature yet) unless it has one: a folder without the file that holds a
    one-label classifier is read in the released VerifyRM format (:mod:`cooper.rm.model`)."""
    from cooper.infra.files import write_json
    from cooper.rm.template import COOPER, SPEC_FILE, TEMPLATE_VERSION

    path = Path(folder) / SPEC_FILE
    if not path.is_file():
        write_json(path, {"template": COOPER, "template_version": TEMPLATE_VERSION})
