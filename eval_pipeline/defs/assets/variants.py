"""The warehouse variants of the semantic check, built once per warehouse data version and reused."""

from collections.abc import Sequence

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.conditions import cache_condition
from eval_pipeline.defs.metadata import recorded
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import stages


def build_variants_asset(
    warehouse_keys: Sequence[dg.AssetKey], inputs: SuiteAssets, names: SuiteNames
) -> dg.AssetsDefinition:
    """`warehouse_variants`, downstream of the warehouse's dbt models (`warehouse_keys`)."""

    @dg.asset(
        key=names.key("warehouse_variants"),
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        deps=[inputs.test_cases, *warehouse_keys],
        kinds={"duckdb"},
        automation_condition=cache_condition(),
        description="Perturbed copies of each DuckDB warehouse that tests with `semantic:` "
        "re-run their reference and the agent's SQL on (Zhong et al. 2020). Keyed by the "
        "warehouse's data version and the seed: an unchanged warehouse reuses them.",
    )
    def warehouse_variants(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        done = suite.replayed("warehouse_variants") or stages.warehouse_variants(
            suite.load(), suite.store()
        )
        return recorded(context, done)

    return warehouse_variants
