"""Machine-readable outputs: JUnit XML for CI systems, and CSV that is safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Sequence
from typing import Any
from xml.etree import ElementTree as ET

from eval_pipeline.pipeline import ResultEntry, ResultsDocument
from eval_pipeline.suite import printable

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "|", "%")


def junit_xml(document: ResultsDocument, *, suite_name: str = "eval_pipeline") -> str:
    """One <testsuite> per model, one <testcase> per test × attempt; failed runs carry a
    <failure> with the message and the data diff, errored runs an <error>. The root's
    totals are the summary line's and the results file's: `errors` is `threshold.errors`,
    the runs that make the command exit 3 unless errors are allowed."""
    summary = document.summary
    root = ET.Element(
        "testsuites",
        name=suite_name,
        tests=str(summary.total),
        failures=str(summary.total - summary.passed - summary.errors),
        errors=str(summary.errors),
        time=f"{summary.total_duration_ms / 1000:.3f}",
    )
    by_model: dict[str, list[ResultEntry]] = {}
    for result in document.results:
        by_model.setdefault(result.model, []).append(result)
    for model, results in by_model.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=printable(model),
            tests=str(len(results)),
            failures=str(sum(r.status == "failed" for r in results)),
            errors=str(sum(r.status == "error" for r in results)),
            time=f"{sum(r.duration_ms for r in results) / 1000:.3f}",
            timestamp=document.timestamp.isoformat(),
        )
        for result in results:
            name = (
                result.name if result.attempt == 0 else f"{result.name} [attempt {result.attempt}]"
            )
            case = ET.SubElement(
                suite,
                "testcase",
                name=printable(name),
                classname=printable(model),
                time=f"{result.duration_ms / 1000:.3f}",
            )
            if result.status == "passed":
                continue
            tag = "failure" if result.status == "failed" else "error"
            element = ET.SubElement(
                case, tag, message=printable(result.message or "", lines=True), type=tag
            )
            body = [result.message or ""]
            if result.details.diff:
                body.append("diff:\n" + json.dumps(result.details.diff, indent=2, default=str))
            if result.details.response_text:
                body.append("reply:\n" + result.details.response_text)
            element.text = printable("\n\n".join(body), lines=True)
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def spreadsheet_safe(value: Any) -> Any:
    """Neutralise text a spreadsheet would run as a formula (`=cmd()`, `+1+1`, `@SUM`...)
    by prefixing a quote, the OWASP advice, and show its control characters as escapes (a
    CSV is printed on a terminal too); numbers are left as they are."""
    if not isinstance(value, str):
        return value
    value = printable(value, lines=True)
    return "'" + value if value.startswith(_FORMULA_STARTS) else value


def csv_text(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow([spreadsheet_safe(c) for c in columns])
    for row in rows:
        writer.writerow(["" if v is None else spreadsheet_safe(v) for v in row])
    return out.getvalue()


RESULT_COLUMNS = (
    "run_date",
    "model",
    "name",
    "attempt",
    "status",
    "passed",
    "message",
    "tokens",
    "cost",
    "duration_ms",
    "tool_call_count",
    "response_text",
    "reference_sql",
)


def results_csv(document: ResultsDocument) -> str:
    """A row per run (`RESULT_COLUMNS`); `cost` is empty when unknown (nao's `cost` says 0)."""
    rows = [
        [
            r.run_date.isoformat(),
            r.model,
            r.name,
            r.attempt,
            r.status,
            r.passed,
            r.message,
            r.tokens,
            r.cost_usd,
            r.duration_ms,
            r.tool_call_count,
            r.details.response_text,
            r.details.reference_sql,
        ]
        for r in document.results
    ]
    return csv_text(RESULT_COLUMNS, rows)
