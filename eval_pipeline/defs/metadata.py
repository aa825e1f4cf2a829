"""Metadata of the assets: Dagster's standard keys for a store table (its columns, its name in results.duckdb, where a partition lives, its rows) and the Markdown tables and figures the UI shows."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import date
from typing import Any

import dagster as dg

from eval_pipeline.grading import Grade
from eval_pipeline.pipeline import BudgetOutcome
from eval_pipeline.store import TABLES, StateFolder
from eval_pipeline.suite import redact

#: Rows of a failures or warnings table; the rest are counted.
FAILURES_SHOWN = 50


def table_definition(table: str) -> dict[str, Any]:
    """The static part, on the asset's definition: the column schema (from the store's own
    table schema: JSON documents are stored as text and say so) and the table's name in
    `results.duckdb`."""
    spec = TABLES[table]
    columns = [
        dg.TableColumn(
            field.name,
            "json" if field.name in spec.json_columns else str(field.type),
        )
        for field in spec.schema
    ]
    return {
        "dagster/column_schema": dg.TableSchema(columns=columns),
        "dagster/table_name": f"results.{table}",
    }


def table_written(
    layout: StateFolder,
    table: str,
    rows: int,
    *,
    model: str | None = None,
    run_date: date | None = None,
) -> dict[str, Any]:
    """The part of a materialization: where the partition it wrote lives, and its rows."""
    return {
        "dagster/uri": dg.MetadataValue.url(
            layout.partition_uri(table, model=model, run_date=run_date)
        ),
        "dagster/row_count": rows,
    }


def budget_metadata(budget: BudgetOutcome | None, *, model: str | None = None) -> dict[str, Any]:
    """An attempt budget's part (`--budget`): the budget, what it spent, the attempts each
    test got and why (one model's, with `model`) and what it decided. Empty without one."""
    if budget is None:
        return {}
    attempts = [entry for entry in budget.attempts if model is None or entry[0] == model]
    rows = [
        f"| {md_escape(m)} | {md_escape(test)} | {n} | {md_escape(reason or 'first round')} |"
        for m, test, n, reason in attempts
    ]
    table = "\n".join(["| model | test | attempts | why |", "|---|---|---|---|", *rows])
    return {
        "budget": dg.MetadataValue.json(
            {"runs": budget.budget.runs, "usd": budget.budget.usd, "question": budget.question.kind}
        ),
        "budget_spent_runs": sum(entry[2] for entry in attempts),
        "budget_attempts": dg.MetadataValue.md(table),
        "budget_decision": dg.MetadataValue.md(
            "\n".join(f"- {md_escape(line)}" for line in budget.sentences())
        ),
    }


def percent(fraction: float) -> float:
    """A fraction as the percentage the CLI prints (76.0, not 0.7596899224806203)."""
    return round(100 * fraction, 1)


def digest(parts: Sequence[str]) -> str:
    """A short, order-free digest of some parts: an asset's data version."""
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:16]


def md_escape(text: str) -> str:
    # Redacted before the cut: the Dagster run database keeps this metadata.
    return redact(text).replace("|", "\\|").replace("\n", " ")[:300]


def failures_table(grades: list[Grade]) -> str:
    """The failing runs as a Markdown table, the first `FAILURES_SHOWN`."""
    failing = [g for g in grades if not g.passed]
    if not failing:
        return "Every run passed."
    lines = ["| test | attempt | status | message |", "|---|---|---|---|"]
    for grade in failing[:FAILURES_SHOWN]:
        lines.append(
            f"| {grade.name} | {grade.attempt} | {grade.status.value} | {md_escape(grade.message)} |"
        )
    if len(failing) > FAILURES_SHOWN:
        lines.append(f"| … | | | {len(failing) - FAILURES_SHOWN} more |")
    return "\n".join(lines)


def warnings_table(warned: list[tuple[str, dict[str, str]]]) -> str:
    """Reference warnings as a Markdown table, the first `FAILURES_SHOWN`."""
    if not warned:
        return "No warnings."
    lines = ["| test | kind | warning |", "|---|---|---|"]
    for name, warning in warned[:FAILURES_SHOWN]:
        lines.append(f"| {name} | {warning['kind']} | {md_escape(warning['message'])} |")
    if len(warned) > FAILURES_SHOWN:
        lines.append(f"| … | | {len(warned) - FAILURES_SHOWN} more |")
    return "\n".join(lines)


def model_and_day(context: dg.AssetExecutionContext) -> tuple[str, date]:
    """The model and the day of a (model, day) partition's materialization."""
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        # A run launched with the `dagster/partition` tag alone (GraphQL, a script) gets the
        # key as its string, "date|model": Dagster parses it only with the dimension tags.
        grid = context.assets_def.partitions_def
        assert isinstance(grid, dg.MultiPartitionsDefinition)
        key = grid.get_partition_key_from_str(key)
    keys = key.keys_by_dimension
    return keys["model"], date.fromisoformat(keys["date"])
