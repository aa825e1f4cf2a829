"""A results file (nao's `results_*.json`, or ours) read into runs, every field checked before anything is written."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date, datetime
from pathlib import Path
from typing import Any

from eval_pipeline.agents import MAX_COUNT
from eval_pipeline.pipeline._evaluation import day_problem
from eval_pipeline.suite import to_model_id

_MAX_BYTES = 256 * 1024 * 1024  # a results file bigger than this is not one we can hold
#: Who graded the runs of a results file of ours (`grades.imported_from`): the same rules.
OURS = "eval_pipeline"


class ResultsFileError(ValueError):
    """A file that is not a results file we can read; the message says why, in one line:
    the field and what was expected (`results[3].duration_ms: expected a number, got "abc"`)."""


@dataclass(frozen=True)
class ImportedRun:
    """One result of a results file, in our terms."""

    name: str
    model: str
    label: str  # the model as the file spells it (nao's `openaiCompatible/vllm:qwen3`)
    run_date: date
    attempt: int  # 0-based within the file, per test and model
    status: str  # passed / failed / error
    passed: bool
    verified: bool
    message: str
    tokens: int
    cost_usd: float | None
    duration_ms: float
    tool_calls: list[dict[str, Any]]
    final_text: str
    error: str | None
    checks: list[dict[str, Any]]
    # The key our results files give each run: a run the store already holds is not added again.
    run_key: str | None = None
    # When the file was written, as it says (nao keeps no time per run; its machine's clock).
    written_at: str | None = None
    # Where the result was graded: `nao 0.3.29`, `nao` when nao's file names no version, or
    # `eval_pipeline` (our own files).
    source: str = OURS


@dataclass(frozen=True)
class ResultsFile:
    """A results file's content hash and runs, all checked."""

    digest: str
    runs: list[ImportedRun]


def read_results_file(path: Path) -> ResultsFile:
    """The content hash and runs of one results file, all checked before anything is written.

    Raises:
        ResultsFileError: the file is missing, not JSON, or not shaped like a results file.
    """
    content, document = load_results_json(path)
    digest = hashlib.sha256(content).hexdigest()[:16]
    return ResultsFile(digest, _runs(document))


def load_results_json(path: Path) -> tuple[bytes, Any]:
    """A results file's bytes and its JSON, read once for every command that reads one.

    Raises:
        ResultsFileError: the file is missing, too large, not JSON, or nested deeper than
            Python's parser goes; the message does not repeat the file's name.
    """
    try:
        if path.stat().st_size > _MAX_BYTES:
            raise ResultsFileError(f"larger than {_MAX_BYTES // 2**20} MiB")
        content = path.read_bytes()
    except FileNotFoundError:
        raise ResultsFileError("no such file") from None
    except OSError as error:
        raise ResultsFileError(f"cannot be read ({error.strerror or error})") from None
    try:
        return content, json.loads(content)
    except json.JSONDecodeError as error:
        raise ResultsFileError(
            f"is not JSON (line {error.lineno}, column {error.colno}: {error.msg})"
        ) from None
    except UnicodeDecodeError:
        raise ResultsFileError("is not JSON text (not UTF-8)") from None
    except RecursionError:
        raise ResultsFileError("is nested too deep to be a results file") from None


def _shown(value: Any) -> str:
    """A value as the file spells it, cut short: `"abc"`, `[1]`, `1e+300`."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 40 else text[:37] + "..."


def _expected(where: str, what: str, value: Any) -> ResultsFileError:
    return ResultsFileError(f"{where}: expected {what}, got {_shown(value)}")


def graded_by(document: Mapping[str, Any]) -> str:
    """Who graded a results file's runs (its `results` list checked): `eval_pipeline` (`OURS`)
    for ours, which write `run_date` at the top; `nao 0.3.29` for nao's when it names its
    version, else `nao`."""
    if "run_date" in document or any(
        isinstance(r, dict) and "status" in r for r in document["results"]
    ):
        return OURS
    for key in ("nao_version", "version"):
        version = document.get(key)
        if isinstance(version, str) and version.strip():
            return f"nao {version.strip()[:40]}"
    return "nao"


def _runs(document: Any) -> list[ImportedRun]:
    if not isinstance(document, dict) or not isinstance(document.get("results"), list):
        raise ResultsFileError("has no `results` list; is it a results_*.json file?")
    stamp = document.get("timestamp")
    written = None
    if stamp is not None:
        try:
            written = datetime.fromisoformat(stamp) if isinstance(stamp, str) else None
        except ValueError:
            written = None
        if written is None:
            raise _expected("timestamp", "an ISO date and time", stamp)
        problem = day_problem(written.date())
        if problem:
            raise ResultsFileError(f"timestamp: {problem}")
    source = graded_by(document)
    runs = []
    for i, result in enumerate(document["results"]):
        where = f"results[{i}]"
        if not isinstance(result, dict):
            raise _expected(where, "an object", result)
        run_date = _day(result.get("run_date"), written, f"{where}.run_date")
        runs.append(_run(result, run_date, where, stamp if written else None, source))
    return _numbered(runs, [result.get("attempt") for result in document["results"]])


def _numbered(runs: list[ImportedRun], given: list[Any]) -> list[ImportedRun]:
    """Attempts 0, 1, 2… per test and model, in the order of the file's attempt numbers
    (nao counts from 1), else of the file: a day never shows attempts 1, 2, 4."""
    groups: dict[tuple[str, str, date], list[int]] = defaultdict(list)
    for index, run in enumerate(runs):
        groups[(run.name, run.model, run.run_date)].append(index)
    numbered = list(runs)
    for indexes in groups.values():
        ordered = sorted(indexes, key=lambda i: (given[i] if given[i] is not None else -1, i))
        for attempt, index in enumerate(ordered):
            numbered[index] = replace(runs[index], attempt=attempt)
    return numbered


def _day(value: Any, written: datetime | None, where: str) -> date:
    if value is None:
        if written is None:
            raise ResultsFileError("has no `timestamp` to date its runs by")
        return written.date()
    try:
        day = date.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        day = None
    if day is None:
        raise _expected(where, "a YYYY-MM-DD date", value)
    problem = day_problem(day)
    if problem:
        raise ResultsFileError(f"{where}: {problem}")
    return day


def _attempt(value: Any, where: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 10_000:
        raise _expected(where, "an attempt number", value)


def checked_number(value: Any, where: str) -> float | None:
    """A number from 0 to MAX_COUNT, the bound an agent's reply is held to for its counts and
    cost (a run's sums then stay finite and readable: `cost: 1e308` summed to `$inf`), or
    None for null."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _expected(where, "a number", value)
    if not 0 <= value <= MAX_COUNT:  # NaN too; an integer past a float's range compares
        raise _expected(where, f"a number from 0 to {MAX_COUNT}", value)
    return float(value)


def _count(value: Any, where: str) -> int:
    """A whole number of tokens that a store column holds (0 for null)."""
    if value is None:
        return 0
    number = isinstance(value, int | float) and not isinstance(value, bool)
    # The range first: it refuses NaN and infinity, which `int()` cannot take.
    if not (number and 0 <= value <= MAX_COUNT and value == int(value)):
        raise _expected(where, f"a whole number of tokens up to {MAX_COUNT}", value)
    return int(value)


def _text(value: Any, where: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise _expected(where, "text", value)


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _expected(where, "an object", value)
    return value


def _entry_error(result: Mapping[str, Any], where: str) -> str | None:
    """Why a results file's run could not be graded (`error`, or nao's `details.error`)."""
    details = _object(result.get("details"), f"{where}.details")
    return _text(result.get("error"), f"{where}.error") or _text(
        details.get("error"), f"{where}.details.error"
    )


def entry_status(result: Mapping[str, Any], where: str) -> str:
    """`passed`, `failed` or `error` of a run in a results file, nao's or ours: ours says it
    (`status`); nao's has none, and a run that did not pass is an error when it holds why it
    could not be graded (`error`), a failure otherwise.

    Raises:
        ResultsFileError: `status` is none of the three, or `error` is not text; the message
            names the field (`where` is the entry, e.g. `results[3]`).
    """
    if "status" in result:
        status = result["status"]
        if status not in ("passed", "failed", "error"):
            raise _expected(f"{where}.status", "passed, failed or error", status)
        return status
    error = _entry_error(result, where)
    return "passed" if result["passed"] else "error" if error else "failed"


def _run(
    result: Mapping[str, Any],
    run_date: date,
    where: str,
    written_at: str | None,
    source: str,
) -> ImportedRun:
    name, label = result.get("name"), result.get("model")
    if not (isinstance(name, str) and name.strip()):
        raise _expected(f"{where}.name", "the test's name", name)
    if not (isinstance(label, str) and ":" in label and "|" not in label):
        raise _expected(f"{where}.model", "`provider:model_id`", label)
    if not isinstance(result.get("passed"), bool):
        raise _expected(f"{where}.passed", "true or false", result.get("passed"))
    _attempt(result.get("attempt"), f"{where}.attempt")
    details = _object(result.get("details"), f"{where}.details")
    error = _entry_error(result, where)
    ours = "status" in result
    status = entry_status(result, where)
    message = result.get("message")
    # Ours keeps the honest cost in `cost_usd` (null: unknown); `cost` is nao's number.
    cost_key = "cost_usd" if "cost_usd" in result else "cost"
    cost = checked_number(result.get(cost_key), f"{where}.{cost_key}")
    if not ours and cost == 0:
        cost = None  # nao writes 0 for a model it has no price for: unknown, not free
    checks = (
        _our_checks(details.get("checks"), f"{where}.details.checks")
        if ours
        else _nao_checks(details, status, message, where)
    )
    return ImportedRun(
        name=name,
        model=to_model_id(label),
        label=label,
        run_date=run_date,
        attempt=0,  # numbered over the whole file (`_numbered`)
        status=status,
        passed=status == "passed",
        verified=bool(result.get("verified", message != "no verification")),
        message=message if isinstance(message, str) else status,
        tokens=_count(result.get("tokens"), f"{where}.tokens"),
        cost_usd=cost,
        duration_ms=checked_number(result.get("duration_ms"), f"{where}.duration_ms") or 0.0,
        tool_calls=_tool_calls(details.get("tool_calls"), f"{where}.details.tool_calls"),
        final_text=_text(details.get("response_text"), f"{where}.details.response_text") or "",
        error=error or None,
        checks=checks,
        run_key=_text(result.get("run_key"), f"{where}.run_key"),
        written_at=written_at,
        source=source,
    )


def _tool_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """Tool calls in our record shape, from nao's (`toolName`, `toolCallId`, `args`) or ours."""
    if calls is None:
        return []
    if not isinstance(calls, list):
        raise _expected(where, "a list of tool calls", calls)
    found = []
    for i, call in enumerate(calls):
        at = f"{where}[{i}]"
        if not isinstance(call, dict):
            raise _expected(at, "a tool call object", call)
        arguments = call.get("args", call.get("arguments"))
        found.append(
            {
                "id": str(call.get("toolCallId") or call.get("id") or f"call_{i}"),
                "name": str(call.get("toolName") or call.get("name") or "unknown"),
                "arguments": arguments if isinstance(arguments, dict) else None,
                "raw_arguments": json.dumps(arguments, default=str, ensure_ascii=False),
                "result": call.get("result"),
                "error": call.get("error") if isinstance(call.get("error"), str) else None,
                "duration_ms": checked_number(call.get("duration_ms"), f"{at}.duration_ms") or 0.0,
            }
        )
    return found


def _our_checks(checks: Any, where: str) -> list[dict[str, Any]]:
    if checks is None:
        return []
    if not isinstance(checks, list) or not all(isinstance(c, dict) for c in checks):
        raise _expected(where, "a list of check objects", checks)
    return checks


def _nao_checks(
    details: Mapping[str, Any], status: str, message: Any, where: str
) -> list[dict[str, Any]]:
    """nao's data comparison as our `data` check, so the viewer shows its tables and diff,
    with the reference SQL it ran."""
    if details.get("actual_data") is None and details.get("expected_data") is None:
        return []
    comparison = details.get("comparison")
    return [
        {
            "kind": "data",
            "status": status,
            "message": message if isinstance(message, str) else status,
            "details": {
                "actual_data": details.get("actual_data"),
                "expected_data": details.get("expected_data"),
                "reference_sql": _text(
                    details.get("reference_sql"), f"{where}.details.reference_sql"
                ),
                # nao's diff text (its viewer's "Diff"); a file of ours written before
                # 2026-12 held the tolerances here instead.
                "diff": comparison if isinstance(comparison, str) else None,
                "tolerance": comparison if isinstance(comparison, dict) else None,
                "verification_sql": details.get("verification_sql"),
            },
            "judge": None,
        }
    ]
