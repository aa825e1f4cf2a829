"""The results document of an evaluation built from the store's graded runs, and its file.

It lives below every surface that shows it: `eval-pipeline test` prints and writes it,
`eval-pipeline export` turns it into CSV, the viewer's day page renders it. One row query
(`run_rows_sql`) feeds all of them, and one builder (`build_results`) turns the rows into a
`ResultsDocument` (its type and JSON rendering: `_document`), so they report the same runs with
the same numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime
from pathlib import Path
from typing import Any, TextIO

import pandas as pd

from eval_pipeline.grading import (
    CaseMetrics,
    RunOutcome,
    case_metrics,
    judge_noise,
    judge_self_agreement,
    summarize_models,
)
from eval_pipeline.pipeline._comparisons import comparisons_of, model_intervals
from eval_pipeline.pipeline._document import (
    DetailsSpill,
    ModelEntry,
    ResultDetails,
    ResultEntry,
    ResultsDocument,
    Summary,
    model_comparisons,
    result_line,
)
from eval_pipeline.pipeline._nao_format import (
    comparison_text,
    model_pass_metrics,
    nao_cost,
    nao_tool_calls,
    pass_metrics,
)
from eval_pipeline.store import (
    StateFolder,
    batches,
    decode_json,
    one_connection,
    query,
    with_recovery,
    writing_below,
)
from eval_pipeline.suite import IDENTITY_FIELDS, redact_value, secrets_known


def _none_if_nan(value: Any) -> Any:
    return None if value is None or (isinstance(value, float) and pd.isna(value)) else value


def _data_details(checks: list[dict[str, Any]]) -> dict[str, Any]:
    for check in checks:
        if check.get("kind") == "data":
            return check.get("details") or {}
    return {}


def run_rows_sql(
    grades: str = "grades", agent_runs: str = "agent_runs", test_cases: str = "test_cases"
) -> str:
    """The query of a day's graded runs, each with its run's transcript and its test's
    reference SQL, over any source of the three tables: the store's views (the CLI) or the
    day's partition files and a snapshot (the viewer). Its parameters are
    `run_rows_parameters`. A run is joined by its key, test, model and day: two tests with
    the same content share a key, and a key is only unique within a partition."""
    return f"""
        SELECT g.name, g.model, g.attempt, g.run_key, g.status, g.passed, g.message, g.verified, g.checks,
               g.tokens, g.cost_usd, g.duration_ms, g.tool_call_count, g.run_date,
               r.final_text, r.tool_calls AS run_tool_calls, r.error AS run_error,
               r.queries AS run_queries, r.answerer_details, t.sql AS reference_sql, t.database
        FROM {grades} g
        LEFT JOIN {agent_runs} r ON r.key = g.run_key AND r.name = g.name
            AND r.model = g.model AND r.run_date = g.run_date
        LEFT JOIN {test_cases} t ON t.name = g.name
        WHERE g.run_date = ? AND list_contains(?, g.model)
          AND (?::VARCHAR[] IS NULL OR list_contains(?::VARCHAR[], g.name))
        """


def run_rows_parameters(day: date, models: Sequence[str], names: Sequence[str] | None) -> list[Any]:
    """The parameters of `run_rows_sql`: the day, its models, its tests (None: every test)."""
    wanted = None if names is None else list(names)
    return [day, list(models), wanted, wanted]


def decode_run_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of `run_rows_sql`, its JSON columns decoded by the store."""
    return decode_json(
        "agent_runs",
        decode_json("grades", row),
        renamed={"tool_calls": "run_tool_calls", "queries": "run_queries"},
    )


def decode_run_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """The rows of `run_rows_sql` as records, their JSON columns decoded by the store."""
    return [decode_run_row(row) for row in frame.to_dict("records")]


def read_run_rows(
    layout: StateFolder, models: Sequence[str], day: date, names: Sequence[str]
) -> Iterator[dict[str, Any]]:
    """One row per graded run of these models and tests on the day, with its run's transcript
    and, when it was judged several times (`--rejudge-samples`), its `judge_samples`; read
    from the store a batch at a time as they are asked for."""
    # Read apart from `run_rows_sql`: the viewer runs that query over partition files, which
    # predate the column when written before it existed.
    sampled = query(
        layout,
        "SELECT name, model, attempt, judge_samples FROM grades "
        "WHERE run_date = ? AND list_contains(?, model) AND judge_samples IS NOT NULL",
        [day, list(models)],
    )
    samples = {
        (row["name"], row["model"], int(row["attempt"])): decode_json("grades", row)[
            "judge_samples"
        ]
        for row in sampled.to_dict("records")
    }
    for batch in batches(layout, run_rows_sql(), run_rows_parameters(day, models, names)):
        for row in batch:
            row = decode_run_row(row)
            row["judge_samples"] = samples.get((row["name"], row["model"], int(row["attempt"])))
            yield row


def stored_results(
    layout: StateFolder,
    models: Sequence[str],
    day: date,
    names: Sequence[str],
    *,
    dialect: Callable[[str | None], str | None] | None = None,
    planned: Sequence[tuple[str, str, int]] | None = None,
) -> tuple[ResultsDocument, int]:
    """The results document of the day's stored runs of these models and tests
    (`build_results` over `read_run_rows`, read once, in batches), and how many runs the
    store held. A damaged file found on the way is set aside and the read begins again."""
    stored = 0

    def counted() -> Iterator[dict[str, Any]]:
        nonlocal stored
        stored = 0  # from the start again after a damaged file was set aside
        for row in read_run_rows(layout, models, day, names):
            stored += 1
            yield row

    def build() -> ResultsDocument:
        return build_results(counted(), models, names, day, dialect=dialect, planned=planned)

    with one_connection(layout):
        document = with_recovery(layout, build)
    return document, stored


def ungraded_rows(
    rows: Iterable[Mapping[str, Any]], planned: Sequence[tuple[str, str, int]], day: date
) -> list[dict[str, Any]]:
    """An `error` row for each planned run (model, test, attempt) that `rows` hold no grade
    of, so a results document counts exactly the runs it planned: a run that went missing
    (a crash between its run and its grade, a store that lost a file) is reported as an
    error to rerun, never left out of the totals."""
    return _ungraded({(r["model"], r["name"], int(r["attempt"])) for r in rows}, planned, day)


def _ungraded(
    graded: set[tuple[str, str, int]], planned: Sequence[tuple[str, str, int]], day: date
) -> list[dict[str, Any]]:
    message = "no grade is stored for this run; run the evaluation again to grade it"
    return [
        {
            "name": name,
            "model": model,
            "attempt": attempt,
            "run_key": None,
            "status": "error",
            "passed": False,
            "message": message,
            "verified": False,
            "checks": [],
            "tokens": 0,
            "cost_usd": None,
            "duration_ms": 0.0,
            "tool_call_count": 0,
            "run_date": day,
            "final_text": None,
            "run_tool_calls": [],
            "run_error": message,
            "run_queries": [],
            "reference_sql": None,
            "database": None,
            "judge_samples": None,
            "answerer_details": None,
        }
        for model, name, attempt in planned
        if (model, name, attempt) not in graded
    ]


def build_results(
    rows: Iterable[Mapping[str, Any]],
    models: Sequence[str],
    names: Sequence[str],
    day: date,
    *,
    dialect: Callable[[str | None], str | None] | None = None,
    planned: Sequence[tuple[str, str, int]] | None = None,
) -> ResultsDocument:
    """The results document of these runs: every key nao 0.3.29 writes (`timestamp`,
    `results`, `summary`, `by_model`, `pass_metrics`), with nao's value kinds, plus ours
    (`status`, `attempt`, `verified`, `checks`, `diff`, `run_date`,
    `cost_usd`/`total_cost_usd`/`cost_complete`, p50/p95, `pass_metrics_by_test`), and the
    statistics (`by_model[].pass_rate_ci95`, `comparisons`). Results are grouped by model in
    the order the models were given, then by test in suite order, then attempt.

    The rows are read once, as they come: each result's details go to the document's
    `DetailsSpill`, and what is kept of a run is small, whatever it said.

    Args:
        rows: the day's graded runs, from `read_run_rows` (or the viewer's sources).
        models: the models, in the order to report them.
        names: the tests, in suite order.
        day: the evaluated day.
        dialect: the SQL dialect of a test's database (by its `database:` name), for nao's
            `tool_calls[].result.dialect`; None leaves it null.
        planned: the runs (model, test, attempt) the evaluation planned: one that `rows`
            hold no grade of is reported as an error (`ungraded_rows`).
    """
    model_order = {m: i for i, m in enumerate(models)}
    name_order = {n: i for i, n in enumerate(names)}
    spill = DetailsSpill()
    kept: list[tuple[ResultEntry, RunOutcome, Any]] = []

    def keep(row: Mapping[str, Any]) -> None:
        entry = _result_entry(row, day, dialect, spill)
        samples = row.get("judge_samples")
        kept.append((entry, RunOutcome.from_grade_row(row), samples))

    for row in rows:
        keep(row)
    if planned is not None:
        graded = {(entry.model, entry.name, entry.attempt) for entry, _, _ in kept}
        for row in _ungraded(graded, planned, day):
            keep(row)
    kept.sort(
        key=lambda item: (
            model_order.get(item[0].model, 99),
            name_order.get(item[0].name, 10**6),
            item[0].attempt,
        )
    )
    results = tuple(entry for entry, _, _ in kept)
    outcomes = [outcome for _, outcome, _ in kept]
    metrics = sorted(
        case_metrics(outcomes),
        key=lambda m: (model_order.get(m.model, 99), name_order.get(m.name, 10**6)),
    )
    by_model = _model_entries(outcomes, metrics)
    return ResultsDocument(
        timestamp=datetime.now(),
        run_date=day,
        results=results,
        summary=_summary(results),
        by_model=by_model,
        pass_metrics=pass_metrics(metrics),
        pass_metrics_by_test=tuple(metrics),
        judge_noise=tuple(
            judge_noise((e.name, e.model, e.passed, samples) for e, _, samples in kept)
        ),
        # Is the difference real? (docs/grading.md): every pair of the ranked models.
        comparisons=model_comparisons(comparisons_of(outcomes, [m.model for m in by_model])),
    )


def _result_entry(
    row: Mapping[str, Any],
    day: date,
    dialect: Callable[[str | None], str | None] | None,
    spill: DetailsSpill,
) -> ResultEntry:
    """One run: nao's keys (an unknown `cost` is null, as nao writes it) and ours; its
    details kept in `spill`."""
    checks = row["checks"] or []
    data = _data_details(checks)
    cost = _none_if_nan(row["cost_usd"])
    run_error = _none_if_nan(row["run_error"])
    # nao's `error` is the reason a run could not be graded: ours is an error status.
    error = (run_error or row["message"]) if row["status"] == "error" else None
    database = _none_if_nan(row.get("database"))
    samples = row.get("judge_samples")
    return ResultEntry(
        name=row["name"],
        model=row["model"],
        passed=bool(row["passed"]),
        status=row["status"],
        attempt=int(row["attempt"]),
        run_key=row.get("run_key"),
        message=row["message"],
        verified=bool(row["verified"]),
        tokens=int(row["tokens"] or 0),
        cost=cost,
        cost_usd=cost,
        duration_ms=round(float(row["duration_ms"] or 0.0)),
        tool_call_count=int(row["tool_call_count"] or 0),
        error=error,
        run_date=day,
        judge_samples=tuple(samples) if samples else None,
        judge_self_agreement=judge_self_agreement(samples) if samples else None,
        details=spill.keep(
            ResultDetails(
                response_text=_none_if_nan(row["final_text"]),
                actual_data=data.get("actual_data"),
                expected_data=data.get("expected_data"),
                diff=data.get("diff"),
                reference_sql=_none_if_nan(row["reference_sql"]),
                verification_sql=data.get("extraction_query"),
                comparison=comparison_text(data.get("diff")) if row["status"] == "failed" else None,
                tool_calls=tuple(
                    nao_tool_calls(
                        row["run_tool_calls"],
                        row.get("run_queries"),
                        dialect(database) if dialect else None,
                    )
                ),
                checks=tuple(checks),
                error=run_error,
                # What the data check found beyond the comparison: the reference's health
                # warnings, the semantic check's verdict and, for a failed check, the mistake.
                reference_warnings=tuple(data.get("reference_warnings") or []),
                semantic=data.get("semantic"),
                failure_kind=data.get("failure_kind"),
                # Stored as `comparison` by the grading; nao's key holds the diff text.
                tolerances=data.get("comparison"),
                nao_verdict=nao_verdict(row.get("answerer_details")),
            )
        ),
    )


def nao_verdict(answerer_details: Any) -> dict[str, Any] | None:
    """nao's own verdict of a run of nao's agent (`nao:` models), as the results file gives
    it: `passed` and `message` of nao's comparison, and nao's verification `sql` and
    `error`; None for another agent's run, or a reply without a verification. When nao's
    comparison could not be computed, `passed` is null and `message` says why."""
    nao = (answerer_details or {}).get("nao") if isinstance(answerer_details, dict) else None
    verdict = (nao or {}).get("verdict")
    note = (nao or {}).get("verdict_note")
    if not verdict and not note:
        return None
    verification = nao.get("verification") or {}
    return {
        "passed": bool(verdict.get("passed")) if verdict else None,
        "message": verdict.get("message") if verdict else note,
        "sql": verification.get("sql"),
        "error": verification.get("error"),
    }


def _summary(results: Sequence[ResultEntry]) -> Summary:
    total = len(results)
    duration = sum(r.duration_ms for r in results)
    tools = sum(r.tool_call_count for r in results)
    costs = [r.cost_usd for r in results if r.cost_usd is not None]
    passed = sum(r.passed for r in results)
    return Summary(
        total=total,
        passed=passed,
        # nao's meaning: every run that did not pass; `errors` says how many of those were
        # infrastructure errors rather than wrong answers.
        failed=total - passed,
        errors=sum(r.status == "error" for r in results),
        unverified=sum(not r.verified for r in results),
        pass_rate=round(100 * passed / total, 1) if total else 0.0,
        total_tokens=sum(r.tokens for r in results),
        total_cost=round(sum(costs), 6) if costs else 0,
        # Ours: the sum of the known costs (null when none is known), and whether every
        # run had a price; nao's `total_cost` is 0 for unknown.
        total_cost_usd=round(sum(costs), 6) if costs else None,
        cost_complete=len(costs) == total,
        total_duration_ms=duration,
        total_duration_s=round(duration / 1000, 1),
        total_tool_calls=tools,
        avg_duration_ms=round(duration / total) if total else 0,
        avg_tool_calls=round(tools / total, 2) if total else 0.0,
    )


def _model_entries(
    outcomes: Sequence[RunOutcome], metrics: Sequence[CaseMetrics]
) -> tuple[ModelEntry, ...]:
    """Each model ranked, with nao's pass@k keys and the 95% interval on its pass rate
    ([low, high] in percent, the unit of `pass_rate` there)."""
    per_model = model_pass_metrics(metrics)
    intervals = model_intervals(outcomes)
    entries = []
    for summary in summarize_models(outcomes):
        cost = round(summary.cost_usd, 6) if summary.cost_usd is not None else None
        k, aggregate = per_model[summary.model]
        low, high = intervals[summary.model]
        entries.append(
            ModelEntry(
                model=summary.model,
                total=summary.total,
                passed=summary.passed,
                failed=summary.total - summary.passed,
                errors=summary.errors,
                pass_rate=round(100 * summary.pass_rate, 1),
                total_tokens=summary.tokens,
                total_cost=nao_cost(cost),
                total_cost_usd=cost,
                cost_complete=summary.cost_complete,
                total_duration_ms=round((summary.avg_duration_ms or 0) * summary.total),
                avg_duration_ms=round(summary.avg_duration_ms or 0),
                p50_duration_ms=round(summary.duration_p50_ms or 0),
                p95_duration_ms=round(summary.duration_p95_ms or 0),
                total_tool_calls=summary.tool_calls,
                avg_tool_calls=round(summary.avg_tool_calls or 0, 2),
                k=k,
                pass_at_1=aggregate.pass_at_1,
                pass_at_k=aggregate.pass_at_k,
                pass_hat_k=aggregate.pass_hat_k,
                pass_rate_ci95=(round(100 * low, 1), round(100 * high, 1)),
            )
        )
    return tuple(entries)


def readable_json(value: Any, *, levels: int = 2) -> str:
    """`value` as JSON whose outer `levels` are indented by two spaces and whose deeper parts
    are one line each: in a results file, one line per run. It reads as `json.loads` reads
    `indent=2`, and is written by json's C encoder, which `indent` turns off (the
    pure-Python one took a third of a second for 1,500 runs)."""
    return _readable(value, 0, levels)


def _readable(part: Any, level: int, levels: int) -> str:
    inner = "  " * (level + 1)
    if level < levels and isinstance(part, dict) and part and all(map(_is_text, part)):
        items = (
            f"{inner}{json.dumps(k)}: {_readable(v, level + 1, levels)}" for k, v in part.items()
        )
        return "{\n" + ",\n".join(items) + "\n" + "  " * level + "}"
    if level < levels and isinstance(part, list | tuple) and part:
        items = (inner + _readable(item, level + 1, levels) for item in part)
        return "[\n" + ",\n".join(items) + "\n" + "  " * level + "]"
    return json.dumps(part, default=str, ensure_ascii=False)


def _is_text(key: object) -> bool:
    return isinstance(key, str)


def write_readable(document: ResultsDocument, handle: TextIO) -> None:
    """`readable_json` of the document's JSON (`to_json`), secrets redacted, written to
    `handle` a result at a time: the whole text is never in memory."""
    redacted = (
        (lambda value: redact_value(value, keep=IDENTITY_FIELDS)) if secrets_known() else None
    )
    head = document.to_json(results=False)
    if redacted is not None:
        head = redacted(head)
    handle.write("{\n")
    for index, (key, value) in enumerate(head.items()):
        handle.write(f"  {json.dumps(key)}: ")
        if key == "results":
            opened = False
            for entry in document.results:
                handle.write(",\n    " if opened else "[\n    ")
                handle.write(result_line(entry, redacted))
                opened = True
            handle.write("\n  ]" if opened else "[]")
        else:
            handle.write(_readable(value, 1, 2))
        handle.write(",\n" if index < len(head) - 1 else "\n")
    handle.write("}")


def write_results_file(document: ResultsDocument, folder: Path) -> Path:
    """`<folder>/results_YYYYMMDD_HHMMSS.json` (nao's `results_*.json` pattern), the
    document's JSON, named by the evaluated day (`run_date`) and the time it was built
    (`timestamp`), so a file of a past day sorts and imports as that day. `folder` is the
    suite's `results_dir`.

    Each call writes a file of its own: when another command took the name (two commands
    finishing in the same second), this one is `..._HHMMSS_2.json` (then `_3`, …). The file
    appears whole under its name (written aside, then linked), never over another's.
    """
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"results_{document.run_date:%Y%m%d}_{document.timestamp:%H%M%S}"
    with writing_below(folder):  # a full disk names the results folder
        descriptor, name = tempfile.mkstemp(dir=folder, prefix=f".{stem}.", suffix=".tmp")
    aside = Path(name)
    try:
        with writing_below(folder), os.fdopen(descriptor, "w", encoding="utf-8") as handle:
            write_readable(document, handle)
        number = 1
        while True:
            path = folder / (f"{stem}.json" if number == 1 else f"{stem}_{number}.json")
            if _claim(path, aside):
                return path
            number += 1
    finally:
        aside.unlink(missing_ok=True)


def _claim(path: Path, aside: Path) -> bool:
    """Give the file written `aside` the name `path`, unless that name is taken (False)."""
    try:
        os.link(aside, path)  # fails when the name is taken: never overwrites
    except FileExistsError:
        return False
    except OSError:  # a file system without hard links: create the name exclusively
        try:
            with path.open("xb") as handle, aside.open("rb") as source:
                shutil.copyfileobj(source, handle)
        except FileExistsError:
            return False
    return True
