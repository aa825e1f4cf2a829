"""Queries over the results store for the viewer: days, runs, one run, trends and labels."""

from __future__ import annotations

import hashlib
import re
from collections import defaultdict
from dataclasses import replace
from datetime import date
from typing import Any

import duckdb

from eval_pipeline.grading import pass_rate_interval
from eval_pipeline.pipeline import (
    ResultEntry,
    ResultsDocument,
    build_results,
    decode_run_rows,
    regressions_sql,
    run_rows_parameters,
    run_rows_sql,
    stored_budget,
)
from eval_pipeline.store import GradesHistory, decode_json
from eval_pipeline.suite import with_context_text
from eval_pipeline.viewer._charts import ModelLook
from eval_pipeline.viewer._reader import StoreReader

RUN_ID_PATTERN = re.compile(r"[0-9a-f]{16}")
# The agent run's columns a page's query renames, as the store's decoder needs to know.
RUN_COLUMNS = {"tool_calls": "run_tool_calls"}


def run_id(name: str, model: str, run_date: date, attempt: int) -> str:
    """The viewer's id of a graded run, the same as the reader's `RUN_ID_SQL` computes."""
    text = "\x1f".join((name, model, run_date.isoformat(), str(attempt)))
    return hashlib.md5(text.encode()).hexdigest()[:16]


def _rows(con: duckdb.DuckDBPyConnection, sql: str, params: list | None = None) -> list[dict]:
    cursor = con.execute(sql, params or [])
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def days(con: duckdb.DuckDBPyConnection) -> list[date]:
    """Every day with grades, newest first."""
    return GradesHistory.of_connection(con, "grades_snapshot").days()


def all_models(con: duckdb.DuckDBPyConnection) -> list[str]:
    return GradesHistory.of_connection(con, "grades_snapshot").models()


def model_look(con: duckdb.DuckDBPyConnection) -> ModelLook:
    """Every model's color and the name the user spells it by (`model_spellings`)."""
    spellings = dict(con.execute("SELECT model, spelling FROM model_spellings_latest").fetchall())
    return ModelLook.of(all_models(con), spellings)


def all_tags(con: duckdb.DuckDBPyConnection) -> list[str]:
    return [
        r["tag"]
        for r in _rows(
            con,
            "SELECT DISTINCT tag FROM (SELECT unnest(tags) AS tag FROM cases_snapshot) "
            "WHERE tag IS NOT NULL ORDER BY 1",
        )
    ]


def case_order(con: duckdb.DuckDBPyConnection, day: date) -> list[str]:
    """The tests graded on a day, in suite order (by file) where the suite knows them."""
    return [
        r["name"]
        for r in _rows(
            con,
            """
            SELECT g.name, min(t.file) AS file FROM grades_snapshot g LEFT JOIN cases_snapshot t ON t.name = g.name
            WHERE g.run_date = ? GROUP BY g.name ORDER BY file NULLS LAST, g.name
            """,
            [day],
        )
    ]


def models_on(con: duckdb.DuckDBPyConnection, day: date) -> list[str]:
    return GradesHistory.of_connection(con, "grades_snapshot").models_on(day)


def day_document(
    con: duckdb.DuckDBPyConnection,
    reader: StoreReader,
    day: date,
    models: list[str],
    names: list[str],
) -> ResultsDocument:
    """The results document of `eval-pipeline test` for a day (built by the same
    `build_results`, so the page and the CLI's JSON report the same numbers); a result's
    viewer id is `result_run_id`. Reads only the day's partition files."""
    keys = [(m, day) for m in models]
    sql = run_rows_sql(
        reader.partitions("grades", keys), reader.partitions("agent_runs", keys), "cases_snapshot"
    )
    rows = decode_run_rows(con.execute(sql, run_rows_parameters(day, models, None)).df())
    # The day's attempt budget, as `eval-pipeline test --budget` left it (None: none).
    budget = stored_budget(reader.layout, day)
    return replace(build_results(rows, models, names, day), budget=budget)


def result_run_id(result: ResultEntry) -> str:
    """The viewer's id of a result of the results document."""
    return run_id(result.name, result.model, result.run_date, result.attempt)


def pass_rate_on(con: duckdb.DuckDBPyConnection, day: date, models: list[str]) -> float | None:
    rows = _rows(
        con,
        "SELECT avg(passed::INT) AS rate FROM grades_snapshot WHERE run_date = ? AND list_contains(?, model)",
        [day, models],
    )
    return rows[0]["rate"] if rows else None


def runs(
    con: duckdb.DuckDBPyConnection,
    *,
    day: date | None,
    model: str | None = None,
    status: str | None = None,
    tag: str | None = None,
    text: str | None = None,
    limit: int = 2000,
) -> list[dict[str, Any]]:
    """Graded runs, newest day first, filtered; each with its latest human label if any."""
    return _rows(
        con,
        """
        SELECT g.run_id, g.name, g.model, g.run_date, g.attempt, g.status,
               g.passed, g.message, g.verified, g.tokens, g.cost_usd, g.duration_ms,
               g.tool_call_count, t.tags, l.passed AS label_passed, l.note AS label_note
        FROM grades_snapshot g
        LEFT JOIN cases_snapshot t ON t.name = g.name
        LEFT JOIN labels_latest_snapshot l ON l.name = g.name AND l.model = g.model
            AND l.run_date = g.run_date AND l.attempt = g.attempt
        WHERE (?::DATE IS NULL OR g.run_date = ?::DATE)
          AND (?::VARCHAR IS NULL OR g.model = ?::VARCHAR)
          AND (?::VARCHAR IS NULL OR g.status = ?::VARCHAR)
          AND (?::VARCHAR IS NULL OR list_contains(t.tags, ?::VARCHAR))
          AND (?::VARCHAR IS NULL OR contains(lower(concat_ws(' ', g.name, g.model, g.message)),
                                              lower(?::VARCHAR)))
        ORDER BY g.run_date DESC, g.model, g.name, g.attempt
        LIMIT ?
        """,
        [day, day, model, model, status, status, tag, tag, text, text, limit],
    )


def run_detail(
    con: duckdb.DuckDBPyConnection, reader: StoreReader, ident: str
) -> dict[str, Any] | None:
    """A graded run with its agent run (transcript, tool calls, tokens) and its test."""
    if not RUN_ID_PATTERN.fullmatch(ident):
        return None
    found = _rows(
        con, "SELECT name, model, run_date, attempt FROM grades_snapshot WHERE run_id = ?", [ident]
    )
    if not found:
        return None
    run = found[0]
    keys = [(run["model"], run["run_date"])]
    rows = _rows(
        con,
        f"""
        SELECT ? AS run_id, g.name, g.model, g.run_date, g.attempt, g.run_key,
               g.status, g.passed, g.message, g.verified, g.checks, g.tokens, g.cost_usd,
               g.duration_ms, g.tool_call_count, g.written_at AS graded_at,
               r.status AS run_status, r.final_text, r.messages, r.tool_calls AS run_tool_calls,
               r.error AS run_error, r.input_tokens, r.cached_input_tokens, r.output_tokens,
               r.turns, r.started_at, r.finished_at, r.reused, r.written_at AS stored_at,
               r.answerer_details, r.context_hash, c.text AS context_text,
               t.sql AS case_sql, t.tags, t.category, t.difficulty, t.notes, t.file
        FROM {reader.partitions("grades", keys)} g
        LEFT JOIN {reader.partitions("agent_runs", keys)} r
            ON r.key = g.run_key AND r.name = g.name AND r.model = g.model
        LEFT JOIN agent_contexts_latest c ON c.context_hash = r.context_hash
        LEFT JOIN cases_snapshot t ON t.name = g.name
        WHERE g.name = ? AND g.attempt = ?
        LIMIT 1
        """,
        [ident, run["name"], run["attempt"]],
    )
    if not rows:
        return None
    row = decode_json("agent_runs", decode_json("grades", rows[0]), renamed=RUN_COLUMNS)
    for key in ("checks", "messages", "run_tool_calls"):
        row[key] = row[key] or []
    # The system message as it was sent: its context is stored once, not with each run.
    row["messages"] = with_context_text(
        row["messages"], row["context_hash"], row.pop("context_text")
    )
    return row


def neighbours(
    con: duckdb.DuckDBPyConnection, run: dict[str, Any]
) -> tuple[str | None, str | None]:
    """The previous and next run of the same day, in the runs table's order."""
    ids = [
        r["run_id"]
        for r in _rows(
            con,
            "SELECT g.run_id AS run_id FROM grades_snapshot g WHERE run_date = ? "
            "ORDER BY model, name, attempt",
            [run["run_date"]],
        )
    ]
    index = ids.index(run["run_id"]) if run["run_id"] in ids else -1
    if index < 0:
        return None, None
    return (ids[index - 1] if index > 0 else None), (
        ids[index + 1] if index + 1 < len(ids) else None
    )


def case_history(con: duckdb.DuckDBPyConnection, name: str, model: str) -> list[dict[str, Any]]:
    """Every graded attempt of one test by one model, oldest first."""
    return _rows(
        con,
        "SELECT g.run_id, run_date, attempt, status FROM grades_snapshot g "
        "WHERE name = ? AND model = ? ORDER BY run_date, attempt",
        [name, model],
    )


def run_labels(con: duckdb.DuckDBPyConnection, run: dict[str, Any]) -> list[dict[str, Any]]:
    """Every label ever given to this run, newest first."""
    return _rows(
        con,
        "SELECT passed, note, author, labelled_at FROM labels_snapshot WHERE name = ? AND model = ? "
        "AND run_date = ? AND attempt = ? ORDER BY written_at DESC",
        [run["name"], run["model"], run["run_date"], run["attempt"]],
    )


def trend_points(con: duckdb.DuckDBPyConnection, start: date, end: date) -> list[dict[str, Any]]:
    """Per model and day: runs, passes, pass rate with its 95% interval (`ci_low`, `ci_high`:
    `pass_rate_interval`, clustered by test), tokens and cost."""
    points = _rows(
        con,
        """
        SELECT model, run_date, count(*) AS runs, sum(passed::INT) AS passes,
               avg(passed::INT) AS pass_rate, sum(tokens) AS tokens, sum(cost_usd) AS cost_usd
        FROM grades_snapshot WHERE run_date BETWEEN ? AND ? GROUP BY ALL ORDER BY run_date, model
        """,
        [start, end],
    )
    per_test = _rows(
        con,
        """
        SELECT model, run_date, count(*) AS attempts, sum(passed::INT) AS passes
        FROM grades_snapshot WHERE run_date BETWEEN ? AND ? GROUP BY model, run_date, name
        """,
        [start, end],
    )
    tests: dict[tuple[str, Any], list[list[bool]]] = defaultdict(list)
    for row in per_test:
        passes, attempts = int(row["passes"] or 0), int(row["attempts"])
        tests[(row["model"], row["run_date"])].append(
            [True] * passes + [False] * (attempts - passes)
        )
    for point in points:
        point["ci_low"], point["ci_high"] = pass_rate_interval(
            tests[(point["model"], point["run_date"])]
        )
    return points


def day_changes(con: duckdb.DuckDBPyConnection, start: date, end: date) -> list[dict[str, Any]]:
    """Tests whose verdict flipped between their model's evaluated days, on days in the window
    (newest first): `regressed` by the rule of the no_regression check and the history mart
    (`regressions_sql`: every attempt passed on the model's previous day, some did not now),
    `improved` the other way round (`diff_days`: some attempt did not pass then, all do now)."""
    rows = _rows(
        con,
        f"""
        WITH case_days AS (
            SELECT name, model, run_date, bool_and(passed) AS passed
            FROM grades_snapshot GROUP BY name, model, run_date
        ),
        model_days AS (
            SELECT model, run_date,
                   lag(run_date) OVER (PARTITION BY model ORDER BY run_date) AS previous_date
            FROM (SELECT DISTINCT model, run_date FROM case_days)
        ),
        improved AS (
            SELECT today.name, today.model, today.run_date, days.previous_date,
                   0 AS attempt, 'improved' AS change, 'passed' AS status, NULL AS message
            FROM case_days AS today
            JOIN model_days AS days USING (model, run_date)
            JOIN case_days AS before
              ON before.name = today.name AND before.model = today.model
             AND before.run_date = days.previous_date
            WHERE today.passed AND NOT before.passed
        ),
        regressed AS (
            SELECT name, model, run_date, previous_date, attempt, 'regressed' AS change,
                   status, first_failure AS message
            FROM ({regressions_sql("grades_snapshot")})
        )
        SELECT * FROM (SELECT * FROM regressed UNION ALL SELECT * FROM improved)
        WHERE run_date BETWEEN ? AND ?
        ORDER BY run_date DESC, change DESC, model, name
        """,
        [start, end],
    )
    for row in rows:
        row["run_id"] = run_id(row["name"], row["model"], row["run_date"], row["attempt"])
    return rows


def flaky(con: duckdb.DuckDBPyConnection, start: date, end: date) -> list[dict[str, Any]]:
    """(test, model) pairs whose attempts disagreed on some day of the window (some passed,
    some not: the `flaky_cases` mart's rule, per day), with the number of such days and
    those days' attempts (oldest first) for a strip. A test that passed one day and failed
    the next is not flaky but changed (`day_changes`)."""
    return _rows(
        con,
        """
        WITH days AS (
            SELECT name, model, run_date, count(*) AS attempts, sum(passed::INT) AS passes
            FROM grades_snapshot WHERE run_date BETWEEN ? AND ?
            GROUP BY name, model, run_date
        ),
        mixed AS (SELECT * FROM days WHERE passes > 0 AND passes < attempts)
        SELECT m.name, m.model, count(DISTINCT m.run_date) AS flaky_days,
               (SELECT count(*) FROM days d WHERE d.name = m.name AND d.model = m.model)
                   AS evaluated_days,
               list(struct_pack(run_date := g.run_date, attempt := g.attempt,
                                status := g.status, run_id := g.run_id)
                    ORDER BY g.run_date, g.attempt) AS outcomes
        FROM mixed m
        JOIN grades_snapshot g USING (name, model, run_date)
        GROUP BY m.name, m.model
        ORDER BY flaky_days DESC, m.name, m.model
        """,
        [start, end],
    )


def labelled_runs(con: duckdb.DuckDBPyConnection, reader: StoreReader) -> list[dict[str, Any]]:
    """Each run's latest label with the run's current grade (status and checks)."""
    keys = [
        (r["model"], r["run_date"])
        for r in _rows(con, "SELECT DISTINCT model, run_date FROM labels_latest_snapshot")
    ]
    rows = _rows(
        con,
        f"""
        SELECT l.run_id, l.name, l.model, l.run_date, l.attempt,
               l.passed AS label_passed, l.note, l.author, l.labelled_at,
               g.status, g.passed AS grade_passed, g.checks
        FROM labels_latest_snapshot l
        LEFT JOIN {reader.partitions("grades", keys)} g ON g.name = l.name AND g.model = l.model
            AND g.run_date = l.run_date AND g.attempt = l.attempt
        ORDER BY l.labelled_at DESC
        """,
    )
    for row in rows:
        row["checks"] = decode_json("grades", row)["checks"] or []
    return rows


def label_count(con: duckdb.DuckDBPyConnection) -> int:
    return _rows(con, "SELECT count(*) AS n FROM labels_snapshot")[0]["n"]


def unlabelled_judged(con: duckdb.DuckDBPyConnection, limit: int = 25) -> list[dict[str, Any]]:
    """Recent runs an LLM judge decided on that no person has labelled yet."""
    return _rows(
        con,
        """
        SELECT g.run_id, g.name, g.model, g.run_date, g.attempt, g.status,
               g.message
        FROM grades_snapshot g
        LEFT JOIN labels_latest_snapshot l ON l.name = g.name AND l.model = g.model
            AND l.run_date = g.run_date AND l.attempt = g.attempt
        WHERE l.name IS NULL AND g.status <> 'error'
          AND g.judged
        ORDER BY g.run_date DESC, g.model, g.name, g.attempt
        LIMIT ?
        """,
        [limit],
    )
