"""Properties of compare_results over generated tables: what must never change a verdict."""

from __future__ import annotations

import datetime as dt
import itertools

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from eval_pipeline.grading import compare_results

# ~11 s of generated tables in all: CI runs them; the fast lane keeps test_compare.py's examples.
pytestmark = pytest.mark.slow

RTOL, ATOL = 1e-5, 1e-8
PROPERTY = settings(max_examples=100, deadline=None)

# Small value pools on purpose: duplicate rows and near-duplicates are where bugs live.
ELEMENTS = {
    "int": st.integers(-3, 3),
    "float": st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False),
    "str": st.sampled_from(["a", "b", " c ", "été", ""]),
    "bool": st.booleans(),
    "ts": st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2030, 1, 1)),
    "nullable_float": st.none() | st.sampled_from([0.0, 0.5, 1.25, -3.0]),
}
NUMERIC = ("float", "nullable_float")


@st.composite
def tables(draw, min_rows: int = 0) -> pd.DataFrame:
    kinds = draw(st.lists(st.sampled_from(sorted(ELEMENTS)), min_size=1, max_size=5))
    rows = draw(st.integers(min_rows, 12))
    columns = {}
    for i, kind in enumerate(kinds):
        values = draw(st.lists(ELEMENTS[kind], min_size=rows, max_size=rows))
        if kind == "ts":
            columns[f"{kind}_{i}"] = pd.to_datetime(pd.Series(values, dtype="datetime64[us]"))
        elif kind == "str":
            columns[f"{kind}_{i}"] = pd.Series(values, dtype="str")
        elif kind == "nullable_float":
            columns[f"{kind}_{i}"] = pd.Series(values, dtype="float64")
        else:
            columns[f"{kind}_{i}"] = pd.Series(
                values, dtype={"int": "int64", "float": "float64", "bool": "bool"}[kind]
            )
    return pd.DataFrame(columns)


def shuffled(table: pd.DataFrame, seed: int) -> pd.DataFrame:
    return table.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def distinct(row_a: pd.DataFrame, row_b: pd.DataFrame) -> bool:
    return not compare_results(row_a.reset_index(drop=True), row_b.reset_index(drop=True)).passed


@PROPERTY
@given(tables(), st.integers(0, 2**32 - 1))
def test_row_order_never_matters_unordered(table, seed):
    assert compare_results(shuffled(table, seed), table).passed


@PROPERTY
@given(tables(), st.randoms(use_true_random=False))
def test_column_order_never_matters(table, random):
    columns = list(table.columns)
    random.shuffle(columns)
    assert compare_results(table[columns], table).passed


@PROPERTY
@given(tables(min_rows=1), st.randoms(use_true_random=False), st.integers(0, 2**32 - 1))
def test_renamed_and_shuffled_columns_match_by_values(table, random, seed):
    columns = list(table.columns)
    random.shuffle(columns)
    renamed = shuffled(table, seed)[columns]
    renamed.columns = [f"agent_col_{k}" for k in range(len(columns))]
    result = compare_results(renamed, table)
    assert result.passed, result.message
    assert "matched by values" in result.message


@PROPERTY
@given(tables(min_rows=1), st.data(), st.booleans())
def test_a_cell_changed_beyond_tolerance_fails(table, data, ordered):
    row = data.draw(st.integers(0, len(table) - 1))
    column = data.draw(st.sampled_from(list(table.columns)))
    changed = table.copy()
    kind = column.rsplit("_", 1)[0]
    if kind in ("int", *NUMERIC):
        original = changed.at[row, column]
        changed.at[row, column] = (0.0 if pd.isna(original) else original) + 1e7
    elif kind == "str":
        changed[column] = changed[column].astype(object)
        changed.at[row, column] = "never generated"
    elif kind == "bool":
        changed.at[row, column] = not changed.at[row, column]
    else:
        changed.at[row, column] = changed.at[row, column] + pd.Timedelta(days=40_000)
    result = compare_results(changed, table, ordered=ordered)
    assert not result.passed
    assert f"column {column!r} differs" in result.message
    assert len(result.diff) >= 2


@PROPERTY
@given(tables(min_rows=1), st.data(), st.booleans())
def test_a_number_changed_within_tolerance_passes(table, data, ordered):
    numeric = [c for c in table.columns if c.rsplit("_", 1)[0] in NUMERIC]
    assume(numeric)
    row = data.draw(st.integers(0, len(table) - 1))
    column = data.draw(st.sampled_from(numeric))
    value = table.at[row, column]
    assume(not pd.isna(value))
    fraction = data.draw(st.floats(-1.0, 1.0))
    changed = table.copy()
    changed.at[row, column] = value + fraction * (ATOL + RTOL * abs(value)) * 0.99
    result = compare_results(changed, table, ordered=ordered, rtol=RTOL, atol=ATOL)
    assert result.passed, result.message


@PROPERTY
@given(tables(min_rows=1), st.data())
def test_a_duplicated_row_fails(table, data):
    row = data.draw(st.integers(0, len(table) - 1))
    longer = pd.concat([table, table.iloc[[row]]], ignore_index=True)
    result = compare_results(longer, table)
    assert not result.passed
    assert result.message == f"row count differs: actual {len(table) + 1}, expected {len(table)}"


@PROPERTY
@given(tables(min_rows=2), st.data())
def test_a_row_replaced_by_a_copy_of_another_fails(table, data):
    source, target = data.draw(
        st.lists(st.integers(0, len(table) - 1), min_size=2, max_size=2, unique=True)
    )
    assume(distinct(table.iloc[[source]], table.iloc[[target]]))
    rows = np.arange(len(table))
    rows[target] = source
    assert not compare_results(table.iloc[rows].reset_index(drop=True), table).passed


@PROPERTY
@given(tables(min_rows=2), st.data())
def test_ordered_mode_detects_a_swapped_pair(table, data):
    first, second = data.draw(
        st.lists(st.integers(0, len(table) - 1), min_size=2, max_size=2, unique=True)
    )
    assume(distinct(table.iloc[[first]], table.iloc[[second]]))
    order = np.arange(len(table))
    order[[first, second]] = order[[second, first]]
    swapped = table.iloc[order].reset_index(drop=True)
    result = compare_results(swapped, table, ordered=True)
    assert not result.passed
    assert f"differs at row {min(first, second)}" in result.message
    assert compare_results(swapped, table).passed


@PROPERTY
@given(st.lists(st.floats(-1e9, 1e9, allow_nan=False), min_size=1, max_size=10))
def test_numbers_written_as_money_strings_equal_the_numbers(values):
    money = [f"${v:,.2f}" if v >= 0 else f"-${-v:,.2f}" for v in values]
    assert compare_results(pd.DataFrame({"x": money}), pd.DataFrame({"x": values})).passed


def _close(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The documented number rule, written out: close after rounding, or before it."""
    ra, rb = np.round(a, 2), np.round(b, 2)
    after = np.abs(ra - rb) <= ATOL + RTOL * np.abs(rb)
    return after | (np.abs(a - b) <= ATOL + RTOL * np.abs(b))


@st.composite
def noisy_number_tables(draw) -> tuple[np.ndarray, np.ndarray]:
    """Close values, noise up to 3x the tolerance, rows shuffled: rows pair up several ways."""
    rows, cols = draw(st.integers(1, 5)), draw(st.integers(1, 3))
    pool = st.sampled_from([1e6, 1e6 + 5, 1e6 + 12, 2.0, 2.004, 2.006])
    expected = np.array(
        draw(st.lists(st.lists(pool, min_size=cols, max_size=cols), min_size=rows, max_size=rows))
    )
    noise = np.array(draw(st.lists(st.floats(-3, 3), min_size=rows * cols, max_size=rows * cols)))
    actual = expected + (ATOL + RTOL * np.abs(expected)) * noise.reshape(rows, cols)
    return actual[list(draw(st.permutations(range(rows))))], expected


@PROPERTY
@given(noisy_number_tables())
def test_unordered_verdict_agrees_with_a_brute_force_matching(tables_):
    actual, expected = tables_
    rows = range(len(expected))
    oracle = any(
        all(_close(actual[p[i]], expected[i]).all() for i in rows)
        for p in itertools.permutations(rows)
    )
    names = [f"c{j}" for j in range(expected.shape[1])]
    result = compare_results(
        pd.DataFrame(actual, columns=names), pd.DataFrame(expected, columns=names)
    )
    assert result.passed is oracle


@PROPERTY
@given(st.floats(-1e6, 1e6, allow_nan=False), st.integers(0, 3))
def test_a_figure_as_displayed_equals_the_number_it_displays(value, decimals):
    shown = f"{value:.{decimals}f}"  # how a report or an agent's SQL ROUND would show it
    actual, expected = pd.DataFrame({"x": [shown]}), pd.DataFrame({"x": [value]})
    assert compare_results(actual, expected, decimals=decimals).passed
