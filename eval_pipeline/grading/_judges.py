"""LLM judges: reply evaluators (Calibrate), tool-argument criteria, and pairwise consistency (oxy)."""

from __future__ import annotations

import hashlib
import html
import json
import re
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from eval_pipeline.agents import AgentError, ChatMessage
from eval_pipeline.grading._extraction import EXTRACTION_SYSTEM
from eval_pipeline.grading._tool_calls import JudgeDecision
from eval_pipeline.suite import Message

if TYPE_CHECKING:
    from eval_pipeline.agents import ChatModel

JUDGE_MAX_TOKENS = 1024

_VERDICT_FORMAT = (
    'Answer with one JSON object and nothing else: {"passed": true or false, "reasoning": '
    '"one or two sentences on why"}.'
)

EVALUATOR_SYSTEM = (
    "You grade replies of an analytics assistant against a criterion written by the person who "
    "wrote the test. Judge only what the criterion asks; do not reward style it does not mention. "
    + _VERDICT_FORMAT
)

ARGUMENT_SYSTEM = (
    "You check one argument that an analytics assistant passed to a tool, against a criterion "
    "written by the person who wrote the test. " + _VERDICT_FORMAT
)

DEFAULT_CONSISTENCY_PROMPT = """\
You compare two answers that an analytics assistant gave to the same question, to decide \
whether they state the same facts.

Question: {{ task_description }}

[Submission 1]
{{ submission_1 }}
[/Submission 1]

[Submission 2]
{{ submission_2 }}
[/Submission 2]

They are CONSISTENT (A) when they differ only in:
- rounding or precision, with figures less than 0.1% apart (1,081,396 vs 1,081,395.67; 42.7% vs 42.67%);
- formatting of numbers, dates and units (1000 vs 1,000; 2024-01-15 vs January 15, 2024; $1.2M vs 1,200,000 USD);
- wording, grammar, tone or order, or one of them adding context (a caveat, a method note, \
a further breakdown) that does not contradict the other.

They DISAGREE (B) when:
- a figure differs by 0.1% or more, or a count differs at all;
- they name different entities (another top product, customer, region or period);
- they point in different directions (growth vs decline, above vs below a threshold);
- one answers and the other declines, asks for clarification, or answers another question.

Reason briefly, then end with a last line that is exactly "Answer: A" or "Answer: B".
"""

_TEMPLATE_VAR = re.compile(r"{{\s*(task_description|submission_1|submission_2)\s*}}")
# A verdict is a line of its own: "Answer: A", "**Answer:** b", "ANSWER=B", "Answer B", "B",
# optionally quoted or emphasised. Without a colon the letter must be a capital, or the
# prose "both answer a" would read as a verdict.
_VERDICT_LINE = re.compile(
    r"(?i:answer)\s*(?:[:=]\s*\**\s*\(?(?P<any>[ABab])|\**\s*\(?(?P<capital>[AB]))\)?"
    r"|\(?(?P<bare>[ABab])\)?"
)
_DECORATION = "*_`'\" .\t"


def _prompts_version() -> str:
    prompts = (EVALUATOR_SYSTEM, ARGUMENT_SYSTEM, DEFAULT_CONSISTENCY_PROMPT, EXTRACTION_SYSTEM)
    return hashlib.sha256("\n\0".join(prompts).encode()).hexdigest()[:8]


# Changes whenever a prompt that judges or extracts changes: a new judge, as far as grades go.
PROMPTS_VERSION = _prompts_version()


def judge_label(model_id: str) -> str:
    """Who decides judged checks: `replay:demo (prompts 1a2b3c4d)`. Stored with each judged
    check and grade, so a verdict that changed with the judge is told from one that changed
    with the agent."""
    return f"{model_id} (prompts {PROMPTS_VERSION})"


def render_consistency_prompt(template: str, task: str, first: str, second: str) -> str:
    values = {"task_description": task, "submission_1": first, "submission_2": second}
    return _TEMPLATE_VAR.sub(lambda m: values[m.group(1)], template)


def parse_verdict_json(text: str) -> tuple[bool, str] | None:
    """`(passed, reasoning)` from a judge's answer, tolerating code fences and prose around
    the JSON object; None when there is no object with a boolean `passed`."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        data = json.loads(text[start : end + 1])
    except json.JSONDecodeError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("passed"), bool):
        return None
    reasoning = data.get("reasoning")
    return data["passed"], reasoning if isinstance(reasoning, str) else ""


def parse_consistency_answer(text: str) -> bool | None:
    """True for A (consistent), False for B, None when the judge gave no verdict.

    Only the last non-empty line counts, and only when it is a verdict and nothing else (or
    the whole answer is a JSON object with `"answer": "A"|"B"`): a judge that echoes the
    instructions ('end with a last line that is exactly "Answer: A" or "Answer: B"') or
    mentions a letter mid-prose has not decided.
    """
    structured = _structured_answer(text)
    if structured is not None:
        return structured
    lines = [line for line in html.unescape(text).splitlines() if line.strip()]
    if not lines:
        return None
    match = _VERDICT_LINE.fullmatch(lines[-1].strip(_DECORATION))
    if match is None:
        return None
    return (match.group("any") or match.group("capital") or match.group("bare")).upper() == "A"


def _structured_answer(text: str) -> bool | None:
    stripped = text.strip()
    if not (stripped.startswith("{") and stripped.endswith("}")):
        return None
    try:
        data = json.loads(stripped)
    except json.JSONDecodeError:
        return None
    answer = data.get("answer") if isinstance(data, dict) else None
    if isinstance(answer, str) and answer.strip().upper() in ("A", "B"):
        return answer.strip().upper() == "A"
    return None


def _transcript(messages: Sequence[Message]) -> str:
    return "\n\n".join(f"[{m.role}]\n{m.content}" for m in messages)


class Judge:
    """Asks a chat model for verdicts. Infrastructure failures and unparseable answers (after
    one retry) come back as undecided decisions carrying the reason, never as exceptions.

    An answer without a verdict (prose, a refusal) is the judge's answer to these inputs: a
    cache in front of the model keeps it like a verdict, so an unchanged rerun does not pay
    for it again. Only a judge that did not answer is asked again next time (`retry`)."""

    def __init__(self, model: ChatModel) -> None:
        self.model = model

    async def _ask(
        self,
        messages: list[ChatMessage],
        parse: Callable[[str], JudgeDecision | None],
        reminder: str,
        failure: str,
    ) -> JudgeDecision:
        """Ask, and once more with `reminder` when `parse` finds no verdict in the answer."""
        for attempt in range(2):
            try:
                completion = await self.model.complete(
                    messages, tools=(), max_tokens=JUDGE_MAX_TOKENS
                )
            except AgentError as error:
                return JudgeDecision(
                    None, error=f"judge {self.model.model_id} unavailable: {error}", retry=True
                )
            decision = parse(completion.text)
            if decision is not None:
                return decision
            if attempt == 0:
                messages = [
                    *messages,
                    ChatMessage("assistant", completion.text),
                    ChatMessage("user", reminder),
                ]
        snippet = completion.text.strip().replace("\n", " ")[:200]
        return JudgeDecision(
            None, error=f"judge {self.model.model_id} {failure}; last answer: {snippet!r}"
        )

    async def _ask_json(self, system: str, prompt: str) -> JudgeDecision:
        def parse(text: str) -> JudgeDecision | None:
            parsed = parse_verdict_json(text)
            return None if parsed is None else JudgeDecision(parsed[0], reasoning=parsed[1])

        return await self._ask(
            [ChatMessage("system", system), ChatMessage("user", prompt)],
            parse,
            "That was not the required JSON object. " + _VERDICT_FORMAT,
            "gave no verdict twice",
        )

    async def evaluate_reply(
        self, conversation: Sequence[Message], reply: str, criteria: str
    ) -> JudgeDecision:
        prompt = (
            f"Conversation so far:\n\n{_transcript(conversation)}\n\n"
            f"The assistant's reply to the last message:\n\n{reply}\n\n"
            f"Criterion the reply must meet:\n{criteria}"
        )
        return await self._ask_json(EVALUATOR_SYSTEM, prompt)

    async def judge_argument(self, criteria: str, value: Any) -> JudgeDecision:
        shown = value if isinstance(value, str) else json.dumps(value, indent=2, default=str)
        prompt = f"Argument value:\n\n{shown}\n\nCriterion the value must meet:\n{criteria}"
        return await self._ask_json(ARGUMENT_SYSTEM, prompt)

    async def compare_replies(
        self, task: str, first: str, second: str, template: str | None = None
    ) -> JudgeDecision:
        """passed=True when the two replies are consistent (A), False when they disagree (B)."""
        prompt = render_consistency_prompt(
            template or DEFAULT_CONSISTENCY_PROMPT, task, first, second
        )

        def parse(text: str) -> JudgeDecision | None:
            answer = parse_consistency_answer(text)
            return None if answer is None else JudgeDecision(answer, reasoning=text.strip())

        return await self._ask(
            [ChatMessage("user", prompt)],
            parse,
            'End with a last line that is exactly "Answer: A" or "Answer: B".',
            'gave no verdict twice (no last line "Answer: A" or "Answer: B")',
        )
