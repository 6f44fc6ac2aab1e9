"""The prompt: how a problem is put to a model, defined once for training, evaluation and data.

A problem becomes one user message, the question followed by the instruction to reason and box the
final answer (``docs/evaluation.md`` "Protocol"; a template with a ``{question}`` placeholder may
replace it in evaluation). The message becomes prompt text through the model's chat template, or,
for a tokenizer without one, the plain-text fallback of
:func:`cooper.infra.generation.render_messages`: the same function every generator uses, so what
``cooper data show --prompt`` prints is what the model is fed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cooper.errors import UserError
from cooper.infra.generation import Messages, render_messages

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."
QUESTION_FIELD = "{question}"
DEFAULT_PROMPT_TEMPLATE = QUESTION_FIELD + "\n" + BOXED_INSTRUCTION


def check_template(template: str) -> str:
    """A prompt template must contain ``{question}``; nothing else in it is interpreted."""
    if QUESTION_FIELD not in template:
        raise UserError("the prompt template must contain the placeholder {question}, e.g. "
                        f"'{{question}}\\n{BOXED_INSTRUCTION}'")
    return template


def prompt_messages(question: str, template: str | None = None) -> Messages:
    """The conversation for one problem: the template with ``{question}`` filled in.

    Only ``{question}`` is replaced (no ``str.format``): math templates contain braces such as
    ``\\boxed{}`` that must reach the model unchanged.
    """
    text = check_template(template or DEFAULT_PROMPT_TEMPLATE).replace(QUESTION_FIELD, question)
    return [{"role": "user", "content": text}]


def render_prompt(tokenizer: PreTrainedTokenizerBase, question: str,
                  template: str | None = None) -> str:
    """The prompt text a model with ``tokenizer`` is fed for ``question``."""
    return render_messages(tokenizer, prompt_messages(question, template))
