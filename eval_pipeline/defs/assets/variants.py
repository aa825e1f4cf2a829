"""The warehouse variants of the semantic check, built once per warehouse data version and reused."""

from collections.abc import Sequence

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import cache_condition
from eval_pipeline.defs.metadata import recorded
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.pipeline import stages


def build_variants_asset(
    graph: StageGraph, warehouse_keys: Sequence[dg.AssetKey]
) -> dg.AssetsDefinition:
    """`warehouse_variants`, downstream of the warehouse's dbt models (`warehouse_keys`)."""
    names = graph.names

    @dg.asset(
        key=graph.key("warehouse_variants"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=graph.partitions_def("warehouse_variants"),
        deps=graph.deps("warehouse_variants", *warehouse_keys),
        kinds={"duckdb"},
        automation_condition=cache_condition(),
        description="Perturbed copies of each DuckDB warehouse that tests with `semantic:` "
        "re-run their reference and the agent's SQL on (Zhong et al. 2020). Keyed by the "
        "warehouse's data version and the seed: an unchanged warehouse reuses them.",
    )
    def warehouse_variants(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        return recorded(context, stages.warehouse_variants(suite.load(), suite.store()))

    return warehouse_variants
