"""The store decodes the JSON columns it wrote as text, by its schema, for every reader."""

from __future__ import annotations

from datetime import date

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from eval_pipeline.store import (
    StateFolder,
    decode_json,
    decode_json_rows,
    read_latest,
    write_rows,
)

DAY = date(2026, 1, 5)


def test_json_columns_read_back_as_values_and_other_text_stays_text(tmp_path):
    layout = StateFolder(tmp_path)
    write_rows(
        layout,
        "reference_results",
        [
            {
                "name": "revenue",
                "run_date": DAY,
                "sql": "SELECT 1",
                "columns": ["n"],
                "rows": [[1]],
                "row_count": 1,
            }
        ],
        run_date=DAY,
    )
    (row,) = read_latest(layout, "reference_results", run_date=DAY)
    assert isinstance(row["rows"], str)  # stored as text
    decode_json("reference_results", row)
    assert row["columns"] == ["n"] and row["rows"] == [[1]]
    assert row["sql"] == "SELECT 1"  # not a JSON column, though it is text


def test_a_renamed_column_is_decoded_under_its_query_name_and_broken_text_is_kept():
    row = {"run_tool_calls": '[{"name": "run_sql"}]', "messages": "{not json", "name": "[1]"}
    decode_json("agent_runs", row, renamed={"tool_calls": "run_tool_calls"})
    assert row == {"run_tool_calls": [{"name": "run_sql"}], "messages": "{not json", "name": "[1]"}


def _reference(index: int) -> dict:
    return {
        "name": f"t{index:05d}",
        "run_date": DAY,
        "sql": f"SELECT {index}",
        "columns": ["n"],
        "rows": [[index]],
        "row_count": 1,
    }


def test_a_partition_of_thousands_of_rows_reads_back_whole_and_in_order(tmp_path):
    layout = StateFolder(tmp_path)
    rows = [_reference(index) for index in range(5000)]

    path = write_rows(layout, "reference_results", rows, run_date=DAY)

    back = decode_json_rows(
        "reference_results", read_latest(layout, "reference_results", run_date=DAY)
    )
    assert [row["name"] for row in back] == [row["name"] for row in rows]
    assert back[4321]["rows"] == [[4321]] and back[-1]["sql"] == "SELECT 4999"
    assert pq.ParquetFile(path).num_row_groups > 1  # written a batch at a time


def test_a_row_the_store_cannot_hold_late_in_a_large_write_leaves_the_partition_as_it_was(
    tmp_path,
):
    layout = StateFolder(tmp_path)
    write_rows(layout, "reference_results", [_reference(0)], run_date=DAY)
    rows = [_reference(index) for index in range(5000)]
    rows[4500]["row_count"] = "many"  # not a number: found only in the third batch

    with pytest.raises((ValueError, pa.ArrowException)):
        write_rows(layout, "reference_results", rows, run_date=DAY)

    assert [row["name"] for row in read_latest(layout, "reference_results", run_date=DAY)] == [
        "t00000"
    ]
    folder = layout.partition_dir("reference_results", run_date=DAY)
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
