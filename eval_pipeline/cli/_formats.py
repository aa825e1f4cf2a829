"""Machine-readable outputs: JUnit XML for CI systems, and CSV that is safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable, Sequence
from typing import Any
from xml.etree import ElementTree as ET

from eval_pipeline.pipeline import ResultEntry, ResultsDocument

_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r", "|", "%")
# What XML 1.0 forbids in a document, even escaped: C0 controls but tab, newline and carriage
# return, lone surrogates, U+FFFE and U+FFFF.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def xml_safe(text: str) -> str:
    """`text` with each character XML forbids shown as its escape (`\\x1b`), so a reply
    holding NUL, ESC or BEL still gives a well-formed report and stays readable."""
    return _NOT_XML.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), text)


def junit_xml(document: ResultsDocument, *, suite_name: str = "eval_pipeline") -> str:
    """One <testsuite> per model, one <testcase> per test × attempt; failed runs carry a
    <failure> with the message and the data diff, errored runs an <error>."""
    root = ET.Element("testsuites", name=suite_name)
    by_model: dict[str, list[ResultEntry]] = {}
    for result in document.results:
        by_model.setdefault(result.model, []).append(result)
    for model, results in by_model.items():
        suite = ET.SubElement(
            root,
            "testsuite",
            name=xml_safe(model),
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
                name=xml_safe(name),
                classname=xml_safe(model),
                time=f"{result.duration_ms / 1000:.3f}",
            )
            if result.status == "passed":
                continue
            tag = "failure" if result.status == "failed" else "error"
            element = ET.SubElement(case, tag, message=xml_safe(result.message or ""), type=tag)
            body = [result.message or ""]
            if result.details.diff:
                body.append("diff:\n" + json.dumps(result.details.diff, indent=2, default=str))
            if result.details.response_text:
                body.append("reply:\n" + result.details.response_text)
            element.text = xml_safe("\n\n".join(body))
    ET.indent(root)
    return ET.tostring(root, encoding="unicode", xml_declaration=True) + "\n"


def spreadsheet_safe(value: Any) -> Any:
    """Neutralise text a spreadsheet would run as a formula (`=cmd()`, `+1+1`, `@SUM`...)
    by prefixing a quote, the OWASP advice; numbers are left as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return "'" + value
    return value


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
