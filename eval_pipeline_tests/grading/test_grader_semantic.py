"""The grader's semantic check and failure kinds: stored runs graded against a warehouse and its variants."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from eval_pipeline.agents import AgentRun, QueryRecord
from eval_pipeline.grading import Grade, Grader, GradeStatus, build_variants, run_references
from eval_pipeline.sandbox import SqlSandbox
from eval_pipeline.suite import Semantic
from eval_pipeline_tests.agents.servers import ScriptedServer, answer, repeat
from eval_pipeline_tests.grading.small_shop import build_shop
from eval_pipeline_tests.grading.stored_runs import make_case, make_run, with_judge

COUNT = "SELECT COUNT(*) AS orders FROM orders"
PAID = "SELECT COUNT(*) AS orders FROM orders WHERE status <> 'cancelled'"


@pytest.fixture(scope="module")
def shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SqlSandbox, list[SqlSandbox]]]:
    folder = tmp_path_factory.mktemp("grader-semantic")
    warehouse = build_shop(folder / "shop.duckdb")
    variants = build_variants(warehouse, folder / "variants", count=8, seed=0)
    base, sandboxes = SqlSandbox.for_file(warehouse), variants.open()
    yield base, sandboxes
    for sandbox in [base, *sandboxes]:
        sandbox.close()


def queried(base: SqlSandbox, *sqls: str, **fields) -> AgentRun:
    """A run whose agent ran these queries on the warehouse (their real results stored)."""
    records = []
    for number, sql in enumerate(sqls, start=1):
        result = base.execute(sql)
        records.append(
            QueryRecord(
                f"q{number}",
                sql,
                list(result.columns),
                list(result.column_types),
                [list(r) for r in result.rows],
                result.row_count,
            )
        )
    return make_run(queries=records, **fields)


def graded(base, variants, run, reference_sql=COUNT, *, semantic=True, **grader) -> Grade:
    case = make_case(
        "orders", sql=reference_sql, semantic=Semantic(variants=8) if semantic else None
    )
    [reference] = run_references([case], base)
    grader = Grader(extraction="last_query", variants=lambda _case: variants, **grader)
    [one] = asyncio.run(grader.grade_case(case, [run], reference))
    return one


@pytest.mark.parametrize(
    "agent_sql",
    ["SELECT 400 AS orders", "SELECT MAX(id) AS orders FROM orders"],
    ids=["literal", "max-id"],
)
def test_a_coincidental_match_passes_without_the_check_and_fails_with_it(shop, agent_sql):
    base, variants = shop
    run = queried(base, agent_sql)
    assert graded(base, variants, run, semantic=False).passed
    grade = graded(base, variants, run)
    assert grade.status is GradeStatus.FAILED
    assert "matches on the warehouse but not on variant 1" in grade.message
    assert grade.checks[0].details["semantic"]["variant"] == 1
    assert grade.failure_kind is not None  # a failed data check is classified


@pytest.mark.parametrize(
    "agent_sql",
    [
        "SELECT COUNT(status) AS orders FROM orders",
        "SELECT COUNT(o.id) AS orders FROM orders AS o",
    ],
)
def test_an_equivalent_rewrite_passes_on_every_variant(shop, agent_sql):
    base, variants = shop
    grade = graded(base, variants, queried(base, agent_sql))
    assert grade.passed, grade.message
    assert grade.checks[0].details["semantic"] == {
        "status": "passed",
        "message": "agrees on all 8 variants",
        "variant": None,
    }


def test_with_nao_extraction_the_agents_queries_and_the_extraction_query_are_rerun(shop):
    """No model call on the variants: the stored extraction query runs over the re-run results."""
    base, variants = shop
    with ScriptedServer("openai") as server:
        server.set_script(repeat(answer("```sql\nSELECT n AS orders FROM q2\n```")))
        run = queried(base, "SELECT status FROM orders LIMIT 3", "SELECT MAX(id) AS n FROM orders")

        def grade_with(model):
            case = make_case("orders", sql=COUNT, semantic=Semantic(variants=8))
            [reference] = run_references([case], base)
            grader = Grader(judge_model=model, extraction="llm", variants=lambda _c: variants)
            return grader.grade_case(case, [run], reference)

        [grade] = with_judge(server, grade_with)
        assert len(server.requests) == 1  # the extraction on the warehouse only
    assert grade.status is GradeStatus.FAILED
    assert "not on variant 1" in grade.message


def test_an_agent_that_sent_only_its_answer_gets_the_check_skipped(shop):
    base, variants = shop
    run = make_run(answer_rows=[[400]], columns=("orders",))
    grade = graded(base, variants, run)
    assert grade.passed
    semantic = grade.checks[0].details["semantic"]
    assert semantic["status"] == "skipped"
    assert "only its answer" in semantic["message"]


def test_a_failed_data_check_names_its_failure_kind(shop):
    base, variants = shop
    grade = graded(base, variants, queried(base, COUNT), reference_sql=PAID, semantic=False)
    assert grade.status is GradeStatus.FAILED
    assert grade.failure_kind == "filter"
    assert grade.to_row()["failure_kind"] == "filter"
    assert "[filter: " in grade.message
    assert graded(base, variants, queried(base, PAID), reference_sql=PAID).failure_kind is None


def test_a_server_database_skips_the_check_with_the_reason(shop, tmp_path: Path):
    base, _ = shop
    reason = "the semantic check needs a DuckDB warehouse; database crm is a server"
    case = make_case("orders", sql=COUNT, semantic=Semantic())
    [reference] = run_references([case], base)
    grader = Grader(extraction="last_query", variants=lambda _c: reason)
    [grade] = asyncio.run(
        grader.grade_case(case, [queried(base, "SELECT 400 AS orders")], reference)
    )
    assert grade.passed
    assert grade.checks[0].details["semantic"]["message"] == f"skipped: {reason}"
