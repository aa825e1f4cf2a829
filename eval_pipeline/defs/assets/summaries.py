"""A (model, day) partition's summary row, with its two asset checks: min_accuracy, no_regression."""

import warnings

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import follows_parents
from eval_pipeline.defs.metadata import check_result, model_and_day, recorded, table_definition
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.pipeline import stages


def model_summaries_asset(graph: StageGraph) -> dg.AssetsDefinition:
    """`model_summaries`, per model and day, and its checks."""
    names = graph.names
    key = graph.key("model_summaries")
    model_day = graph.partitions_def("model_summaries")
    with warnings.catch_warnings():
        # Partitioned checks are a preview in Dagster 1.13; without them a check's history
        # cannot say which model and day a result belongs to.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        summary_checks = [
            dg.AssetCheckSpec(
                "min_accuracy",
                asset=key,
                partitions_def=model_day,
                description="Accuracy (the mean of each test's pass@1, as `eval-pipeline test "
                "--min-accuracy` computes it) reaches test.min_accuracy (oxy's average / all "
                "modes); skipped when no minimum is configured.",
            ),
            dg.AssetCheckSpec(
                "no_regression",
                asset=key,
                partitions_def=model_day,
                description="No test that passed on the model's previous evaluated day fails now "
                "(with test.regression.significant_only: no significant drop, paired test).",
            ),
        ]

    # A multi-asset only so its checks are optional outputs: min_accuracy without a minimum
    # is left unexecuted (skipped), which an @asset's required check output cannot be.
    @dg.multi_asset(
        specs=[
            dg.AssetSpec(
                key,
                group_name=names.group(groups.EVALUATION),
                partitions_def=model_day,
                deps=graph.deps("model_summaries"),
                kinds={"duckdb", "python"},
                metadata=table_definition("model_summaries"),
                automation_condition=follows_parents([graph.key("grades")]),
                description="One row per model and day: pass rate (percent of runs passed), "
                "counts, tokens, cost, latency.",
            )
        ],
        check_specs=summary_checks,
        partitions_def=model_day,
        can_subset=True,
        required_resource_keys={names.resource(SUITE_KEY)},
        name=names.scoped("model_summaries"),
    )
    def model_summaries(context: dg.AssetExecutionContext):
        suite = suite_of(context, names)
        model, day = model_and_day(context)
        done = stages.model_summaries(suite.load(), model, day, suite.store())
        yield recorded(context, done, asset_key=key, with_checks=False)
        for check in done.checks:
            yield check_result(check)

    return model_summaries
