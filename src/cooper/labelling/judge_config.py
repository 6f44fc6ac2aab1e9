"""The judge ``cooper train``'s ``judge.*`` settings name, built: kept apart from the judges
themselves so that the LLM judges (:mod:`.judge`) and the testbeds' stand-ins
(:mod:`.gold_judge`) need not import each other."""

from __future__ import annotations

from typing import TYPE_CHECKING

from cooper.infra.generation import HFGenerator
from cooper.labelling.gold_judge import FoolableJudge, GoldJudge
from cooper.labelling.judge import Judge, VerifierJudge, make_judge

if TYPE_CHECKING:
    from cooper.infra.generation import Generator


def judge_from_config(cfg, *, seed: int = 0, dtype: str | None = None) -> Judge | None:
    """The judge ``cooper train``'s ``judge.*`` settings name (a
    :class:`~cooper.config.reward_sections.JudgeConfig`), None for ``backend=none``: the gold
    judge, a local model (loaded here, in ``dtype``) or an OpenAI-compatible endpoint."""
    if cfg.backend == "none":
        return None
    if cfg.backend == "gold":  # the testbeds' stand-in for an LLM judge
        if cfg.trigger or cfg.near_miss:
            return FoolableJudge(trigger=cfg.trigger, near_miss=cfg.near_miss, seed=seed)
        return GoldJudge(error_rate=cfg.error_rate, seed=seed)
    if cfg.backend == "verifier":
        return VerifierJudge.load(cfg.model, batch_size=cfg.batch_size, dtype=dtype)
    if cfg.backend == "local":
        generator: Generator = HFGenerator.load(cfg.model, batch_size=cfg.batch_size,
                                                dtype=dtype)
        generator.name = f"judge:{cfg.model}"
    else:
        from cooper.infra.endpoint import Endpoint, EndpointGenerator
        from cooper.infra.endpoint_records import EndpointConfig

        endpoint = Endpoint(EndpointConfig(cfg.base_url, cfg.model, api_key_env=cfg.api_key_env,
                                           concurrency=cfg.concurrency, timeout_s=cfg.timeout_s,
                                           max_retries=cfg.max_retries), name="judge")
        generator = EndpointGenerator(endpoint, name=f"judge:{cfg.model}")
    return make_judge(generator, mode=cfg.mode, max_tokens=cfg.max_new_tokens,
                      batch_size=cfg.batch_size)
