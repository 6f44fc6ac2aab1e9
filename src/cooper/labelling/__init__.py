"""Labelling: training data for the reward model, from completions checked twice.

Takes problems and model specs (local models or OpenAI-compatible endpoints, :mod:`.backends`);
samples completions into a resumable parquet file (:mod:`.collect`, ``cooper data collect``),
asks an LLM judge whether each final answer matches the reference (:mod:`.judge`), and combines
its vote with the rule-based verifier's under a labelling policy (:mod:`.label`, ``cooper data
label``); hands on labelled (question, reference, completion, label) rows that ``cooper rm
train`` reads as they are, the dropped rows with their reasons, and statistics. ``collect`` and
``label`` import pyarrow, so they are imported from their modules, not from here.
"""

from cooper.labelling.backends import (
    BackendSpec,
    LocalOptions,
    endpoint_config,
    open_generator,
    parse_spec,
    parse_specs,
)
from cooper.labelling.judge import Judge, JudgeItem, JudgeVerdict, make_judge

__all__ = ["BackendSpec", "Judge", "JudgeItem", "JudgeVerdict", "LocalOptions",
           "endpoint_config", "make_judge", "open_generator", "parse_spec", "parse_specs"]
