"""The semantic check on the sample warehouse: the suite's references and realistic answers."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial
from pathlib import Path

import pytest

from eval_pipeline.grading import build_variants, compare_results, semantic_check
from eval_pipeline.sandbox import SqlSandbox, sql_is_ordered
from eval_pipeline.suite import load_cases
from eval_pipeline_tests.conftest import SAMPLE_SUITE_DIR

pytestmark = pytest.mark.slow

CASES = {case.name: case for case in load_cases(SAMPLE_SUITE_DIR)[0] if case.sql}


@pytest.fixture(scope="module")
def variants(sample_warehouse, tmp_path_factory) -> Iterator[list[SqlSandbox]]:
    folder: Path = tmp_path_factory.mktemp("sample_variants")
    sandboxes = build_variants(sample_warehouse.path, folder, count=8, seed=0).open()
    yield sandboxes
    for sandbox in sandboxes:
        sandbox.close()


def _check(name: str, agent_sql: str, variants: list[SqlSandbox]):
    case = CASES[name]
    tolerance = case.comparison
    compare = partial(
        compare_results,
        ordered=case.ordered if case.ordered is not None else sql_is_ordered(case.sql),
        **({"decimals": tolerance.decimals} if tolerance else {}),
    )
    return semantic_check(case.sql, agent_sql, variants, compare)


def test_every_reference_of_the_suite_agrees_with_itself_on_every_variant(variants) -> None:
    # Variants that broke a reference (an error, a result over the sandbox's caps) would make
    # the check useless for that test; none may.
    for name, case in CASES.items():
        check = _check(name, case.sql, variants)
        assert check.message == "agrees on all 8 variants", name


def test_this_year_as_year_equals_passes_like_the_date_window(variants) -> None:
    # The reference writes this year as a window ending on the data's last day; YEAR() = 2026
    # is the same question, and variants never move rows past that day.
    agent_sql = CASES["revenue_by_region_this_year"].sql.replace(
        "o.order_date BETWEEN DATE '2026-01-01' AND DATE '2026-06-30'",
        "year(o.order_date) = 2026",
    )
    assert "year(o.order_date)" in agent_sql
    assert _check("revenue_by_region_this_year", agent_sql, variants).status == "passed"


def test_the_total_read_off_the_warehouse_fails(sample_warehouse, variants) -> None:
    with SqlSandbox.for_file(sample_warehouse.path) as base:
        value = base.execute(CASES["total_revenue"].sql).rows[0][0]
    check = _check("total_revenue", f"SELECT {value} AS total_revenue", variants)
    assert check.status == "failed"
    assert check.message.startswith("matches on the warehouse but not on variant 1: ")
