"""The store decodes the JSON columns it wrote as text, by its schema, for every reader."""

from __future__ import annotations

from datetime import date

from eval_pipeline.store import StateFolder, decode_json, read_latest, write_rows

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
