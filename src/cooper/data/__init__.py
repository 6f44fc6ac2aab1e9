"""Data: problems, the prompt, and labelled examples for the reward model.

Takes the bundled datasets (GSM8K, SVAMP, MATH500, synthetic arithmetic) or a user's
``.jsonl``/``.json``/``.parquet`` file with a field mapping; checks every row (a bad row stops
the load with its file and line, or is skipped and counted); and hands on :class:`Problem`
records (id, question, final reference answer, source), the one prompt every model is given
(:mod:`.prompts`), answer-changed copies of gold solutions (:mod:`.perturb`), gold solutions
in several surface forms (:mod:`.surface_forms`), the kinds of wrong completion
(:mod:`.negative_kinds`) and the mixed, verifier-checked reward-model set built from them
(:mod:`.mix`, ``cooper data build``), labelled answer statements for a learned judge
(:mod:`.equivalence`), and labelled reward-model triples read from files (:mod:`.triples`).
"""

from cooper.data.problems import DataError, Fields, load_problems
from cooper.data.prompts import prompt_messages, render_prompt
from cooper.data.triples import load_triples
from cooper.types import LabelledTriple, Problem, Triple

__all__ = ["DataError", "Fields", "LabelledTriple", "Problem", "Triple", "load_problems",
           "load_triples", "prompt_messages", "render_prompt"]
