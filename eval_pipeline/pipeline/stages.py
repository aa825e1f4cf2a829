"""Each asset's work as one plain function, named as the asset: what it computes and writes, and what its materialization records.

A stage function does what one asset's materialization does (read the suite, run the
references, the agent runs of a partition, grade them, ...) and returns a `Materialized`:
the data version, the metadata and the check results its materialization records, as plain
values. The assets in `defs` call these and hand the result to Dagster as it is, so the
work and its description live here, without Dagster, and what a materialization says is
decided in one place.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any, Literal

from eval_pipeline.agents import answerer_identity
from eval_pipeline.grading import PROMPTS_VERSION, Grade, GradeStatus, GradingRules
from eval_pipeline.pipeline._budget_outcome import BudgetOutcome
from eval_pipeline.pipeline._budget_store import forget_budget, stored_budget
from eval_pipeline.pipeline._cases import snapshot_cases
from eval_pipeline.pipeline._gates import check_partition
from eval_pipeline.pipeline._grades import grade_runs
from eval_pipeline.pipeline._references import compute_references
from eval_pipeline.pipeline._report import day_leaderboard, failure_kinds_markdown, write_report
from eval_pipeline.pipeline._rerun_causes import regrade_causes
from eval_pipeline.pipeline._runs import run_agents
from eval_pipeline.pipeline._summaries import summarize_partition
from eval_pipeline.pipeline._variants import build_suite_variants
from eval_pipeline.store import (
    StateFolder,
    decode_json_rows,
    one_connection,
    publish_results,
    read_latest,
)
from eval_pipeline.suite import AgentContext, Case, Suite, SuiteConfig, redact

#: Rows of a failures or warnings table; the rest are counted.
FAILURES_SHOWN = 50

#: How a metadata value is shown: as it is (a number, a text, a bool), or as one of these.
ValueKind = Literal["float", "json", "md", "path", "url"]


@dataclass(frozen=True)
class Value:
    """A metadata value the UI shows in a kind of its own (a Markdown table, a JSON
    document, a path, a link, a float kept a float)."""

    kind: ValueKind
    value: Any


def markdown(text: str) -> Value:
    return Value("md", text)


def as_json(value: Any) -> Value:
    return Value("json", value)


def as_float(value: float) -> Value:
    return Value("float", value)


def as_path(path: Path | str) -> Value:
    return Value("path", str(path))


#: A metadata entry: a plain number, text, bool or None, or a `Value`.
Metadata = dict[str, Any]


@dataclass(frozen=True)
class CheckOutcome:
    """One asset check's result; `warn`: a failure is a warning, not an error."""

    name: str
    passed: bool
    description: str
    metadata: Metadata = field(default_factory=dict)
    warn: bool = False


@dataclass(frozen=True)
class Materialized:
    """What a stage's materialization records: its data version (None: Dagster's own),
    its metadata, its checks' results, and the lines its step logs (level, text)."""

    metadata: Metadata
    data_version: str | None = None
    checks: tuple[CheckOutcome, ...] = ()
    log: tuple[tuple[Literal["info", "warning"], str], ...] = ()


def percent(fraction: float) -> float:
    """A fraction as the percentage the CLI prints (76.0, not 0.7596899224806203)."""
    return round(100 * fraction, 1)


def digest(parts: Sequence[str]) -> str:
    """A short, order-free digest of some parts: an asset's data version."""
    return hashlib.sha256("\n".join(sorted(parts)).encode()).hexdigest()[:16]


def md_escape(text: str) -> str:
    # Redacted before the cut: the Dagster run database keeps this metadata.
    return redact(text).replace("|", "\\|").replace("\n", " ")[:300]


def failures_table(grades: list[Grade]) -> str:
    """The failing runs as a Markdown table, the first `FAILURES_SHOWN`."""
    failing = [g for g in grades if not g.passed]
    if not failing:
        return "Every run passed."
    lines = ["| test | attempt | status | message |", "|---|---|---|---|"]
    for grade in failing[:FAILURES_SHOWN]:
        lines.append(
            f"| {grade.name} | {grade.attempt} | {grade.status.value} | {md_escape(grade.message)} |"
        )
    if len(failing) > FAILURES_SHOWN:
        lines.append(f"| … | | | {len(failing) - FAILURES_SHOWN} more |")
    return "\n".join(lines)


def warnings_table(warned: list[tuple[str, dict[str, str]]]) -> str:
    """Reference warnings as a Markdown table, the first `FAILURES_SHOWN`."""
    if not warned:
        return "No warnings."
    lines = ["| test | kind | warning |", "|---|---|---|"]
    for name, warning in warned[:FAILURES_SHOWN]:
        lines.append(f"| {name} | {warning['kind']} | {md_escape(warning['message'])} |")
    if len(warned) > FAILURES_SHOWN:
        lines.append(f"| … | | {len(warned) - FAILURES_SHOWN} more |")
    return "\n".join(lines)


def table_written(
    layout: StateFolder,
    table: str,
    rows: int,
    *,
    model: str | None = None,
    run_date: date | None = None,
) -> Metadata:
    """Where the partition a stage wrote lives, and its rows (Dagster's standard keys)."""
    return {
        "dagster/uri": Value("url", layout.partition_uri(table, model=model, run_date=run_date)),
        "dagster/row_count": rows,
    }


def budget_metadata(budget: BudgetOutcome | None, *, model: str | None = None) -> Metadata:
    """An attempt budget's part (`--budget`): the budget, what it spent, the attempts each
    test got and why (one model's, with `model`) and what it decided. Empty without one."""
    if budget is None:
        return {}
    attempts = [entry for entry in budget.attempts if model is None or entry[0] == model]
    rows = [
        f"| {md_escape(m)} | {md_escape(test)} | {n} | {md_escape(reason or 'first round')} |"
        for m, test, n, reason in attempts
    ]
    table = "\n".join(["| model | test | attempts | why |", "|---|---|---|---|", *rows])
    return {
        "budget": as_json(
            {"runs": budget.budget.runs, "usd": budget.budget.usd, "question": budget.question.kind}
        ),
        "budget_spent_runs": sum(entry[2] for entry in attempts),
        "budget_attempts": markdown(table),
        "budget_decision": markdown(
            "\n".join(f"- {md_escape(line)}" for line in budget.sentences())
        ),
    }


# -- what the user writes ------------------------------------------------------------------


def suite_hashes(suite: Suite) -> dict[str, str]:
    return {case.name: case.content_hash for case in suite.cases}


def context_hashes(loaded: AgentContext) -> dict[str, str]:
    return {f.label: hashlib.sha256(f.text.encode()).hexdigest()[:16] for f in loaded.all_files}


def _cases_table(cases: list[Case]) -> str:
    lines = ["| test | file | checks | tags | difficulty |", "|---|---|---|---|---|"]
    for case in cases:
        checks = ", ".join(case.kinds) or "**no verification**"
        tags = ", ".join(case.tags)
        lines.append(
            f"| {case.name} | {case.relative_path} | {checks} | {tags} | {case.difficulty or ''} |"
        )
    return "\n".join(lines)


def test_cases(suite: Suite, layout: StateFolder) -> Materialized:
    """`test_cases`: the suite's tests snapshot into the store; `case_hashes` holds each
    test's content hash (what changed since the asset's previous materialization is the
    orchestrator's to say: it holds that one)."""
    snapshot_cases(suite, layout)
    cases = list(suite.cases)
    kinds = Counter(kind for case in cases for kind in case.kinds)
    unverified = [case.name for case in cases if not case.kinds]
    return Materialized(
        data_version=suite.hash,
        metadata={
            "cases": len(cases),
            **{f"cases_with_{kind}": count for kind, count in sorted(kinds.items())},
            "without_verification": len(unverified),
            "suite_hash": suite.hash,
            "suite": as_path(suite.root),
            "cases_table": markdown(_cases_table(cases)),
            "case_hashes": as_json(suite_hashes(suite)),
            **table_written(layout, "test_cases", len(cases)),
        },
        log=(("info", f"{len(cases)} test cases loaded from {suite.cases_dir}"),),
    )


def agent_context(loaded: AgentContext) -> Materialized:
    """`agent_context`: what the built-in agent is told; `file_hashes` holds each file's
    hash."""
    rows = ["| file | kind | characters |", "|---|---|---|"]
    rows += [f"| {f.label} | context | {len(f.text):,} |" for f in loaded.files]
    rows += [f"| {f.label} | dbt docs | {len(f.text):,} |" for f in loaded.dbt_docs]
    rows += [f"| {f.label} | synced docs | {len(f.text):,} |" for f in loaded.synced_docs]
    return Materialized(
        data_version=loaded.hash,
        metadata={
            "context_hash": loaded.hash,
            "context_files": len(loaded.files),
            "dbt_doc_files": len(loaded.dbt_docs),
            "synced_doc_files": len(loaded.synced_docs),
            "files": markdown("\n".join(rows)),
            "file_hashes": as_json(context_hashes(loaded)),
        },
        log=(("info", f"agent context hash {loaded.hash}"),),
    )


def grading_rules(config: SuiteConfig) -> Materialized:
    """`grading_rules`: how runs are graded besides each test; `rule_digests` holds a
    digest of each rule."""
    rules = GradingRules.of(config)
    parts = {name: digest for name, digest in rules.parts().items() if name != "grading code"}
    described = rules.describe()
    return Materialized(
        data_version=rules.settings_version,
        metadata={
            "tolerance": as_json(described["tolerance"]),
            "extraction": rules.extraction,
            "judge_model": rules.judge or "(none)",
            "prompt_version": PROMPTS_VERSION,
            "rule_digests": as_json(parts),
        },
        log=(("info", f"grading rules: {described}"),),
    )


# -- the day's inputs ----------------------------------------------------------------------


def reference_results(suite: Suite, day: date, layout: StateFolder) -> Materialized:
    """`reference_results` of a day, with its `reference_health` check."""
    results = compute_references(suite, day, layout=layout)
    failed = [r for r in results if r.error]
    warned = [(r.name, w) for r in results for w in r.warnings]
    health = CheckOutcome(
        name="reference_health",
        passed=not warned,
        warn=True,
        description=f"{len(warned)} warning(s) on {len({name for name, _ in warned})} reference(s)"
        if warned
        else "every reference is healthy",
        metadata={
            "warnings": markdown(warnings_table(warned)),
            "by_kind": as_json(dict(Counter(w["kind"] for _, w in warned))),
        },
    )
    return Materialized(
        data_version=digest([r.data_version for r in results]),
        metadata={
            "references": len(results),
            "by_database": as_json(dict(Counter(r.database for r in results))),
            "failed": len(failed),
            "empty_results": sum(r.row_count == 0 and not r.error for r in results),
            "rows": sum(r.row_count for r in results),
            **table_written(layout, "reference_results", len(results), run_date=day),
        },
        checks=(health,),
        log=tuple(("warning", f"{r.name}: {r.error}") for r in failed),
    )


def warehouse_variants(suite: Suite, layout: StateFolder) -> Materialized:
    """`warehouse_variants`: the perturbed warehouses of semantic checks, built or reused."""
    started = time.monotonic()
    found = build_suite_variants(suite, layout)
    ready = [f for f in found if not isinstance(f, str)]
    unavailable = [f for f in found if isinstance(f, str)]
    versions = sorted(f"{f.database}:{f.seed}:{f.data_version}" for f in ready)
    return Materialized(
        data_version=hashlib.sha256("\n".join(versions).encode()).hexdigest()[:16],
        metadata={
            "variant_sets": len(ready),
            "built": sum(f.built for f in ready),
            "reused": sum(not f.built for f in ready),
            "variants": sum(len(f.variants.paths) for f in ready),
            "unavailable": as_json(unavailable),
            "seconds": as_float(round(time.monotonic() - started, 2)),
        },
        log=tuple(("warning", f"no variants: {reason}") for reason in unavailable),
    )


# -- a (model, day) partition --------------------------------------------------------------


def _stored_grades(layout: StateFolder, model: str, day: date) -> list[dict[str, Any]]:
    """The partition's grades as the store holds them, their JSON decoded."""
    return decode_json_rows("grades", read_latest(layout, "grades", model=model, run_date=day))


@dataclass(frozen=True)
class RunOptions:
    """How a partition's runs are made (the `agent_runs` asset's run config)."""

    select: Sequence[str] = ()
    no_cache: bool = False
    recording: bool = False
    k: int | None = None
    attempts: Mapping[str, int] = field(default_factory=dict)
    threads: int | None = None
    budget_round: int = 0


def agent_runs(
    suite: Suite,
    model: str,
    day: date,
    layout: StateFolder,
    context: AgentContext,
    options: RunOptions,
) -> Materialized:
    """`agent_runs` of a partition: what changed runs, the rest is reused."""
    if not options.budget_round:
        forget_budget(layout, day)
    outcome = asyncio.run(
        run_agents(
            suite,
            model,
            day,
            layout=layout,
            context=context,
            select=list(options.select) or None,
            no_cache=options.no_cache,
            recording=options.recording,
            k=options.k,
            attempts=dict(options.attempts),
            threads=options.threads,
        )
    )
    executed = outcome.executed
    costs = [r.cost_usd for r in executed if r.cost_usd is not None]
    return Materialized(
        data_version=digest([f"{r.key}:{r.status.value}" for r in outcome.runs]),
        metadata={
            "runs": len(outcome.runs),
            "executed": len(executed),
            "reused": outcome.reused,
            "carried_over": outcome.carried,
            # Why runs the partition held were made again (`RerunCauses`): cause → runs.
            "reruns": as_json(outcome.reruns),
            "errors": outcome.errors,
            "tokens_executed": sum(r.usage.total_tokens for r in executed),
            "cost_usd_executed": as_float(sum(costs)) if costs else None,
            "model": model,
            "answerer": answerer_identity(suite.config, model),
            "rate_limits": as_json(list(outcome.paced)),
            **table_written(layout, "agent_runs", len(outcome.runs), model=model, run_date=day),
        },
        log=(
            (
                "info",
                f"{len(executed)} run(s) executed, {outcome.reused} reused, {outcome.carried} "
                f"kept from unselected tests, {outcome.errors} error(s)",
            ),
            *(("warning", line) for line in outcome.paced),
        ),
    )


def grades(
    suite: Suite,
    model: str,
    day: date,
    layout: StateFolder,
    context: AgentContext,
    *,
    rejudge: bool = False,
    rejudge_samples: int = 1,
) -> Materialized:
    """`grades` of a partition: every stored run graded, never the agent called."""
    paced: list[str] = []
    before = _stored_grades(layout, model, day)
    graded = asyncio.run(
        grade_runs(
            suite,
            model,
            day,
            layout=layout,
            context=context,
            rejudge=rejudge,
            rejudge_samples=rejudge_samples,
            on_paced=paced.append,
        )
    )
    passed = sum(g.passed for g in graded)
    regraded = regrade_causes(
        before, _stored_grades(layout, model, day), suite, rejudge=rejudge or rejudge_samples > 1
    )
    return Materialized(
        data_version=digest([f"{g.name}:{g.attempt}:{g.status.value}" for g in graded]),
        metadata={
            "pass_rate": as_float(percent(passed / len(graded) if graded else 0.0)),
            "passed": passed,
            "failed": sum(g.status is GradeStatus.FAILED for g in graded),
            "errors": sum(g.status is GradeStatus.ERROR for g in graded),
            "unverified": sum(not g.verified for g in graded),
            "failures": markdown(failures_table(graded)),
            "rate_limits": as_json(paced),
            # Why stored runs were graded again (`regrade_causes`): cause → [runs, moved].
            "regraded": as_json(regraded),
            **table_written(layout, "grades", len(graded), model=model, run_date=day),
        },
        log=tuple(("warning", line) for line in paced),
    )


def model_summaries(suite: Suite, model: str, day: date, layout: StateFolder) -> Materialized:
    """`model_summaries` of a partition, with its checks: `min_accuracy` (left out, so
    skipped, without a minimum) and `no_regression`."""
    result = summarize_partition(suite, model, day, layout=layout)
    settings = suite.config.test
    checks = check_partition(
        layout,
        model,
        day,
        result.cases if result else [],
        min_accuracy=settings.min_accuracy,
        mode=settings.threshold_mode,
        significant_only=settings.regression_significant_only,
        allow_errors=settings.allow_errors,
    )
    gate, diff = checks.accuracy, checks.regression
    summary = result.summary if result else None
    where = f"{model} on {day.isoformat()}"
    outcomes: list[CheckOutcome] = []
    log: list[tuple[Literal["info", "warning"], str]] = []
    if gate.threshold is not None:
        # Without a minimum nothing is checked: the check is left unexecuted (Dagster
        # shows it skipped), never a green pass.
        runs = f"{summary.passed}/{summary.total} runs passed" if summary else "no runs"
        outcomes.append(
            CheckOutcome(
                name="min_accuracy",
                passed=gate.passed,
                description=f"{where}: {gate.message} ({runs})",
                metadata={
                    "accuracy": f"{gate.accuracy:.1%}",
                    "minimum": f"{gate.threshold:.1%}",
                    "mode": gate.mode,
                    "runs_passed": f"{summary.pass_rate:.1%}" if summary else "",
                    # Error runs fail the check, as they make `eval-pipeline test` exit 3,
                    # unless test.allow_errors counts them as not passed.
                    "errors": gate.errors,
                    "allow_errors": gate.allow_errors,
                },
            )
        )
    else:
        log.append(("info", "min_accuracy skipped: test.min_accuracy is not configured"))
    outcomes.append(
        CheckOutcome(
            name="no_regression",
            passed=checks.regression_passed,
            description=f"{where}: {checks.regression_message}",
            metadata={
                "previous_day": diff.base.isoformat() if diff.base else "none",
                "regressed": as_json(diff.regressed),
                "improved": as_json(diff.improved),
                "paired_test": diff.paired_line,
            },
        )
    )
    return Materialized(
        metadata={
            "pass_rate": as_float(percent(summary.pass_rate) if summary else 0.0),
            "passed": summary.passed if summary else 0,
            "total": summary.total if summary else 0,
            "errors": summary.errors if summary else 0,
            "tokens": summary.tokens if summary else 0,
            "cost_usd": as_float(summary.cost_usd)
            if summary and summary.cost_usd is not None
            else None,
            "latency_p50_ms": as_float(summary.duration_p50_ms or 0.0) if summary else None,
            "flaky_tests": sum(c.flaky for c in result.cases) if result else 0,
            "pass_rate_ci95": as_json([percent(v) for v in result.interval]) if result else None,
            **table_written(
                layout, "model_summaries", 1 if result else 0, model=model, run_date=day
            ),
            **budget_metadata(stored_budget(layout, day), model=model),
        },
        checks=tuple(outcomes),
        log=tuple(log),
    )


# -- the day -------------------------------------------------------------------------------


def leaderboard(layout: StateFolder, day: date) -> Materialized:
    """`leaderboard` of a day: the models ranked, each pair compared (stored)."""
    with one_connection(layout):
        board = day_leaderboard(layout, day, store_comparisons=True)
        kinds = failure_kinds_markdown(layout, day)
    return Materialized(
        metadata={
            "leaderboard": markdown(board.markdown()),
            "ranking": as_json(board.models),
            "ties_not_significant": as_json(board.ties),
            "detectable_difference": board.detectable or "only one model: nothing compared",
            "failure_kinds": markdown(kinds),
        }
    )


def report(layout: StateFolder, day: date) -> Materialized:
    """`report` of a day, and results.duckdb published with every result so far."""
    # The evaluation's last step: results.duckdb now holds its results for other clients.
    # Both only read the store, and mostly in DuckDB: the report is written meanwhile.
    with ThreadPoolExecutor(1, thread_name_prefix="publish") as pool:
        publishing = pool.submit(publish_results, layout)
        with one_connection(layout):
            path, text = write_report(layout, day)
            budget = stored_budget(layout, day)
        published = publishing.result()
    return Materialized(
        metadata={
            "path": as_path(path),
            "report": markdown(text),
            "results_database": as_path(layout.database),
            "results_database_rebuilt": published,
            **budget_metadata(budget),
        }
    )


def model_work(
    suite: Callable[[], Suite],
    model: str,
    day: date,
    layout: StateFolder,
    context: AgentContext,
    *,
    options: RunOptions | None = None,
    rejudge: bool = False,
    rejudge_samples: int = 1,
) -> dict[str, Callable[[], Materialized]]:
    """The work of each stage of a (model, day) partition, by asset, run when called:
    `suite` gives the suite as the stage reads it. Without `options`, the runs are left out
    (a caller that has them)."""
    work: dict[str, Callable[[], Materialized]] = {
        "grades": lambda: grades(
            suite(),
            model,
            day,
            layout,
            context,
            rejudge=rejudge,
            rejudge_samples=rejudge_samples,
        ),
        "model_summaries": lambda: model_summaries(suite(), model, day, layout),
    }
    if options is not None:
        work["agent_runs"] = lambda: agent_runs(suite(), model, day, layout, context, options)
    return work


def report_work(layout: StateFolder, day: date) -> dict[str, Callable[[], Materialized]]:
    """The work of each stage of a day's report, by asset, run when called."""
    return {
        "leaderboard": lambda: leaderboard(layout, day),
        "report": lambda: report(layout, day),
    }


def _plain(metadata: Metadata) -> dict[str, Any]:
    return {
        key: {"kind": value.kind, "value": value.value} if isinstance(value, Value) else value
        for key, value in metadata.items()
    }


def _typed(plain: Mapping[str, Any]) -> Metadata:
    # Plain metadata never holds a mapping (a document is a `Value` of kind json).
    return {
        key: Value(value["kind"], value["value"]) if isinstance(value, dict) else value
        for key, value in plain.items()
    }


def to_document(materialized: Materialized) -> dict[str, Any]:
    """The materialization as a JSON document (`from_document` reads it back)."""
    return {
        "data_version": materialized.data_version,
        "metadata": _plain(materialized.metadata),
        "checks": [
            {
                "name": check.name,
                "passed": check.passed,
                "description": check.description,
                "metadata": _plain(check.metadata),
                "warn": check.warn,
            }
            for check in materialized.checks
        ],
        "log": [list(line) for line in materialized.log],
    }


def from_document(document: Mapping[str, Any]) -> Materialized:
    return Materialized(
        data_version=document["data_version"],
        metadata=_typed(document["metadata"]),
        checks=tuple(
            CheckOutcome(
                name=check["name"],
                passed=check["passed"],
                description=check["description"],
                metadata=_typed(check["metadata"]),
                warn=check["warn"],
            )
            for check in document["checks"]
        ),
        log=tuple((level, line) for level, line in document["log"]),
    )
