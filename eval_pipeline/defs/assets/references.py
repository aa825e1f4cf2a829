"""The day's references: each test's reference SQL run on the warehouse, with a health check."""

from collections.abc import Sequence
from datetime import date

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import references_condition
from eval_pipeline.defs.metadata import recorded, table_definition
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.pipeline import stages


def reference_results_asset(
    graph: StageGraph, warehouse_keys: Sequence[dg.AssetKey]
) -> dg.AssetsDefinition:
    """`reference_results`, per day, downstream of the dbt models `warehouse_keys`."""
    names = graph.names
    key = graph.key("reference_results")

    @dg.asset(
        key=key,
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=graph.partitions_def("reference_results"),
        deps=graph.deps("reference_results", *warehouse_keys),
        kinds={"duckdb", "sql"},
        metadata=table_definition("reference_results"),
        automation_condition=references_condition(graph.key("agent_runs")),
        description="Each test's reference SQL run on the warehouse, kept per day.",
        check_specs=[
            dg.AssetCheckSpec(
                "reference_health",
                asset=key,
                description="No reference returns no rows (unless tagged empty-answer), cuts "
                "ties with LIMIT, disagrees with itself, reads the current date or drifted "
                "since the previous day while its SQL did not.",
            )
        ],
    )
    def reference_results(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        day = date.fromisoformat(context.partition_key)
        return recorded(context, stages.reference_results(suite.load(), day, suite.store()))

    return reference_results
