"""The evaluation assets: references per day; runs, grades and summaries per model and day; the day's leaderboard."""

import asyncio
import hashlib
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from datetime import date

import dagster as dg
from pydantic import Field

from eval_pipeline.agents import answerer_identity
from eval_pipeline.defs import groups
from eval_pipeline.defs.assets.suite import agent_context, grading_rules, test_cases
from eval_pipeline.defs.conditions import (
    follows_parents,
    leaderboard_condition,
    references_condition,
)
from eval_pipeline.defs.metadata import table_definition, table_written
from eval_pipeline.defs.partitions import DayPartitions
from eval_pipeline.defs.resources import SuiteResource
from eval_pipeline.grading import GRADING_CODE_VERSION, Grade, GradeStatus
from eval_pipeline.pipeline import (
    check_partition,
    compute_references,
    day_leaderboard,
    failure_kinds_markdown,
    grade_runs,
    run_agents,
    summarize_partition,
    write_report,
)
from eval_pipeline.store import publish_results
from eval_pipeline.suite import redact

with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.BetaWarning)  # stable in practice; only the name is beta
    BY_DATE = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="date")
FAILURES_SHOWN = 50


class AgentRunsConfig(dg.Config):
    """Launchpad options of a runs materialization."""

    select: list[str] = Field(default_factory=list, description="test names, file stems or folders")
    no_cache: bool = False
    record: bool = False
    k: int | None = None
    threads: int | None = None


class GradesConfig(dg.Config):
    """Launchpad options of a grades materialization."""

    rejudge: bool = Field(
        default=False,
        description="ask the judge and extraction model again instead of using cached answers",
    )
    rejudge_samples: int = Field(
        default=1,
        ge=1,
        description="judge each run with judged checks this many times, to measure the "
        "judge's self-agreement",
    )


def _partition(context: dg.AssetExecutionContext) -> tuple[str, date]:
    keys = context.partition_key.keys_by_dimension
    return keys["model"], date.fromisoformat(keys["date"])


def _percent(fraction: float) -> float:
    """A fraction as the percentage the CLI prints (76.0, not 0.7596899224806203)."""
    return round(100 * fraction, 1)


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:16]


def _md_escape(text: str) -> str:
    # Redacted before the cut: the Dagster run database keeps this metadata.
    return redact(text).replace("|", "\\|").replace("\n", " ")[:300]


def _failures_table(grades: list[Grade]) -> str:
    failing = [g for g in grades if not g.passed]
    if not failing:
        return "Every run passed."
    lines = ["| test | attempt | status | message |", "|---|---|---|---|"]
    for grade in failing[:FAILURES_SHOWN]:
        lines.append(
            f"| {grade.name} | {grade.attempt} | {grade.status.value} | {_md_escape(grade.message)} |"
        )
    if len(failing) > FAILURES_SHOWN:
        lines.append(f"| … | | | {len(failing) - FAILURES_SHOWN} more |")
    return "\n".join(lines)


def _warnings_table(warned: list[tuple[str, dict[str, str]]]) -> str:
    if not warned:
        return "No warnings."
    lines = ["| test | kind | warning |", "|---|---|---|"]
    for name, warning in warned[:FAILURES_SHOWN]:
        lines.append(f"| {name} | {warning['kind']} | {_md_escape(warning['message'])} |")
    if len(warned) > FAILURES_SHOWN:
        lines.append(f"| … | | {len(warned) - FAILURES_SHOWN} more |")
    return "\n".join(lines)


@dataclass(frozen=True)
class EvaluationAssets:
    """The evaluation assets by name, so wiring never depends on their order."""

    reference_results: dg.AssetsDefinition
    agent_runs: dg.AssetsDefinition
    grades: dg.AssetsDefinition
    model_summaries: dg.AssetsDefinition
    leaderboard: dg.AssetsDefinition
    report: dg.AssetsDefinition

    @property
    def all(self) -> list[dg.AssetsDefinition]:
        return [getattr(self, f.name) for f in fields(self)]

    @property
    def per_model_day(self) -> list[dg.AssetsDefinition]:
        """What one evaluation of a (model, day) partition materializes: runs, grades, summary."""
        return [self.agent_runs, self.grades, self.model_summaries]


def build_evaluation_assets(
    warehouse_keys: Sequence[dg.AssetKey],
    warehouse_variants: dg.AssetsDefinition,
    partitions: DayPartitions,
) -> EvaluationAssets:
    """The partitioned assets and their checks; `warehouse_keys` are the dbt models they
    query, `warehouse_variants` the variants that grades re-run semantic checks on,
    `partitions` the suite's days (from where its history starts)."""
    daily, model_day = partitions.daily, partitions.model_day
    with warnings.catch_warnings():
        # Partitioned checks are a preview in Dagster 1.13; without them a check's history
        # cannot say which model and day a result belongs to.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        summary_checks = [
            dg.AssetCheckSpec(
                "min_accuracy",
                asset="model_summaries",
                partitions_def=model_day,
                description="Accuracy (the mean of each test's pass@1, as `eval-pipeline test "
                "--min-accuracy` computes it) reaches test.min_accuracy (oxy's average / all "
                "modes); skipped when no minimum is configured.",
            ),
            dg.AssetCheckSpec(
                "no_regression",
                asset="model_summaries",
                partitions_def=model_day,
                description="No test that passed on the model's previous evaluated day fails now "
                "(with test.regression.significant_only: no significant drop, paired test).",
            ),
        ]

    @dg.asset(
        group_name=groups.EVALUATION,
        partitions_def=daily,
        deps=[test_cases, *warehouse_keys],
        kinds={"duckdb", "sql"},
        metadata=table_definition("reference_results"),
        automation_condition=references_condition("agent_runs"),
        description="Each test's reference SQL run on the warehouse, kept per day.",
        check_specs=[
            dg.AssetCheckSpec(
                "reference_health",
                asset="reference_results",
                description="No reference returns no rows (unless tagged empty-answer), cuts "
                "ties with LIMIT, disagrees with itself, reads the current date or drifted "
                "since the previous day while its SQL did not.",
            )
        ],
    )
    def reference_results(
        context: dg.AssetExecutionContext, suite: SuiteResource
    ) -> dg.MaterializeResult:
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
                        "warnings": dg.MetadataValue.md(_warnings_table(warned)),
                        "by_kind": dg.MetadataValue.json(
                            dict(Counter(w["kind"] for _, w in warned))
                        ),
                    },
                )
            ],
            data_version=dg.DataVersion(_digest([r.data_version for r in results])),
            metadata={
                "references": len(results),
                "by_database": dg.MetadataValue.json(dict(Counter(r.database for r in results))),
                "failed": len(failed),
                "empty_results": sum(r.row_count == 0 and not r.error for r in results),
                "rows": sum(r.row_count for r in results),
                **table_written(layout, "reference_results", len(results), run_date=day),
            },
        )

    @dg.asset(
        group_name=groups.EVALUATION,
        partitions_def=model_day,
        deps=[test_cases, agent_context, *warehouse_keys],
        kinds={"duckdb", "python"},
        metadata=table_definition("agent_runs"),
        description="Every agent run of the model on the day. Completed runs whose key (test, "
        "its input, model, context, attempt, day) is unchanged are reused, never re-run.",
    )
    def agent_runs(
        context: dg.AssetExecutionContext, config: AgentRunsConfig, suite: SuiteResource
    ) -> dg.MaterializeResult:
        model, day = _partition(context)
        loaded, layout = suite.load(), suite.store()
        outcome = asyncio.run(
            run_agents(
                loaded,
                model,
                day,
                layout=layout,
                context=suite.agent_context(),
                select=config.select or None,
                no_cache=config.no_cache,
                record=config.record,
                k=config.k,
                threads=config.threads,
            )
        )
        executed = outcome.executed
        context.log.info(
            f"{len(executed)} run(s) executed, {outcome.reused} reused, {outcome.carried} kept "
            f"from unselected tests, {outcome.errors} error(s)"
        )
        costs = [r.cost_usd for r in executed if r.cost_usd is not None]
        return dg.MaterializeResult(
            data_version=dg.DataVersion(
                _digest([f"{r.key}:{r.status.value}" for r in outcome.runs])
            ),
            metadata={
                "runs": len(outcome.runs),
                "executed": len(executed),
                "reused": outcome.reused,
                "carried_over": outcome.carried,
                "answerer_changed": outcome.answerer_changed,
                "errors": outcome.errors,
                "tokens_executed": sum(r.usage.total_tokens for r in executed),
                "cost_usd_executed": dg.MetadataValue.float(sum(costs)) if costs else None,
                "model": model,
                "answerer": answerer_identity(loaded.config, model),
                **table_written(layout, "agent_runs", len(outcome.runs), model=model, run_date=day),
            },
        )

    @dg.asset(
        group_name=groups.EVALUATION,
        partitions_def=model_day,
        deps=[
            agent_runs,
            dg.AssetDep(reference_results, partition_mapping=BY_DATE),
            test_cases,
            grading_rules,
            warehouse_variants,
        ],
        code_version=GRADING_CODE_VERSION,
        kinds={"duckdb", "python"},
        metadata=table_definition("grades"),
        automation_condition=follows_parents(
            ["agent_runs", "reference_results"], caches=["warehouse_variants"]
        ),
        description="The grade of every run: passed, failed (the agent was wrong) or error. "
        "Grading reads stored runs and never calls the agent under test; new grading rules "
        "(tolerance, extraction, the judge and its prompts) or grading code regrade them.",
    )
    def grades(
        context: dg.AssetExecutionContext, config: GradesConfig, suite: SuiteResource
    ) -> dg.MaterializeResult:
        model, day = _partition(context)
        layout = suite.store()
        graded = asyncio.run(
            grade_runs(
                suite.load(),
                model,
                day,
                layout=layout,
                context=suite.agent_context(),
                rejudge=config.rejudge,
                rejudge_samples=config.rejudge_samples,
            )
        )
        passed = sum(g.passed for g in graded)
        return dg.MaterializeResult(
            data_version=dg.DataVersion(
                _digest([f"{g.name}:{g.attempt}:{g.status.value}" for g in graded])
            ),
            metadata={
                "pass_rate": dg.MetadataValue.float(
                    _percent(passed / len(graded) if graded else 0.0)
                ),
                "passed": passed,
                "failed": sum(g.status is GradeStatus.FAILED for g in graded),
                "errors": sum(g.status is GradeStatus.ERROR for g in graded),
                "unverified": sum(not g.verified for g in graded),
                "failures": dg.MetadataValue.md(_failures_table(graded)),
                **table_written(layout, "grades", len(graded), model=model, run_date=day),
            },
        )

    # A multi-asset only so its checks are optional outputs: min_accuracy without a minimum
    # is left unexecuted (skipped), which an @asset's required check output cannot be.
    @dg.multi_asset(
        specs=[
            dg.AssetSpec(
                "model_summaries",
                group_name=groups.EVALUATION,
                partitions_def=model_day,
                deps=[grades],
                kinds={"duckdb", "python"},
                metadata=table_definition("model_summaries"),
                automation_condition=follows_parents(["grades"]),
                description="One row per model and day: pass rate (percent of runs passed), "
                "counts, tokens, cost, latency.",
            )
        ],
        check_specs=summary_checks,
        partitions_def=model_day,
        can_subset=True,
        name="model_summaries",
    )
    def model_summaries(context: dg.AssetExecutionContext, suite: SuiteResource):
        model, day = _partition(context)
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
            asset_key="model_summaries",
            metadata={
                "pass_rate": dg.MetadataValue.float(
                    _percent(summary.pass_rate) if summary else 0.0
                ),
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
                "pass_rate_ci95": dg.MetadataValue.json([_percent(v) for v in result.interval])
                if result
                else None,
                **table_written(
                    layout, "model_summaries", 1 if result else 0, model=model, run_date=day
                ),
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

    @dg.asset(
        group_name=groups.EVALUATION,
        partitions_def=daily,
        deps=[dg.AssetDep(model_summaries, partition_mapping=BY_DATE)],
        kinds={"duckdb"},
        automation_condition=leaderboard_condition("model_summaries"),
        description="The day's models ranked by pass rate, then cost, with 95% intervals; "
        "each pair compared by a paired test (stored in model_comparisons), neighbours the "
        "test cannot tell apart marked as ties.",
    )
    def leaderboard(
        context: dg.AssetExecutionContext, suite: SuiteResource
    ) -> dg.MaterializeResult:
        day = date.fromisoformat(context.partition_key)
        layout = suite.store()
        board = day_leaderboard(layout, day, record=True)
        return dg.MaterializeResult(
            metadata={
                "leaderboard": dg.MetadataValue.md(board.markdown()),
                "ranking": dg.MetadataValue.json(board.models),
                "ties_not_significant": dg.MetadataValue.json(board.ties),
                "detectable_difference": board.detectable or "only one model: nothing compared",
                "failure_kinds": dg.MetadataValue.md(failure_kinds_markdown(layout, day)),
            }
        )

    @dg.asset(
        group_name=groups.EVALUATION,
        partitions_def=daily,
        deps=[leaderboard],
        kinds={"markdown"},
        automation_condition=follows_parents(["leaderboard"]),
        description="The day's report: leaderboard, pass/fail grid and failures, as Markdown; "
        "then results.duckdb is published with every result so far.",
    )
    def report(context: dg.AssetExecutionContext, suite: SuiteResource) -> dg.MaterializeResult:
        day = date.fromisoformat(context.partition_key)
        layout = suite.store()
        path, text = write_report(layout, day)
        # The evaluation's last step: results.duckdb now holds its results for other clients.
        published = publish_results(layout)
        return dg.MaterializeResult(
            metadata={
                "path": dg.MetadataValue.path(str(path)),
                "report": dg.MetadataValue.md(text),
                "results_database": dg.MetadataValue.path(str(layout.database)),
                "results_database_rebuilt": published,
            }
        )

    return EvaluationAssets(
        reference_results=reference_results,
        agent_runs=agent_runs,
        grades=grades,
        model_summaries=model_summaries,
        leaderboard=leaderboard,
        report=report,
    )
