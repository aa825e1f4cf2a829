"""A toy grading check, added from outside the product as docs/extending.md shows: `reply_mentions`.

A test lists words its reply must mention (`reply_mentions: [42, shipped]`); the check fails
a run whose final reply leaves one out and names it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from eval_pipeline.agents import AgentRun
from eval_pipeline.grading import Check, CheckContext, CheckResult, GradeStatus
from eval_pipeline.suite import FieldReader


class ReplyMentions(Check):
    """Every listed word appears in the final reply (case-insensitive)."""

    name = "reply_mentions"

    def parse(self, reader: FieldReader, data: Mapping[str, Any]) -> tuple[str, ...] | None:
        words = []
        for i, word in reader.items(data, self.name, self.name):
            if isinstance(word, bool) or not isinstance(word, str | int) or str(word) == "":
                reader.problem(
                    f"{self.name}[{i}]",
                    f"expected a word or a number, got {word!r}",
                    reader.line_of(data[self.name], i),
                )
                return None
            words.append(str(word))
        if not words and isinstance(data[self.name], list):
            reader.problem(self.name, "list at least one word", reader.line_of(data, self.name))
            return None
        return tuple(words) or None

    async def grade(
        self, settings: tuple[str, ...], run: AgentRun, context: CheckContext
    ) -> CheckResult:
        reply = run.final_text.casefold()
        missing = [word for word in settings if word.casefold() not in reply]
        if missing:
            return CheckResult(
                self.name,
                GradeStatus.FAILED,
                f"the reply does not mention {', '.join(missing)}",
                {"missing": missing},
            )
        return CheckResult(self.name, GradeStatus.PASSED, "the reply mentions every word")
