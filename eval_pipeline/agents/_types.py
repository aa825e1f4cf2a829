"""The vocabulary of agent runs: chat messages, completions, tool calls, queries, usage and the run record."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import date
from enum import StrEnum
from typing import Any, Literal

ChatRole = Literal["system", "user", "assistant", "tool"]


@dataclass(frozen=True)
class RequestedToolCall:
    """A tool call as the model asked for it. `arguments` is None when `raw_arguments`
    is not a JSON object (the agent then tells the model instead of running the tool)."""

    id: str
    name: str
    raw_arguments: str
    arguments: dict[str, Any] | None


@dataclass(frozen=True)
class ChatMessage:
    """One message in the provider-neutral transcript that every provider translates."""

    role: ChatRole
    content: str = ""
    tool_calls: tuple[RequestedToolCall, ...] = ()
    tool_call_id: str | None = None  # for role "tool": the call this message answers
    name: str | None = None  # for role "tool": the tool's name (Anthropic does not need it)


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model, with a JSON-schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Usage:
    """Tokens of one completion or a whole run. `cached_input_tokens` is part of `input_tokens`."""

    input_tokens: int = 0
    cached_input_tokens: int = 0
    output_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.cached_input_tokens += other.cached_input_tokens
        self.output_tokens += other.output_tokens


#: Stop reasons saying the token limit ended the completion: OpenAI's `finish_reason`
#: (also what compatible servers such as vLLM, Ollama and llama.cpp send) and Anthropic's.
CUT_STOP_REASONS = frozenset({"length", "max_tokens"})


@dataclass(frozen=True)
class Completion:
    """One model answer: text and/or tool calls, usage, and the raw response body (for --record)."""

    text: str
    tool_calls: tuple[RequestedToolCall, ...]
    usage: Usage
    stop_reason: str | None = None
    raw: dict[str, Any] | None = None

    @property
    def cut(self) -> bool:
        """Whether `max_tokens` stopped the model mid-answer (text or tool-call arguments)."""
        return self.stop_reason in CUT_STOP_REASONS


class RunStatus(StrEnum):
    """How an agent run ended. Whether its answer was right is the grade's business."""

    COMPLETED = "completed"  # the agent gave a final reply
    ERROR = "error"  # infrastructure failed: provider, agent endpoint, timeout, limits


@dataclass
class ToolCallRecord:
    """A tool call the agent made, with what came back and how long it took."""

    id: str
    name: str
    arguments: dict[str, Any] | None
    raw_arguments: str
    result: Any = None
    error: str | None = None
    duration_ms: float = 0.0


@dataclass
class QueryRecord:
    """A SQL query the agent ran, with its full result up to the store cap."""

    id: str
    sql: str
    columns: list[str] = field(default_factory=list)
    column_types: list[str] = field(default_factory=list)
    rows: list[list[Any]] = field(default_factory=list)
    row_count: int = 0
    truncated: bool = False
    row_cap: int | None = None
    error: str | None = None
    duration_ms: float = 0.0
    note: str | None = None  # what the sandbox's byte or cell caps cut, naming the limit


@dataclass
class AgentRun:
    """One attempt of one model at one test: everything a grader or a person needs afterwards."""

    case_name: str
    model: str
    attempt: int
    run_date: date
    input_hash: str
    context_hash: str
    status: RunStatus = RunStatus.COMPLETED
    final_text: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    tool_calls: list[ToolCallRecord] = field(default_factory=list)
    queries: list[QueryRecord] = field(default_factory=list)
    answer: dict[str, Any] | None = (
        None  # {"columns": [...], "rows": [[...]]} from an external agent
    )
    usage: Usage = field(default_factory=Usage)
    cost_usd: float | None = None
    duration_ms: float = 0.0
    turns: int = 0
    error: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    #: What answered (`answerer_identity`): the endpoint, request settings and agent. A stored
    #: run is reused only for the same; None for a run stored before it was kept.
    answerer: str | None = None
    #: What the answerer reported beside its answer, kept as it came: for nao's agent
    #: (`nao:` ids) its own verification of the answer and the verdict nao's comparison
    #: gives it (`{"nao": {...}}`), so a person sees where nao and our grade disagree.
    answerer_details: dict[str, Any] | None = None

    @property
    def key(self) -> str:
        return run_key(
            self.case_name,
            self.input_hash,
            self.model,
            self.context_hash,
            self.attempt,
            self.run_date,
        )

    def to_dict(self) -> dict[str, Any]:
        """The run as plain data (a journal line, a store row). It shares the run's lists and
        dicts rather than copying them (a deep copy of every finished run's transcript and
        result rows cost a second of CPU in 1,500 runs): read it, do not change it."""
        data = dict(vars(self))
        data["status"] = self.status.value
        data["run_date"] = self.run_date.isoformat()
        data["tool_calls"] = [dict(vars(call)) for call in self.tool_calls]
        data["queries"] = [dict(vars(query)) for query in self.queries]
        data["usage"] = dict(vars(self.usage))
        data["key"] = self.key
        return data


def run_key(
    case_name: str, input_hash: str, model: str, context_hash: str, attempt: int, run_date: date
) -> str:
    """The identity of a run: the same key means a stored, completed run can be reused.

    A run belongs to its test: two tests asking the same question (a data test and a
    consistency test of it, one question checked against two references) each get their own
    runs, so the test's name is part of the key as well as what the agent is given.
    """
    parts = (case_name, input_hash, model, context_hash, str(attempt), run_date.isoformat())
    text = "\0".join(parts)
    return hashlib.sha256(text.encode()).hexdigest()[:20]
