"""The viewer's pieces without a server: escaping, diff highlighting, agreement, SQL layout."""

from __future__ import annotations

# The viewer's internal pieces, each tested on its own (the face is the server and export).
from eval_pipeline.viewer._diffs import (  # the unit itself: which cells a diff marks
    diff_marks,
    map_columns,
)
from eval_pipeline.viewer._html import (  # the unit itself: escaping of every value
    Markup,
    el,
    esc,
    join,
)
from eval_pipeline.viewer._labels import (  # the unit itself: agreement of labels and grades
    agreement_rows,
)
from eval_pipeline.viewer._sql import pretty_sql  # the unit itself: SQL layout
from eval_pipeline_tests.viewer.history import HOSTILE


def test_every_value_is_escaped_unless_the_package_built_it():
    page = el("div", HOSTILE, title=HOSTILE, data_x='" onmouseover="x')
    assert "<script>" not in page and "<img" not in page
    assert 'onmouseover="x' not in page  # an attribute cannot be broken out of
    assert esc(Markup("<b>ok</b>")) == "<b>ok</b>"
    assert join("<i>", el("b", "x")) == "&lt;i&gt;<b>x</b>"


def test_ordered_diff_marks_only_the_cells_that_differ():
    diff = [
        {"_side": "actual", "_row": 1, "customer": "Globex", "revenue": 310.0},
        {"_side": "expected", "_row": 1, "customer": "Globex", "revenue": 300.0},
        {"_side": "actual", "_row": 4, "customer": "Umbrella", "revenue": 90.0},
        {"_side": "expected", "_row": 4, "customer": "Hooli", "revenue": 90},
    ]
    marks = diff_marks(diff)
    assert marks.columns == ["customer", "revenue"]
    assert marks.diff_cells == [{"revenue"}, {"revenue"}, {"customer"}, {"customer"}]
    assert marks.actual_rows == {1: {"revenue"}, 4: {"customer"}}
    assert marks.expected_rows == {1: {"revenue"}, 4: {"customer"}}


def test_unordered_diff_pairs_each_row_with_its_closest_and_marks_the_rest_whole():
    diff = [
        {"_side": "actual only", "_row": 0, "month": "2025-01", "revenue": 10},
        {"_side": "actual only", "_row": 2, "month": "2025-03", "revenue": 99},
        {"_side": "expected only", "_row": 2, "month": "2025-03", "revenue": 30},
    ]
    marks = diff_marks(diff)
    assert marks.diff_cells == [{"month", "revenue"}, {"revenue"}, {"revenue"}]
    assert marks.actual_rows == {0: {"month", "revenue"}, 2: {"revenue"}}
    # actual columns named differently (matched by values): the whole row is marked
    assert map_columns({"revenue"}, ["Revenue", "Month"]) == {"Revenue"}
    assert map_columns({"revenue"}, ["total", "month"]) == {"total", "month"}


def test_agreement_pairs_labels_with_the_grade_each_check_and_each_evaluator():
    def labelled(grade: str, label: bool, judge: bool | None) -> dict:
        checks = [
            {"kind": "data", "status": grade},
            {
                "kind": "evaluators",
                "status": "passed" if judge else "failed",
                "details": {"evaluators": [{"evaluator": "tone", "passed": judge}]},
            },
        ]
        return {
            "status": grade,
            "grade_passed": grade == "passed",
            "label_passed": label,
            "checks": checks,
        }

    rows = agreement_rows(
        [
            labelled("passed", True, True),
            labelled("failed", False, False),
            labelled("failed", True, True),
            labelled("error", True, None),  # left out: nobody decided
        ]
    )
    by_name = {r.grader: r for r in rows}
    assert [r.grader for r in rows] == ["overall", "tone", "data", "evaluators"]
    overall = by_name["overall"].result
    assert (overall.n, overall.agreements, overall.judge_fail_human_pass) == (3, 2, 1)
    tone = by_name["tone"].result
    assert (tone.n, tone.raw, tone.kappa) == (3, 1.0, 1.0)


def test_sql_is_pretty_printed_or_left_as_written():
    assert pretty_sql("select a, sum(b) from t group by a") == (
        "SELECT\n  a,\n  SUM(b)\nFROM t\nGROUP BY\n  a"
    )
    assert pretty_sql("SELEC oops FRM (") == "SELEC oops FRM ("
