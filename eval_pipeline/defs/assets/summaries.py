"""A (model, day) partition's summary row, with its two asset checks: min_accuracy, no_regression."""

import warnings

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.conditions import follows_parents
from eval_pipeline.defs.metadata import (
    budget_metadata,
    model_and_day,
    percent,
    table_definition,
    table_written,
)
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import check_partition, stored_budget, summarize_partition


def model_summaries_asset(
    model_day: dg.PartitionsDefinition, grades: dg.AssetsDefinition, names: SuiteNames
) -> dg.AssetsDefinition:
    """`model_summaries`, per model and day, and its checks."""
    key = names.key("model_summaries")
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
                deps=[grades],
                kinds={"duckdb", "python"},
                metadata=table_definition("model_summaries"),
                automation_condition=follows_parents([grades.key]),
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
        loaded, layout = suite.load(), suite.store()
        result = summarize_partition(loaded, model, day, layout=layout)
        settings = loaded.config.test
        checks = check_partition(
            layout,
            model,
            day,
            result.cases if result else [],
            min_accuracy=settings.min_accuracy,
            mode=settings.threshold_mode,
            significant_only=settings.regression_significant_only,
        )
        gate, diff = checks.accuracy, checks.regression
        summary = result.summary if result else None
        yield dg.MaterializeResult(
            asset_key=key,
            metadata={
                "pass_rate": dg.MetadataValue.float(percent(summary.pass_rate) if summary else 0.0),
                "passed": summary.passed if summary else 0,
                "total": summary.total if summary else 0,
                "errors": summary.errors if summary else 0,
                "tokens": summary.tokens if summary else 0,
                "cost_usd": dg.MetadataValue.float(summary.cost_usd)
                if summary and summary.cost_usd is not None
                else None,
                "latency_p50_ms": dg.MetadataValue.float(summary.duration_p50_ms or 0.0)
                if summary
                else None,
                "flaky_tests": sum(c.flaky for c in result.cases) if result else 0,
                "pass_rate_ci95": dg.MetadataValue.json([percent(v) for v in result.interval])
                if result
                else None,
                **table_written(
                    layout, "model_summaries", 1 if result else 0, model=model, run_date=day
                ),
                **budget_metadata(stored_budget(layout, day), model=model),
            },
        )
        where = f"{model} on {day.isoformat()}"
        if gate.threshold is not None:
            # Without a minimum nothing is checked: the check is left unexecuted (Dagster
            # shows it skipped), never a green pass.
            runs = f"{summary.passed}/{summary.total} runs passed" if summary else "no runs"
            yield dg.AssetCheckResult(
                check_name="min_accuracy",
                passed=gate.passed,
                description=f"{where}: {gate.message} ({runs})",
                metadata={
                    "accuracy": f"{gate.accuracy:.1%}",
                    "minimum": f"{gate.threshold:.1%}",
                    "mode": gate.mode,
                    "runs_passed": f"{summary.pass_rate:.1%}" if summary else "",
                },
            )
        else:
            context.log.info("min_accuracy skipped: test.min_accuracy is not configured")
        yield dg.AssetCheckResult(
            check_name="no_regression",
            passed=checks.regression_passed,
            description=f"{where}: {checks.regression_message}",
            metadata={
                "previous_day": diff.base.isoformat() if diff.base else "none",
                "regressed": dg.MetadataValue.json(diff.regressed),
                "improved": dg.MetadataValue.json(diff.improved),
                "paired_test": diff.paired_line,
            },
        )

    return model_summaries
