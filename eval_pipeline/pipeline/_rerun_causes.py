"""Why a run was made again, or a stored run graded again: the one owner of the causes an evaluation reports.

What is done again is decided elsewhere (`_unchanged.py` for whole partitions, `_runs.py` for
each run's reuse); this module says why, from what the store held before: a run made again
is compared with the partition's previous run of the same test and attempt, a regraded run's
grade with its previous grade. A run of a test or attempt the partition never held (a first
evaluation, a new test, a new day) was not made *again*: it has no cause. The CLI prints one
line per cause ("re-run: context changed (RULES.md) — 12 run(s)"), the runs and grades
stages keep the counts in their metadata.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from eval_pipeline.agents import AgentRun, RunRequest, RunStatus
from eval_pipeline.grading import GradingRules, grade_retried
from eval_pipeline.store import StateFolder, fetch
from eval_pipeline.suite import AgentContext, Suite

__all__ = ["RerunCauses", "merge_regraded", "regrade_causes"]

#: cause → [runs graded again, of which verdicts moved]
Regraded = dict[str, list[int]]


class RerunCauses:
    """Why each run of a partition's runs stage is made again (`of`), counted by cause."""

    def __init__(
        self, layout: StateFolder, context: AgentContext | None, *, no_cache: bool
    ) -> None:
        self._layout = layout
        self._context = context
        self._no_cache = no_cache
        self._contexts: dict[str, str] = {}
        self.counts: Counter[str] = Counter()

    def count(self, request: RunRequest, before: AgentRun | None) -> None:
        """Count the cause of making `request`, given the partition's previous run of its
        test and attempt (None: there was none, so it is no re-run)."""
        cause = self.of(request, before)
        if cause is not None:
            self.counts[cause] += 1

    def of(self, request: RunRequest, before: AgentRun | None) -> str | None:
        if before is None:
            return None
        if self._no_cache:
            return "asked for afresh (--no-cache)"
        if before.input_hash != request.case.input_hash:
            return f"test changed ({request.case.relative_path})"
        if before.context_hash != request.context_hash:
            if self._context is None:
                return "context changed"
            return f"context changed ({self._context_change(before.context_hash)})"
        if before.status is RunStatus.ERROR:
            return "the previous run was an error"
        # The same key, completed, and not reused: what answers is not what answered.
        return "model settings changed"

    def _context_change(self, old_hash: str) -> str:
        """The context files that differ from those of the context `old_hash`, as stored
        in `agent_contexts` (the dbt docs are not kept there: "dbt docs" then)."""
        if old_hash not in self._contexts:
            assert self._context is not None
            self._contexts[old_hash] = _changed_files(self._layout, old_hash, self._context)
        return self._contexts[old_hash]


def _changed_files(layout: StateFolder, old_hash: str, context: AgentContext) -> str:
    _, rows = fetch(
        layout,
        "SELECT files, text FROM agent_contexts_history WHERE context_hash = ? LIMIT 1",
        [old_hash],
    )
    if not rows:  # stored before contexts were kept, or the old one had no file
        return ", ".join(f.label for f in context.files) or "dbt docs"
    files, text = list(rows[0][0] or []), rows[0][1] or ""
    before = _file_texts(files, text)
    now = {f.label: f.text.strip() for f in context.files}
    changed = [label for label, body in now.items() if before.get(label) != body]
    changed += [label for label in before if label not in now]
    return ", ".join(changed) or "dbt docs"


def _file_texts(labels: Sequence[str], text: str) -> dict[str, str]:
    """Each file's text from a context's prompt text (`AgentContext.prompt_text`: each file
    as `## <label>` and its stripped text, separated by a blank line)."""
    starts = []
    position = 0
    for index, label in enumerate(labels):
        header = f"## {label}\n" if index == 0 else f"\n\n## {label}\n"
        found = text.find(header, position)
        if found < 0:
            return {}
        starts.append((label, found, found + len(header)))
        position = found + len(header)
    texts = {}
    for index, (label, _, body) in enumerate(starts):
        end = starts[index + 1][1] if index + 1 < len(starts) else len(text)
        texts[label] = text[body:end]
    return texts


def regrade_causes(
    before: Sequence[Mapping[str, Any]],
    after: Sequence[Mapping[str, Any]],
    suite: Suite,
    *,
    rejudge: bool = False,
) -> Regraded:
    """Why the stored runs graded now (`after`, grade rows) were graded again, against their
    previous grades (`before`, the partition's grade rows before; decoded), and how many of
    each cause's verdicts moved. A run with no previous grade was made now: not regraded."""
    previous = {row["run_key"]: row for row in before}
    files = {case.name: case.relative_path for case in suite.cases}
    found: Regraded = {}
    for row in after:
        old = previous.get(row["run_key"])
        if old is None:
            continue
        moved = int(old["status"] != row["status"])
        for cause in _grade_causes(old, row, files, rejudge):
            counts = found.setdefault(cause, [0, 0])
            counts[0] += 1
            counts[1] += moved
    return found


def _grade_causes(
    old: Mapping[str, Any], new: Mapping[str, Any], files: Mapping[str, str], rejudge: bool
) -> list[str]:
    causes = []
    if old.get("content_hash") != new.get("content_hash"):
        causes.append(f"test changed ({files.get(new['name'], new['name'])})")
    rules = GradingRules.changed(old.get("grading_rules") or None, new.get("grading_rules") or {})
    named = [rule for rule in rules if rule != "grading code"]
    if named:
        causes.append(f"grading rules changed ({', '.join(named)})")
    if "grading code" in rules:
        causes.append("grading code changed")
    elif not causes and _reference(old) != _reference(new):
        causes.append("reference result changed")
    if grade_retried(old["status"], old.get("checks")):
        causes.append("the judge had not answered")
    elif rejudge and new.get("judge"):
        causes.append("judge asked again (--rejudge)")
    return causes


def _reference(row: Mapping[str, Any]) -> Any:
    """The reference rows a grade's data check compared with (None: no data check)."""
    for check in row.get("checks") or []:
        if isinstance(check, dict) and check.get("kind") == "data":
            return (check.get("details") or {}).get("expected_data")
    return None


def merge_regraded(into: Regraded, more: Mapping[str, Sequence[int]]) -> Regraded:
    """`into` with `more`'s runs and moved verdicts added, cause by cause."""
    for cause, (runs, moved) in more.items():
        counts = into.setdefault(cause, [0, 0])
        counts[0] += runs
        counts[1] += moved
    return into
