"""The test case: one business question plus what a right answer is, as loaded from a test file."""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

Role = Literal["user", "assistant"]
MatchType = Literal["exact", "llm_judge", "any"]
#: A grading check's name: a built-in ("data", "assertions", "tool_calls", "evaluators",
#: "consistency") or one added through the registry (`register_check`, an entry point).
CheckKind = str


@dataclass(frozen=True)
class Message:
    """One turn of the conversation given to the agent."""

    role: Role
    content: str


@dataclass(frozen=True)
class Tolerance:
    """How numbers are compared: rounded to `decimals`, then equal within `rtol`/`atol`.

    The defaults are nao's: two decimals hide display-level precision differences, and the
    tolerances absorb floating-point noise between two SQL engines or two query shapes.
    """

    decimals: int = 2
    rtol: float = 1e-5
    atol: float = 1e-8


@dataclass(frozen=True)
class ToolCallAssertion:
    """nao's `tool_call` assertion: the agent called `tool` at least `min_count` times with `args`.

    `args` is a recursive subset: keys not listed are not checked.
    """

    tool: str
    args: dict[str, Any] | None = None
    min_count: int = 1
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True)
class ArgumentMatcher:
    """How one argument of an expected tool call is checked (Calibrate's match types)."""

    match_type: MatchType
    value: Any = None
    criteria: str | None = None


@dataclass(frozen=True)
class ExpectedToolCall:
    """A call the agent must make, matched by a distinct actual call, in any order."""

    tool: str
    arguments: dict[str, ArgumentMatcher] = field(default_factory=dict)
    accept_any_arguments: bool = False


@dataclass(frozen=True)
class Evaluator:
    """An LLM-judged check of the final reply (Calibrate's reply tests)."""

    name: str
    criteria: str


@dataclass(frozen=True)
class Consistency:
    """oxy's consistency test: `n` replies judged pairwise for factual agreement.

    The case passes when the share of consistent pairs reaches `min_accuracy`; the default
    asks every pair to agree, since one answer that contradicts the others is the failure
    this test exists to catch.
    """

    n: int = 5
    prompt: str | None = None
    min_accuracy: float = 1.0


@dataclass(frozen=True)
class Semantic:
    """The semantic check (Zhong, Yu and Klein, 2020): a passed data check must also agree on
    `variants` perturbed copies of the warehouse, drawn with `seed`, so a query that matches
    by coincidence (a hard-coded number, `max(id)` for a count) fails."""

    variants: int = 8
    seed: int = 0


@dataclass(frozen=True)
class Case:
    """A validated test case.

    `input_hash` covers what the agent is given, so it keys agent runs (with the test's
    name: a run belongs to its test): editing a reference query or a tolerance regrades
    stored runs without calling the agent again.
    `content_hash` covers everything that decides the verdict as well; comments, key order
    and descriptive metadata (tags, notes, ...) change neither.
    """

    name: str
    path: Path
    relative_path: str
    messages: tuple[Message, ...]
    sql: str | None = None
    database: str | None = None
    ordered: bool | None = None
    comparison: Tolerance | None = None
    assertions: tuple[ToolCallAssertion, ...] = ()
    tool_calls: tuple[ExpectedToolCall, ...] = ()
    evaluators: tuple[Evaluator, ...] = ()
    consistency: Consistency | None = None
    semantic: Semantic | None = None
    k: int | None = None
    tags: tuple[str, ...] = ()
    category: str | None = None
    difficulty: str | None = None
    notes: str | None = None
    #: The settings of each check added through the registry that the test declares, by the
    #: check's name, as its `parse` returned them (plain data or a dataclass).
    added_checks: tuple[tuple[str, Any], ...] = ()

    def added_check(self, name: str) -> Any | None:
        """The settings the test gives check `name` (added through the registry), if any."""
        return next((spec for check, spec in self.added_checks if check == name), None)

    @property
    def prompt(self) -> str:
        """The last user message: the question the agent must answer."""
        return self.messages[-1].content

    @property
    def is_conversation(self) -> bool:
        return len(self.messages) > 1

    @property
    def kinds(self) -> tuple[CheckKind, ...]:
        """The checks this case makes; empty means "no verification"."""
        present: list[CheckKind] = []
        if self.sql is not None:
            present.append("data")
        if self.assertions:
            present.append("assertions")
        if self.tool_calls:
            present.append("tool_calls")
        if self.evaluators:
            present.append("evaluators")
        if self.consistency is not None:
            present.append("consistency")
        present.extend(name for name, _ in self.added_checks)
        return tuple(present)

    @property
    def stem(self) -> str:
        return self.path.stem

    @property
    def folder(self) -> str:
        """The subfolder of `cases/` holding the file ('' at the top level)."""
        parent = Path(self.relative_path).parent
        return "" if str(parent) == "." else parent.as_posix()

    # Cached: a frozen case never changes, and the hashes are asked for per run and per grade.
    @functools.cached_property
    def input_hash(self) -> str:
        return _stable_hash({"messages": [asdict(m) for m in self.messages], "db": self.database})

    @functools.cached_property
    def content_hash(self) -> str:
        return _stable_hash(self.verdict_fields())

    def verdict_fields(self) -> dict[str, Any]:
        """Everything that decides a verdict, as plain data (what `content_hash` hashes)."""
        fields = {
            "messages": [asdict(m) for m in self.messages],
            "database": self.database,
            "sql": _normalise_sql(self.sql),
            "ordered": self.ordered,
            "comparison": asdict(self.comparison) if self.comparison else None,
            "assertions": [asdict(a) for a in self.assertions],
            "tool_calls": [asdict(t) for t in self.tool_calls],
            "evaluators": [asdict(e) for e in self.evaluators],
            "consistency": asdict(self.consistency) if self.consistency else None,
            "k": self.k,
        }
        if self.semantic is not None:
            # Only when set: a case without the check keeps the hash (and grades) it had.
            fields["semantic"] = asdict(self.semantic)
        if self.added_checks:  # likewise: only a test that declares one hashes them
            fields["added_checks"] = {name: _plain(spec) for name, spec in self.added_checks}
        return fields

    def to_row(self) -> dict[str, Any]:
        """A flat, JSON-friendly description of the case for the store and reports."""
        return {
            "name": self.name,
            "file": self.relative_path,
            "prompt": self.prompt,
            "messages": [asdict(m) for m in self.messages],
            "sql": self.sql,
            "database": self.database,
            "kinds": list(self.kinds),
            "tags": list(self.tags),
            "category": self.category,
            "difficulty": self.difficulty,
            "notes": self.notes,
            "input_hash": self.input_hash,
            "content_hash": self.content_hash,
        }


def _normalise_sql(sql: str | None) -> str | None:
    # Trailing whitespace and blank lines are how YAML block scalars differ, not the query.
    if sql is None:
        return None
    return "\n".join(line.rstrip() for line in sql.strip().splitlines())


def _plain(spec: Any) -> Any:
    return asdict(spec) if dataclasses.is_dataclass(spec) and not isinstance(spec, type) else spec


def _stable_hash(value: Any) -> str:
    canonical = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]
