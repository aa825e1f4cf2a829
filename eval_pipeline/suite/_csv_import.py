"""Bulk import of Calibrate-style CSV tests into YAML test files, all rows or none."""

from __future__ import annotations

import csv
import json
import re
from pathlib import Path
from typing import Any

from eval_pipeline.suite._errors import Problem, SuiteError
from eval_pipeline.suite._parse import parse_case
from eval_pipeline.suite._suite import CASES_DIR, load_cases
from eval_pipeline.suite._yaml import MAX_DEPTH, dump_yaml

_FIXED_COLUMNS = ("name", "conversation_history", "tool_calls")
_EVALUATOR_VARIABLES = ("criteria",)
_TRUE = {"", "true", "yes", "1"}
_FALSE = {"false", "no", "0"}


def _slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_") or "test"


def _depth(value: Any) -> int:
    """How deeply lists and objects nest in a JSON value, without recursion."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, level = stack.pop()
        children = (
            item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        )
        for child in children:
            if isinstance(child, dict | list):
                stack.append((child, level + 1))
        deepest = max(deepest, level if isinstance(item, dict | list) else 0)
    return deepest


def _json_cell(value: str, source: str, column: str, problems: list[Problem]) -> Any:
    try:
        data = json.loads(value)
    except json.JSONDecodeError as error:
        problems.append(
            Problem(
                source,
                column,
                f"is not valid JSON ({error.msg} at character {error.pos}); expected a JSON list",
            )
        )
        return None
    except RecursionError:  # deeper than the JSON parser's own stack
        data, too_deep = None, True
    else:
        # The test file written from the cell must load again, and the test file's own
        # mapping is one more level: the YAML depth limit applies.
        too_deep = _depth(data) >= MAX_DEPTH
    if too_deep:
        problems.append(
            Problem(
                source,
                column,
                f"nests too deeply (a test file allows {MAX_DEPTH} levels in all); flatten it",
            )
        )
        return None
    return data


def _cases_folder(suite_root: Path, into: str) -> Path:
    """The folder `--into` names inside the suite's cases folder, refused when it leads out."""
    cases_dir = (suite_root / CASES_DIR).resolve()
    target = (cases_dir / into).resolve()
    if Path(into).is_absolute() or ".." in Path(into).parts or not target.is_relative_to(cases_dir):
        raise SuiteError(
            [
                Problem(
                    "--into",
                    None,
                    f"{into!r} leads outside the suite's {CASES_DIR}/ folder; "
                    f"give a folder inside it, e.g. --into imported",
                )
            ],
            headline="bad option; no test file was written",
        )
    return target


def _row_to_test(
    row: dict[str, str], evaluators: list[str], source: str, problems: list[Problem]
) -> dict | None:
    before = len(problems)
    test: dict[str, Any] = {}
    name = (row.get("name") or "").strip()
    if not name:
        problems.append(Problem(source, "name", "is empty; every test needs a unique name"))
    test["name"] = name
    history = _json_cell(
        row.get("conversation_history") or "", source, "conversation_history", problems
    )
    if history is not None:
        if not isinstance(history, list):
            problems.append(
                Problem(
                    source,
                    "conversation_history",
                    "expected a JSON list of {role, content} messages",
                )
            )
        elif (
            len(history) == 1 and isinstance(history[0], dict) and history[0].get("role") == "user"
        ):
            test["prompt"] = history[0].get("content")
        else:
            test["conversation"] = history
    if "tool_calls" in row and (row["tool_calls"] or "").strip():
        calls = _json_cell(row["tool_calls"], source, "tool_calls", problems)
        if calls is not None:
            test["tool_calls"] = calls
    chosen = []
    for evaluator in evaluators:
        flag = (row.get(evaluator) or "").strip().lower()
        if flag not in _TRUE | _FALSE:
            problems.append(
                Problem(source, evaluator, f"expected true, false or blank, got {row[evaluator]!r}")
            )
            continue
        if flag in _FALSE:
            continue
        criteria = (row.get(f"{evaluator}/criteria") or "").strip()
        if not criteria:
            problems.append(
                Problem(
                    source,
                    f"{evaluator}/criteria",
                    f"evaluator {evaluator!r} is on for this row but has no criteria",
                )
            )
            continue
        chosen.append({"name": evaluator, "criteria": criteria})
    if chosen:
        test["evaluators"] = chosen
    if evaluators and not chosen and "tool_calls" not in test and len(problems) == before:
        problems.append(
            Problem(source, None, "a reply test needs at least one evaluator set to true")
        )
    return test if len(problems) == before else None


def import_csv(csv_path: Path, suite_root: Path, *, into: str = "") -> list[Path]:
    """Convert a Calibrate CSV of tests into one YAML file per row under `cases/[into]`.

    Columns: `name`, `conversation_history` (JSON list of messages), and either
    `tool_calls` (JSON list of expected calls) for tool-call tests, or one column per
    evaluator (`true`/`false`, blank means true) with its `Evaluator/criteria` column
    for reply tests.

    Returns:
        The files written, in row order.

    Raises:
        SuiteError: naming the CSV row and column of every problem, including a
            name used twice in the file or already in the suite; nothing is written.
    """
    label = csv_path.name
    target_dir = _cases_folder(suite_root, into)
    cases_dir = (suite_root / CASES_DIR).resolve()
    try:
        with csv_path.open(newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            columns = [c.strip() for c in reader.fieldnames or []]
            reader.fieldnames = columns
            rows = list(reader)
    except FileNotFoundError:
        raise SuiteError([Problem(str(csv_path), None, "file not found")]) from None
    except (UnicodeDecodeError, csv.Error) as error:
        raise SuiteError([Problem(label, None, f"cannot read the CSV: {error}")]) from None

    problems: list[Problem] = []
    for required in ("name", "conversation_history"):
        if required not in columns:
            problems.append(
                Problem(label, required, "column is missing; see the Calibrate CSV columns")
            )
    for column in columns:
        if "/" in column:
            evaluator, variable = column.split("/", 1)
            if evaluator not in columns:
                problems.append(
                    Problem(
                        label, column, f"no {evaluator!r} column turns this evaluator on or off"
                    )
                )
            elif variable not in _EVALUATOR_VARIABLES:
                problems.append(
                    Problem(
                        label,
                        column,
                        f"unsupported evaluator variable; expected one of: {', '.join(_EVALUATOR_VARIABLES)}",
                    )
                )
    if problems:
        raise SuiteError(problems)
    evaluators = [c for c in columns if c not in _FIXED_COLUMNS and "/" not in c]

    existing, _ = load_cases(suite_root)
    taken = {case.name: f"{CASES_DIR}/{case.relative_path}" for case in existing}
    planned: list[tuple[Path, dict]] = []
    planned_paths: set[Path] = set()  # a set, not a scan of `planned`: big CSVs stay linear
    for number, row in enumerate(rows, start=2):  # row 1 is the header, as a spreadsheet shows it
        source = f"{label}:row {number}"
        test = _row_to_test(row, evaluators, source, problems)
        if test is None:
            continue
        path = target_dir / f"{_slug(test['name'])}.yaml"
        relative = path.relative_to(cases_dir).as_posix()
        _, found = parse_case(test, path=path, relative_path=relative, source=source)
        problems.extend(found)
        if test["name"] in taken:
            problems.append(
                Problem(
                    source, "name", f"test {test['name']!r} already exists ({taken[test['name']]})"
                )
            )
        elif path in planned_paths or path.exists():
            problems.append(
                Problem(source, "name", f"file {relative} already exists; rename the test")
            )
        elif not found:
            taken[test["name"]] = source
            planned.append((path, test))
            planned_paths.add(path)
    if problems:
        raise SuiteError(
            problems, headline=f"{len(problems)} problem(s) in {label}; no test file was written"
        )
    target_dir.mkdir(parents=True, exist_ok=True)
    for path, test in planned:
        path.write_text(f"# imported from {label}\n" + dump_yaml(test), encoding="utf-8")
    return [path for path, _ in planned]
