"""Naming a model on the command line: a local model or a served endpoint, in one string.

Grammar of one spec (several are joined with commas in ``--generators``)::

    [LABEL=]hf:MODEL                 a local model: the embedded default, an HF folder or Hub id
    [LABEL=]MODEL                    the same (``hf:`` may be left out)
    [LABEL=]api:MODEL@URL[#KEYVAR]   an OpenAI-compatible endpoint serving MODEL at base URL
                                     URL; its API key is read from $KEYVAR (default: the
                                     command's --api-key-env, itself OPENAI_API_KEY by default)

Examples: ``smollm2-135m-instruct``, ``hf:./ckpt/policy``,
``qwen=api:Qwen/Qwen2.5-1.5B-Instruct@http://127.0.0.1:8000/v1``,
``gpt=api:gpt-4o-mini@https://api.example.com/v1#PROVIDER_API_KEY``.

The label names the backend in output rows; by default it is the spec without ``#KEYVAR``.
A key is named per endpoint so that one provider's key is never sent to another server. The
spec holds the variable's *name*; the key itself is read only by :class:`cooper.infra.endpoint.Endpoint`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from cooper.config.engine import ConfigError
from cooper.config.reward_sections import JudgeConfig
from cooper.errors import UserError
from cooper.infra.endpoint import Endpoint, EndpointGenerator
from cooper.infra.endpoint_records import EndpointConfig
from cooper.infra.generation import HFGenerator

if TYPE_CHECKING:
    from cooper.infra.endpoint_records import EndpointConfig
    from cooper.infra.generation import Generator
    from cooper.labelling.judge import Judge

_LABEL = re.compile(r"^([A-Za-z0-9_.-]+)=(.+)$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class BackendSpec:
    """A model to sample from, as parsed from one spec."""

    label: str
    """the name rows carry"""
    kind: str
    """'hf' (a local model) or 'api' (an OpenAI-compatible endpoint)"""
    model: str
    """local: embedded name, folder or Hub id; api: the served model name"""
    url: str | None = None
    """api only: base URL such as http://127.0.0.1:8000/v1"""
    key_env: str | None = None
    """api only: variable holding the key (None: command default)"""

    @property
    def is_endpoint(self) -> bool:
        return self.kind == "api"


def parse_spec(text: str) -> BackendSpec:
    """One spec (see the module docstring) -> :class:`BackendSpec`; UserError if malformed."""
    text = text.strip()
    if not text:
        raise UserError("empty model spec; write e.g. smollm2-135m-instruct or "
                        "api:MODEL@http://HOST:PORT/v1")
    label = None
    m = _LABEL.match(text)  # "NAME=..." where NAME has no ':' or '/' (so not a path or URL)
    if m:
        label, text = m.group(1), m.group(2)
    if text.startswith("api:"):
        body = text[4:]
        model, sep, url = body.partition("@http")
        if not sep or not model:
            raise UserError(f"endpoint spec '{text}' must be api:MODEL@URL, e.g. "
                            "api:Qwen/Qwen2.5-1.5B-Instruct@http://127.0.0.1:8000/v1")
        url = "http" + url
        url, _, key_env = url.partition("#")
        if key_env and not _ENV_NAME.match(key_env):
            raise UserError(f"'#{key_env[:3]}...' after the URL must name an environment "
                            "variable holding the key (e.g. #OPENAI_API_KEY), never the key itself")
        return BackendSpec(label or f"api:{model}@{url}", "api", model, url, key_env or None)
    model = text[3:] if text.startswith("hf:") else text
    if not model:
        raise UserError("local model spec 'hf:' names no model; e.g. hf:smollm2-135m-instruct")
    return BackendSpec(label or f"hf:{model}", "hf", model)


def parse_specs(text: str) -> list[BackendSpec]:
    """A comma-separated list of specs; labels must be unique."""
    specs = [parse_spec(part) for part in text.split(",") if part.strip()]
    if not specs:
        raise UserError("no generators given; e.g. --generators smollm2-135m-instruct")
    labels = [s.label for s in specs]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise UserError(f"generator named twice: {', '.join(dupes)}; give each a label, "
                        "e.g. a=hf:MODEL,b=hf:MODEL")
    return specs


@dataclass(frozen=True)
class LocalOptions:
    """How local (``hf:``) models are run."""

    batch_size: int = 16
    """sequences per generate call"""
    trust_remote_code: bool = False
    """allow a checkpoint to run its own Python code"""
    dtype: str | None = None
    """model dtype, e.g. bfloat16 (None: the checkpoint's)"""
    threads: int | None = None
    """CPU threads for torch (None: torch's default, one per core); on a small or shared CPU, 1
    can be several times faster: a busy core stalls every multi-threaded matmul"""


def endpoint_config(spec: BackendSpec, base: EndpointConfig | None = None,
                    default_key_env: str = "OPENAI_API_KEY") -> EndpointConfig:
    """The endpoint settings of an ``api:`` spec: ``base``'s limits with the spec's URL,
    model and key variable."""
    assert spec.url is not None
    key_env = spec.key_env or default_key_env
    if base is None:
        return EndpointConfig(spec.url, spec.model, api_key_env=key_env)
    return replace(base, base_url=spec.url, model=spec.model, api_key_env=key_env)


def open_generator(spec: BackendSpec, *, local: LocalOptions | None = None,
                   endpoint: EndpointConfig | None = None,
                   default_key_env: str = "OPENAI_API_KEY") -> Generator:
    """A ready :class:`~cooper.infra.generation.Generator` for a spec (loads a local model)."""
    if spec.is_endpoint:
        cfg = endpoint_config(spec, endpoint, default_key_env)
        return EndpointGenerator(Endpoint(cfg, name=spec.label), name=spec.label)

    local = local or LocalOptions()
    if local.threads is not None:
        import torch

        torch.set_num_threads(local.threads)
    gen = HFGenerator.load(spec.model, trust_remote_code=local.trust_remote_code,
                           batch_size=local.batch_size, dtype=local.dtype)
    gen.name = spec.label
    return gen


def drop_in_judge(judge: str | Judge | JudgeConfig | None, *, budget: float | None = None,
                  threshold: float | None = None) -> tuple[JudgeConfig, Judge | None]:
    """The TRL drop-in's ``judge=`` as ``cooper train``'s ``judge.*`` settings, and the judge
    object when the caller built one. A string is a spec as the CLI takes it: ``gold`` (the
    testbeds' gold judge), ``api:MODEL@URL[#KEYVAR]`` (an OpenAI-compatible endpoint: what
    ``vllm serve MODEL`` or a hosted API offers) or ``hf:MODEL`` (a local model);
    ``budget``/``threshold`` set ``judge.budget``/``judge.threshold`` (None: the default), and
    may not contradict a :class:`~cooper.config.reward_sections.JudgeConfig` that brings its
    own."""
    given = {k: v for k, v in (("budget", budget), ("threshold", threshold)) if v is not None}
    if isinstance(judge, JudgeConfig):
        clash = [f"judge_{k}={v}" for k, v in given.items() if getattr(judge, k) != v]
        if clash:
            raise ConfigError(f"{', '.join(clash)} contradicts the JudgeConfig's own "
                              f"({', '.join(f'{k}={getattr(judge, k)}' for k in given)}): set it "
                              "in the JudgeConfig alone")
        return judge, None
    if judge is not None and not isinstance(judge, str) and not callable(
            getattr(judge, "judge", None)):
        raise ConfigError(f"judge={judge!r} is not a judge: pass 'api:MODEL@URL', 'hf:MODEL', "
                          "'gold', a JudgeConfig, or an object with judge(items) (a Judge)")
    if judge is None or not isinstance(judge, str):
        return JudgeConfig(**given), judge
    spec = judge.strip()
    if spec == "gold":
        return JudgeConfig(backend="gold", **given), None
    parsed = parse_spec(spec)
    if parsed.is_endpoint:
        return JudgeConfig(backend="endpoint", model=parsed.model, base_url=parsed.url,
                           **({"api_key_env": parsed.key_env} if parsed.key_env else {}),
                           **given), None
    return JudgeConfig(backend="local", model=parsed.model, **given), None
