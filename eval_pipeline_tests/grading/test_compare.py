"""Result comparison: one small table pair per rule, as a user of compare_results sees it."""

from __future__ import annotations

import dataclasses
import datetime as dt
from decimal import Decimal

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from eval_pipeline.grading import Comparison, compare_results


def frame(**columns) -> pd.DataFrame:
    return pd.DataFrame(columns)


def obj(*values) -> pd.Series:
    return pd.Series(list(values), dtype=object)


# --- verdict shape ----------------------------------------------------------------------


def test_identical_results_match_with_an_empty_diff():
    expected = frame(region=["EU", "US"], revenue=[10.5, 20.25])
    result = compare_results(expected.copy(), expected)
    assert result.passed
    assert result.message == "match"
    assert result.diff.empty
    assert list(result.diff.columns) == ["_side", "_row", "region", "revenue"]


def test_comparison_is_frozen():
    result = compare_results(frame(a=[1]), frame(a=[1]))
    assert isinstance(result, Comparison)
    with pytest.raises(dataclasses.FrozenInstanceError):
        result.passed = False  # type: ignore[misc]


def test_inputs_must_be_dataframes():
    with pytest.raises(TypeError, match="actual must be a pandas DataFrame"):
        compare_results([1, 2], frame(a=[1, 2]))  # type: ignore[arg-type]


def test_negative_tolerance_is_refused():
    with pytest.raises(ValueError, match="tolerances"):
        compare_results(frame(a=[1]), frame(a=[1]), rtol=-1)


def test_index_is_ignored():
    actual = frame(a=[1, 2]).set_index(pd.Index([10, 20]))
    assert compare_results(actual, frame(a=[1, 2])).passed


# --- columns ----------------------------------------------------------------------------


def test_column_names_match_case_insensitively_and_stripped():
    actual = frame(**{"Region ": ["EU"], "REVENUE": [10.0]})
    assert compare_results(actual, frame(region=["EU"], revenue=[10.0])).passed


def test_extra_actual_columns_are_ignored():
    actual = frame(region=["EU", "US"], revenue=[1.0, 2.0], note=["x", "y"])
    assert compare_results(actual, frame(revenue=[2.0, 1.0], region=["US", "EU"])).passed


def test_missing_expected_column_is_named():
    result = compare_results(frame(region=["EU"]), frame(region=["EU"], revenue=[1.0]))
    assert not result.passed
    assert result.message.startswith("missing column 'revenue'")
    assert "'region'" in result.message  # lists what the actual result has


def test_columns_with_other_names_are_matched_by_values():
    actual = frame(total=[30.0, 10.0], name=["b", "a"])
    result = compare_results(actual, frame(customer=["a", "b"], revenue=[10.0, 30.0]))
    assert result.passed
    assert "actual 'total' as 'revenue'" in result.message
    assert "actual 'name' as 'customer'" in result.message


def test_value_matching_keeps_name_matches():
    actual = frame(customer=["a", "b"], sum_amount=[10.0, 30.0])
    result = compare_results(actual, frame(customer=["a", "b"], revenue=[10.0, 30.0]))
    assert result.passed
    assert result.message == "match (columns matched by values: actual 'sum_amount' as 'revenue')"


def test_with_extra_actual_columns_names_decide_so_a_look_alike_column_is_not_taken():
    # docs/grading.md "How data is compared": values match columns only when the counts are equal. Here `n_orders` holds
    # the expected figures by chance; taking it as revenue would pass a wrong answer.
    actual = frame(n_orders=[3, 2], revenue_total=[250, 95.35])
    result = compare_results(actual, frame(revenue=[3, 2]))
    assert not result.passed
    assert result.message.startswith("missing column 'revenue'")
    assert "'n_orders', 'revenue_total'" in result.message
    assert "2 actual columns for 1 expected" in result.message  # why values were not tried


def test_with_extra_actual_columns_a_named_column_is_still_compared():
    actual = frame(n_orders=[3, 2], revenue=[250, 95.35])
    result = compare_results(actual, frame(revenue=[3, 2]))
    assert not result.passed and "column 'revenue' differs" in result.message


def test_value_matching_checks_rows_together_not_columns_alone():
    # Each column has the right values, but the pairs of values are wrong.
    actual = frame(x=["a", "b"], y=[2, 1])
    result = compare_results(actual, frame(customer=["a", "b"], orders=[1, 2]))
    assert not result.passed
    assert "no assignment matches" in result.message


def test_value_matching_failure_names_the_missing_column():
    result = compare_results(frame(x=[1, 2]), frame(revenue=[5, 6]))
    assert not result.passed
    assert result.message.startswith(
        "missing column 'revenue': no actual column has that name or the same values"
    )


def test_fewer_actual_columns_fail_by_name_without_value_matching():
    result = compare_results(frame(x=[1]), frame(a=[1], b=[2]))
    assert result.message == "missing column 'a' (actual columns: 'x')"


# --- rows -------------------------------------------------------------------------------


def test_row_order_is_ignored_by_default():
    assert compare_results(frame(a=[3, 1, 2]), frame(a=[1, 2, 3])).passed


def test_rows_are_a_multiset_so_duplicates_count():
    result = compare_results(frame(a=[1, 1, 2]), frame(a=[1, 2, 2]))
    assert not result.passed
    assert result.message.startswith("column 'a' differs at expected row 2")
    assert "actual 1, expected 2" in result.message
    assert result.diff[["_side", "_row", "a"]].values.tolist() == [
        ["actual only", 1, 1],
        ["expected only", 2, 2],
    ]


def test_row_count_mismatch_is_reported_with_both_counts():
    result = compare_results(frame(a=[1, 2]), frame(a=[1, 2, 3]))
    assert not result.passed
    assert result.message == "row count differs: actual 2, expected 3"
    assert result.diff[["_side", "a"]].values.tolist() == [["expected only", 3]]


def test_ordered_comparison_compares_row_by_row():
    result = compare_results(frame(a=[2, 1]), frame(a=[1, 2]), ordered=True)
    assert not result.passed
    assert result.message == "column 'a' differs at row 0: actual 2, expected 1; 2 of 2 rows differ"
    assert result.diff[["_side", "_row", "a"]].values.tolist() == [
        ["actual", 0, 2],
        ["expected", 0, 1],
        ["actual", 1, 1],
        ["expected", 1, 2],
    ]
    assert compare_results(frame(a=[1, 2]), frame(a=[1, 2]), ordered=True).passed


def test_unordered_message_names_the_closest_row_and_the_differing_cell():
    expected = frame(region=["EU", "US", "APAC"], revenue=[10.0, 20.0, 30.0])
    actual = frame(region=["APAC", "US", "EU"], revenue=[30.0, 25.0, 10.0])
    result = compare_results(actual, expected)
    assert result.message == (
        "column 'revenue' differs at expected row 1 (closest actual row 1): actual 25.0, "
        "expected 20.0; 1 of 3 expected rows have no match in actual"
    )


# --- numbers ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("$1,234.56", 1234.56),
        ("1.234,56", 1234.56),
        (" 42 ", 42),
        ("-€1.000.000,5", -1_000_000.5),
        ("1,234", 1234),
        ("1e3", 1000),
    ],
)
def test_number_strings_are_numbers(text, number):
    assert compare_results(frame(x=[text]), frame(x=[number])).passed


def test_a_percentage_is_not_a_number():
    result = compare_results(frame(share=["12%"]), frame(share=[0.12]))
    assert not result.passed
    assert "actual '12%', expected 0.12" in result.message
    assert "(actual column holds strings, expected numbers)" in result.message
    assert not compare_results(frame(share=["12%"]), frame(share=[12])).passed
    assert compare_results(frame(share=["12%"]), frame(share=["12%"])).passed


def test_a_string_column_converts_only_when_every_value_parses():
    actual = frame(x=["1", "n/a"])
    assert compare_results(actual, frame(x=["1", "n/a"])).passed
    assert not compare_results(actual, frame(x=obj(1, "n/a"))).passed


def test_floats_are_rounded_to_decimals():
    assert compare_results(frame(x=[12.3456]), frame(x=[12.35])).passed
    assert not compare_results(frame(x=[12.3456]), frame(x=[12.34])).passed
    assert compare_results(frame(x=[12.3456]), frame(x=[12.3]), decimals=1).passed
    assert not compare_results(frame(x=[12.3456]), frame(x=[12.35]), decimals=None).passed


def test_relative_tolerance_scales_with_the_expected_value():
    assert compare_results(frame(x=[1_000_005.0]), frame(x=[1_000_000.0])).passed
    assert not compare_results(frame(x=[100.01]), frame(x=[100.0])).passed
    assert compare_results(frame(x=[100.01]), frame(x=[100.0]), atol=0.02).passed


def test_noise_across_a_rounding_boundary_does_not_fail():
    assert compare_results(frame(x=[0.125000001]), frame(x=[0.124999999])).passed


def test_ints_equal_floats_of_the_same_value():
    assert compare_results(frame(x=[1, 2]), frame(x=[1.0, 2.0])).passed
    assert compare_results(frame(x=pd.array([1, None], dtype="Int64")), frame(x=[1.0, None])).passed


def test_decimals_count_as_numbers():
    assert compare_results(frame(x=obj(Decimal("1.50"), None)), frame(x=[1.5, np.nan])).passed
    arrow_decimal = pd.Series([Decimal("2.25")], dtype=pd.ArrowDtype(pa.decimal128(10, 2)))
    assert compare_results(frame(x=arrow_decimal), frame(x=[2.25])).passed


def test_booleans_are_not_numbers():
    result = compare_results(frame(active=[True, False]), frame(active=[1, 0]))
    assert not result.passed
    assert "(actual column holds booleans, expected numbers)" in result.message
    assert compare_results(
        frame(active=obj(True, None)), frame(active=pd.array([True, None]))
    ).passed


# --- nulls ------------------------------------------------------------------------------


def test_all_kinds_of_null_equal_each_other():
    actual = frame(x=obj(None, 1.0, pd.NA), d=obj(pd.NaT, None, pd.Timestamp("2024-01-01")))
    expected = frame(x=[np.nan, 1.0, None], d=pd.to_datetime([None, None, "2024-01-01"]))
    assert compare_results(actual, expected).passed


def test_null_is_not_zero_nor_an_empty_string():
    assert not compare_results(frame(x=[None]), frame(x=[0])).passed
    assert not compare_results(frame(x=obj(None)), frame(x=[""])).passed
    assert not compare_results(frame(x=[np.nan, 1.0]), frame(x=[0.0, 1.0])).passed


# --- dates and times --------------------------------------------------------------------


def test_a_date_equals_midnight_of_that_day():
    actual = frame(day=obj(dt.date(2024, 1, 1)))
    assert compare_results(actual, frame(day=[pd.Timestamp("2024-01-01 00:00:00")])).passed
    assert not compare_results(actual, frame(day=[pd.Timestamp("2024-01-01 12:00:00")])).passed


def test_timezones_are_compared_in_utc_and_naive_means_utc():
    paris = pd.Series([pd.Timestamp("2024-01-01 01:00", tz="Europe/Paris")])
    assert compare_results(frame(t=paris), frame(t=[pd.Timestamp("2024-01-01 00:00")])).passed
    assert not compare_results(frame(t=paris), frame(t=[pd.Timestamp("2024-01-01 01:00")])).passed


def test_iso_date_strings_equal_timestamps():
    assert compare_results(frame(d=["2024-01-01"]), frame(d=pd.to_datetime(["2024-01-01"]))).passed


def test_far_future_sentinel_dates_compare():
    actual = frame(valid_to=obj(dt.date(9999, 12, 31)))
    assert compare_results(actual, frame(valid_to=obj(dt.datetime(9999, 12, 31)))).passed


# --- empty results ----------------------------------------------------------------------


def test_both_empty_with_the_expected_columns_pass():
    empty = frame(a=pd.Series([], dtype="int64"), b=pd.Series([], dtype=object))
    assert compare_results(frame(A=[], b=[], extra=[]), empty).passed


def test_both_empty_still_need_the_expected_columns():
    result = compare_results(frame(x=[]), frame(a=[]))
    assert not result.passed
    assert result.message.startswith("missing column 'a'")


def test_an_agent_that_returned_nothing_for_an_empty_answer_is_right():
    assert compare_results(pd.DataFrame(), frame(a=[], b=[])).passed


def test_nothing_returned_for_a_non_empty_answer_fails():
    result = compare_results(pd.DataFrame(), frame(a=[1, 2]))
    assert result.message == "actual result is empty; expected 2 rows"


# --- strings and mixed columns ----------------------------------------------------------


def test_strings_are_stripped_then_compared_exactly():
    assert compare_results(frame(s=["  Paris "]), frame(s=["Paris"])).passed
    assert not compare_results(frame(s=["paris"]), frame(s=["Paris"])).passed


def test_string_dtypes_compare_with_object_strings():
    actual = frame(s=pd.array(["a", None], dtype="string"))
    assert compare_results(actual, frame(s=obj("a", None))).passed


def test_mixed_object_columns_compare_value_by_value():
    assert compare_results(frame(x=obj(1, "a", None)), frame(x=obj("a", None, 1.0))).passed
    result = compare_results(frame(x=obj(1, "a")), frame(x=obj("1", "a")))
    assert not result.passed
    assert "actual 1, expected '1'" in result.message


def test_list_values_compare_by_content():
    actual = duckdb.sql("SELECT [1, 2] AS l, 'x' AS s").df()
    assert compare_results(actual, frame(l=obj([1, 2]), s=["x"])).passed
    assert not compare_results(actual, frame(l=obj([2, 1]), s=["x"])).passed


# --- tolerant matching ------------------------------------------------------------------


def test_rows_pair_up_by_a_matching_when_sorting_would_pair_them_wrongly():
    # Within tolerance (rtol * 1e6 = 10), but sorted by x the rows would pair a1-e2.
    expected = frame(x=[1_000_000.0, 1_000_005.0], y=[0.0, 100.0])
    actual = frame(x=[1_000_006.0, 1_000_001.0], y=[0.0, 100.0])
    assert compare_results(actual, expected).passed


def test_results_straight_from_duckdb_compare_with_python_values():
    actual = duckdb.sql(
        "SELECT 'EU' AS region, 1.50::DECIMAL(10, 2) AS revenue, DATE '2024-01-01' AS day, "
        "TIMESTAMPTZ '2024-01-01 01:00:00+01' AS at, true AS active"
    ).df()
    expected = frame(
        Region=["EU"],
        revenue=["$1.50"],
        day=obj(dt.date(2024, 1, 1)),
        at=[pd.Timestamp("2024-01-01")],
        active=obj(True),
    )
    assert compare_results(actual, expected).passed


def test_the_diff_is_capped_but_the_message_counts_every_row():
    result = compare_results(frame(a=range(1500)), frame(a=range(10_000, 11_500)))
    assert result.message.endswith("1500 of 1500 expected rows have no match in actual")
    assert result.diff["_side"].value_counts().to_dict() == {
        "actual only": 1000,
        "expected only": 1000,
    }


def test_value_matching_works_in_ordered_mode():
    actual = frame(x=[3, 2, 1], y=["c", "b", "a"])
    expected = frame(rank=[3, 2, 1], name=["c", "b", "a"])
    assert compare_results(actual, expected, ordered=True).passed
    assert not compare_results(actual.iloc[::-1], expected, ordered=True).passed


def test_rounding_follows_display_rounding_of_the_exact_value():
    # 0.005 is stored just above a half: "%.2f" shows it as 0.01, and so must the comparison
    # (numpy alone scales it onto the half and rounds it down to 0.00).
    assert compare_results(pd.DataFrame({"x": ["$0.01"]}), pd.DataFrame({"x": [0.005]})).passed
    # 0.015 is stored just below a half: it displays as 0.01, so 0.02 is a different figure.
    assert not compare_results(pd.DataFrame({"x": [0.02]}), pd.DataFrame({"x": [0.015]})).passed


def test_only_results_the_same_cell_for_cell_take_the_exact_shortcut():
    from eval_pipeline.grading._compare import (  # the unit itself: the shortcut, not the rules
        exact_match,
        same_cells,
    )

    assert same_cells(["n", "s"], [[1, "a"]], ["n", "s"], [[1, "a"]])
    # Python has True == 1 == 1.0; the comparison's rules do not, so neither does the shortcut.
    assert not same_cells(["n"], [[True]], ["n"], [[1]])
    assert not same_cells(["n"], [[1.0]], ["n"], [[1]])
    assert not same_cells(["n"], [[float("nan")]], ["n"], [[float("nan")]])
    assert not same_cells(["N"], [[1]], ["n"], [[1]])
    same = exact_match(frame(n=obj(1, 2)), frame(n=obj(1, 2)))
    assert same is not None and same.passed and same.message == "match" and same.diff.empty
    assert exact_match(frame(n=obj(1, 2)), frame(n=obj(2, 1))) is None
    assert compare_results(frame(n=obj(1, 2)), frame(n=obj(2, 1))).passed  # the full rules
    # Columns of one NumPy dtype compare as arrays, with the same rules: 1 is not 1.0 there,
    # and NaN or NaT is not itself.
    assert exact_match(frame(n=[1, 2], x=[0.5, 1.5]), frame(n=[1, 2], x=[0.5, 1.5])) is not None
    assert exact_match(frame(n=[1, 2]), frame(n=[1.0, 2.0])) is None
    assert exact_match(frame(x=[0.5, np.nan]), frame(x=[0.5, np.nan])) is None
    times = pd.to_datetime(["2026-01-01", None])
    assert exact_match(frame(t=times), frame(t=times)) is None
    assert compare_results(frame(x=[0.5, np.nan]), frame(x=[0.5, np.nan])).passed
    # A large result with a column of objects takes the full comparison: checking each
    # object would cost what the comparison does.
    many = frame(n=list(range(60_000)), s=[f"v{i}" for i in range(60_000)])
    assert exact_match(many, many.copy()) is None
    assert exact_match(many[["n"]], many[["n"]].copy()) is not None
    assert compare_results(many, many.sample(frac=1.0, random_state=1)).passed
