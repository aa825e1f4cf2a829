"""The day's references: each test's reference SQL run on the warehouse, with a health check."""

from collections import Counter
from collections.abc import Sequence
from datetime import date

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import SuiteAssets
from eval_pipeline.defs.conditions import references_condition
from eval_pipeline.defs.metadata import digest, table_definition, table_written, warnings_table
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import compute_references


def reference_results_asset(
    daily: dg.PartitionsDefinition,
    warehouse_keys: Sequence[dg.AssetKey],
    inputs: SuiteAssets,
    names: SuiteNames,
) -> dg.AssetsDefinition:
    """`reference_results`, per day, downstream of the dbt models `warehouse_keys`."""
    key = names.key("reference_results")

    @dg.asset(
        key=key,
        group_name=names.group(groups.EVALUATION),
        required_resource_keys={names.resource(SUITE_KEY)},
        partitions_def=daily,
        deps=[inputs.test_cases, *warehouse_keys],
        kinds={"duckdb", "sql"},
        metadata=table_definition("reference_results"),
        automation_condition=references_condition(names.key("agent_runs")),
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
        layout = suite.store()
        results = compute_references(suite.load(), day, layout=layout)
        failed = [r for r in results if r.error]
        for result in failed:
            context.log.warning(f"{result.name}: {result.error}")
        warned = [(r.name, w) for r in results for w in r.warnings]
        return dg.MaterializeResult(
            check_results=[
                dg.AssetCheckResult(
                    check_name="reference_health",
                    passed=not warned,
                    severity=dg.AssetCheckSeverity.WARN,
                    description=f"{len(warned)} warning(s) on "
                    f"{len({name for name, _ in warned})} reference(s)"
                    if warned
                    else "every reference is healthy",
                    metadata={
                        "warnings": dg.MetadataValue.md(warnings_table(warned)),
                        "by_kind": dg.MetadataValue.json(
                            dict(Counter(w["kind"] for _, w in warned))
                        ),
                    },
                )
            ],
            data_version=dg.DataVersion(digest([r.data_version for r in results])),
            metadata={
                "references": len(results),
                "by_database": dg.MetadataValue.json(dict(Counter(r.database for r in results))),
                "failed": len(failed),
                "empty_results": sum(r.row_count == 0 and not r.error for r in results),
                "rows": sum(r.row_count for r in results),
                **table_written(layout, "reference_results", len(results), run_date=day),
            },
        )

    return reference_results
