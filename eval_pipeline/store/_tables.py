"""The schema of every table of the store: its partitioning and its columns."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Literal

import pyarrow as pa

# "append": every write is kept and the table view shows ALL rows (e.g. human labels);
# the other kinds show each partition's latest write.
Partitioning = Literal["model_date", "date", "none", "append"]

_TS = pa.timestamp("us", tz="UTC")


def _json(name: str) -> pa.Field:
    # JSON documents are stored as text, which DuckDB's json functions read directly.
    return pa.field(name, pa.string(), metadata={"json": "1"})


@dataclass(frozen=True)
class TableSpec:
    """A table of the SQL surface: its partitioning and columns (it may gain columns, never lose)."""

    name: str
    partitioning: Partitioning
    schema: pa.Schema
    description: str
    # For "append" tables: the columns naming one item; `<table>_latest` keeps its newest row.
    latest_by: tuple[str, ...] = ()

    @functools.cached_property
    def json_columns(self) -> frozenset[str]:
        """Columns holding JSON documents (stored as text)."""
        return frozenset(f.name for f in self.schema if f.metadata and f.metadata.get(b"json"))


_WRITE_COLUMNS = [pa.field("written_at", _TS), pa.field("materialization_id", pa.string())]

TABLES: dict[str, TableSpec] = {
    spec.name: spec
    for spec in (
        TableSpec(
            "test_cases",
            "none",
            pa.schema(
                [
                    ("name", pa.string()),
                    ("file", pa.string()),
                    ("prompt", pa.string()),
                    _json("messages"),
                    ("sql", pa.string()),
                    ("database", pa.string()),
                    ("kinds", pa.list_(pa.string())),
                    ("tags", pa.list_(pa.string())),
                    ("category", pa.string()),
                    ("difficulty", pa.string()),
                    ("notes", pa.string()),
                    ("input_hash", pa.string()),
                    ("content_hash", pa.string()),
                    ("suite_hash", pa.string()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "The suite's test cases as of the latest materialization.",
        ),
        TableSpec(
            "reference_results",
            "date",
            pa.schema(
                [
                    ("name", pa.string()),
                    ("run_date", pa.date32()),
                    ("sql", pa.string()),
                    _json("columns"),
                    _json("rows"),
                    ("row_count", pa.int64()),
                    ("truncated", pa.bool_()),
                    ("error", pa.string()),
                    ("result_hash", pa.string()),
                    _json("warnings"),  # reference health: [{kind, message}]
                    *_WRITE_COLUMNS,
                    # Added later: the `databases:` entry that answered (NULL before).
                    ("database", pa.string()),
                ]
            ),
            "What each reference SQL returned on its test's database, per day.",
        ),
        TableSpec(
            "agent_runs",
            "model_date",
            pa.schema(
                [
                    ("key", pa.string()),
                    ("name", pa.string()),
                    ("model", pa.string()),
                    ("run_date", pa.date32()),
                    ("attempt", pa.int32()),
                    ("input_hash", pa.string()),
                    ("context_hash", pa.string()),
                    ("status", pa.string()),
                    ("final_text", pa.string()),
                    _json("messages"),
                    _json("tool_calls"),
                    _json("queries"),
                    _json("answer"),
                    ("input_tokens", pa.int64()),
                    ("cached_input_tokens", pa.int64()),
                    ("output_tokens", pa.int64()),
                    ("total_tokens", pa.int64()),
                    ("cost_usd", pa.float64()),
                    ("duration_ms", pa.float64()),
                    ("turns", pa.int32()),
                    ("tool_call_count", pa.int32()),
                    ("error", pa.string()),
                    ("started_at", pa.string()),
                    ("finished_at", pa.string()),
                    ("reused", pa.bool_()),
                    *_WRITE_COLUMNS,
                    # Added later: the `databases:` entry the test names (NULL before).
                    ("database", pa.string()),
                    # Added later: what answered, `answerer_identity` (NULL before).
                    ("answerer", pa.string()),
                    # Added later: what the answerer reported beside its answer (nao's
                    # own verification of a `nao:` run), NULL for every other run.
                    _json("answerer_details"),
                ]
            ),
            "Every agent run: one attempt of one model at one test, with its transcript.",
        ),
        TableSpec(
            "tool_calls",
            "model_date",
            pa.schema(
                [
                    ("run_key", pa.string()),
                    ("name", pa.string()),
                    ("model", pa.string()),
                    ("run_date", pa.date32()),
                    ("attempt", pa.int32()),
                    ("call_index", pa.int32()),
                    ("tool", pa.string()),
                    _json("arguments"),
                    _json("result"),
                    ("error", pa.string()),
                    ("duration_ms", pa.float64()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "Every tool call of every run, one row each.",
        ),
        TableSpec(
            "grades",
            "model_date",
            pa.schema(
                [
                    ("name", pa.string()),
                    ("model", pa.string()),
                    ("run_date", pa.date32()),
                    ("attempt", pa.int32()),
                    ("run_key", pa.string()),
                    ("content_hash", pa.string()),
                    ("status", pa.string()),
                    ("passed", pa.bool_()),
                    ("message", pa.string()),
                    ("verified", pa.bool_()),
                    _json("checks"),
                    ("tokens", pa.int64()),
                    ("cost_usd", pa.float64()),
                    ("duration_ms", pa.float64()),
                    ("tool_call_count", pa.int32()),
                    ("judge", pa.string()),  # the judge model and prompt version, if any
                    # why a failed data check missed (grading.FailureKind), else NULL
                    ("failure_kind", pa.string()),
                    *_WRITE_COLUMNS,
                    # Added later: with `--rejudge-samples j`, the j verdicts of a
                    # run with judged checks (its own first), as a JSON list; NULL otherwise.
                    _json("judge_samples"),
                    # Added later: the digests of the grading rules applied, by
                    # name (tolerance, extraction, judge, grading code); NULL before.
                    _json("grading_rules"),
                    # Added later: who graded an imported run (`nao 0.3.29`, `nao`
                    # when its file names no version, `eval_pipeline`); NULL: graded here.
                    ("imported_from", pa.string()),
                ]
            ),
            "The grade of every run: passed, failed (the agent was wrong) or error.",
        ),
        TableSpec(
            "model_summaries",
            "model_date",
            pa.schema(
                [
                    ("model", pa.string()),
                    ("run_date", pa.date32()),
                    ("total", pa.int64()),
                    ("passed", pa.int64()),
                    ("failed", pa.int64()),
                    ("errors", pa.int64()),
                    ("unverified", pa.int64()),
                    ("pass_rate", pa.float64()),
                    ("tokens", pa.int64()),
                    ("cost_usd", pa.float64()),
                    ("cost_complete", pa.bool_()),
                    ("duration_p50_ms", pa.float64()),
                    ("duration_p95_ms", pa.float64()),
                    ("avg_duration_ms", pa.float64()),
                    ("tool_calls", pa.int64()),
                    ("avg_tool_calls", pa.float64()),
                    ("suite_hash", pa.string()),
                    *_WRITE_COLUMNS,
                    # Added later: the 95% interval on pass_rate, as fractions.
                    ("ci_low", pa.float64()),
                    ("ci_high", pa.float64()),
                ]
            ),
            "One row per model and day: pass rate (a fraction in [0, 1]) with its 95% interval "
            "(ci_low, ci_high), counts, tokens, cost, latency.",
        ),
        TableSpec(
            "model_comparisons",
            "date",
            pa.schema(
                [
                    ("run_date", pa.date32()),
                    ("model_a", pa.string()),
                    ("model_b", pa.string()),
                    ("tests", pa.int64()),
                    ("a_only", pa.int64()),
                    ("b_only", pa.int64()),
                    ("p_value", pa.float64()),
                    ("p_adjusted", pa.float64()),
                    ("significant", pa.bool_()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "One row per pair of models and day: the paired test on their shared tests "
            "(a_only / b_only: tests only one passed), Holm-adjusted across the day's pairs.",
        ),
        TableSpec(
            "attempt_budgets",
            "date",
            pa.schema(
                [
                    ("run_date", pa.date32()),
                    ("model", pa.string()),
                    ("name", pa.string()),
                    ("attempts", pa.int32()),
                    ("reason", pa.string()),
                    ("round", pa.int32()),
                    ("budget_runs", pa.int64()),
                    ("budget_usd", pa.float64()),
                    ("question", pa.string()),
                    ("alpha", pa.float64()),
                    ("width", pa.float64()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "One row per model, test and day evaluated under an attempt budget (`--budget`): "
            "the attempts the test got, why its last one was given and in which round, and "
            "the budget's settings.",
        ),
        TableSpec(
            "labels",
            "append",
            pa.schema(
                [
                    ("label_id", pa.string()),
                    ("run_key", pa.string()),
                    ("name", pa.string()),
                    ("model", pa.string()),
                    ("run_date", pa.date32()),
                    ("attempt", pa.int32()),
                    ("passed", pa.bool_()),
                    ("note", pa.string()),
                    ("author", pa.string()),
                    ("labelled_at", _TS),
                    *_WRITE_COLUMNS,
                ]
            ),
            "People's verdicts on runs, every one kept; `labels_latest` holds the newest per run.",
            # A run is a graded attempt, named as people name it (not by its run key).
            latest_by=("name", "model", "run_date", "attempt"),
        ),
        TableSpec(
            "agent_contexts",
            "append",
            pa.schema(
                [
                    ("context_hash", pa.string()),
                    ("files", pa.list_(pa.string())),
                    # The context files as the built-in agent's system prompt gave them.
                    ("text", pa.string()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "The text of each agent context once, by its hash: a run's stored system message "
            "refers to it (`agent_runs.context_hash`) instead of repeating it.",
            latest_by=("context_hash",),
        ),
        TableSpec(
            "usage_conversations",
            "date",
            pa.schema(
                [
                    ("conversation_id", pa.string()),
                    ("source", pa.string()),
                    ("run_date", pa.date32()),
                    ("started_at", _TS),
                    # A pseudonym (keyed hash) of the user's id, never the id.
                    ("user_key", pa.string()),
                    ("model", pa.string()),
                    ("question", pa.string()),
                    _json("turns"),  # [{role, text, at, tool_calls, feedback, …}]
                    ("content_hash", pa.string()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "Production conversations imported by `eval-pipeline usage import`, per day they "
            "started: the first question, every turn with its tool calls and the user's votes; "
            "personal data masked.",
        ),
        TableSpec(
            "usage_signals",
            "date",
            pa.schema(
                [
                    ("conversation_id", pa.string()),
                    ("run_date", pa.date32()),
                    ("kind", pa.string()),
                    ("turn", pa.int32()),
                    ("user_key", pa.string()),
                    ("model", pa.string()),
                    ("question", pa.string()),
                    ("tables", pa.list_(pa.string())),
                    ("error", pa.string()),
                    ("detail", pa.string()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "The friction found in each day's production conversations, one row per signal: "
            "kind (tool_error, negative_feedback, correction, no_answer, inconsistent, "
            "uncovered), the tables its SQL touched, the error, and why it counts.",
        ),
        TableSpec(
            "recommendations",
            "none",
            pa.schema(
                [
                    ("recommendation_id", pa.string()),
                    ("rank", pa.int32()),
                    ("kind", pa.string()),
                    ("score", pa.float64()),
                    ("file", pa.string()),
                    ("summary", pa.string()),
                    ("conversations", pa.list_(pa.string())),
                    ("users", pa.int64()),
                    ("tables", pa.list_(pa.string())),
                    ("error", pa.string()),
                    ("first_seen", pa.date32()),
                    ("last_seen", pa.date32()),
                    ("status", pa.string()),
                    # `rules`, or the judge model that wrote the summary.
                    ("summarized_by", pa.string()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "The recommendations of the last 30 days of production usage as last ranked "
            "(`eval-pipeline recommend`, the `recommendations` asset), best first.",
        ),
        TableSpec(
            "recommendation_status",
            "append",
            pa.schema(
                [
                    ("recommendation_id", pa.string()),
                    ("status", pa.string()),
                    ("note", pa.string()),
                    ("changed_at", _TS),
                    *_WRITE_COLUMNS,
                ]
            ),
            "Each change of a recommendation's status (new, acknowledged, dismissed, done); "
            "`recommendation_status_latest` holds the current one.",
            latest_by=("recommendation_id",),
        ),
        TableSpec(
            "model_spellings",
            "append",
            pa.schema(
                [
                    ("model", pa.string()),
                    # As the user wrote it (nao's `openaiCompatible/vllm:qwen3` for our
                    # `vllm:qwen3`); the model id itself once the user writes that again.
                    ("spelling", pa.string()),
                    *_WRITE_COLUMNS,
                ]
            ),
            "How the user spells each model (the other tables name it by its id), written when "
            "an evaluation spells it otherwise than the last; `model_spellings_latest`: the "
            "current one.",
            latest_by=("model",),
        ),
    )
}
