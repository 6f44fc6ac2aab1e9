"""The rule-based verifier: is a completion's final answer equivalent to the reference?

Takes completions (text, or chat messages as TRL passes them) and reference answers; extracts
the final answer (the last ``\\boxed{}``, GSM8K's ``####``, "the answer is", or in lenient mode
the last number), compares it with math-verify in a pool of forked worker processes with a
hard wall-clock timeout that works from any thread, and hands on a :class:`Verdict` per
completion (``correct``, the extracted answer, and a reason: correct, wrong, no_answer, timeout,
error). Every later stage trusts it where it is precise: positives, labels, accuracy.
"""

from cooper.verify.extraction import find_answer, normalize_reference
from cooper.verify.verifier import Verdict, Verifier, completion_text, verify, verify_batch

__all__ = ["Verdict", "Verifier", "completion_text", "find_answer", "normalize_reference",
           "verify", "verify_batch"]
