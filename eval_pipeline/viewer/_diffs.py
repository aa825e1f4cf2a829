"""Which cells of a failed data comparison differ, for highlighting in Actual / Expected / Diff."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

ACTUAL_SIDES = ("actual", "actual only")
EXPECTED_SIDES = ("expected", "expected only")
MAX_PAIRINGS = 40_000  # actual × expected rows weighed for the closest pairing


@dataclass
class DiffMarks:
    """Cells to highlight. Columns are the diff's (the expected names); `actual_rows` and
    `expected_rows` map a row index of the actual / expected data to its differing columns."""

    columns: list[str] = field(default_factory=list)
    diff_cells: list[set[str]] = field(default_factory=list)
    actual_rows: dict[int, set[str]] = field(default_factory=dict)
    expected_rows: dict[int, set[str]] = field(default_factory=dict)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_value(a: Any, b: Any) -> bool:
    """Loose equality for display: numbers by value, everything else by its text."""
    if _is_number(a) and _is_number(b):
        fa, fb = float(a), float(b)
        if math.isnan(fa) and math.isnan(fb):
            return True
        return math.isclose(fa, fb, rel_tol=1e-9, abs_tol=1e-12)
    return a == b if type(a) is type(b) else str(a) == str(b)


def _differing(columns: list[str], a: dict[str, Any], b: dict[str, Any]) -> set[str]:
    return {c for c in columns if not same_value(a.get(c), b.get(c))}


def diff_marks(diff: list[dict[str, Any]] | None) -> DiffMarks:
    """Pair each actual row of the diff with an expected row (the same `_row` when the
    comparison was ordered, else the closest one) and mark the cells that differ; a row
    with no partner is marked whole."""
    rows = diff or []
    if not rows:
        return DiffMarks()
    columns = [c for c in rows[0] if c not in ("_side", "_row")]
    actual = [i for i, r in enumerate(rows) if r.get("_side") in ACTUAL_SIDES]
    expected = [i for i, r in enumerate(rows) if r.get("_side") in EXPECTED_SIDES]
    ordered = any(rows[i].get("_side") == "actual" for i in actual) or any(
        rows[i].get("_side") == "expected" for i in expected
    )
    if ordered:
        candidates = [
            (0, i, j)
            for i in actual
            for j in expected
            if rows[i].get("_row") == rows[j].get("_row")
        ]
    elif len(actual) * len(expected) > MAX_PAIRINGS:  # too many to weigh: pair in order
        candidates = [(0, i, j) for i, j in zip(actual, expected, strict=False)]
    else:  # the closest pairs first, so one far row does not take another's partner
        candidates = sorted(
            (len(_differing(columns, rows[i], rows[j])), i, j) for i in actual for j in expected
        )
    pairs: list[tuple[int, int]] = []
    taken: set[int] = set()
    for _, i, j in candidates:
        if i not in taken and j not in taken:
            pairs.append((i, j))
            taken.update((i, j))
    marks = [set(columns) for _ in rows]
    for i, j in pairs:
        differing = _differing(columns, rows[i], rows[j]) or set(columns)
        marks[i] = marks[j] = differing
    result = DiffMarks(columns=columns, diff_cells=marks)
    for i, row in enumerate(rows):
        index = row.get("_row")
        if not isinstance(index, int):
            continue
        target = result.actual_rows if row.get("_side") in ACTUAL_SIDES else result.expected_rows
        target[index] = marks[i]
    return result


def map_columns(marked: set[str], columns: list[str]) -> set[str]:
    """Diff columns onto another table's columns by name, case-insensitively; a row whose
    differing columns have no counterpart there is marked whole."""
    lower = {c.lower(): c for c in columns}
    found = {lower[m.lower()] for m in marked if m.lower() in lower}
    return found if found and len(found) == len(marked) else set(columns)
