"""The online half as assets: a day's production conversations imported, their friction signals, the ranked recommendations and the tests they would make; one job and a schedule that starts stopped."""

import hashlib
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.launched import LAUNCHED_BY_TAG, SCHEDULE, UI
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, suite_of
from eval_pipeline.pipeline import current_recommendations
from eval_pipeline.store import StateFolder, read_latest
from eval_pipeline.suite import SuiteConfig
from eval_pipeline.usage import (
    SIGNAL_KINDS,
    Privacy,
    draft_test,
    import_usage,
    prompts_of,
    rank,
    refresh_signals,
    stored_conversations,
    stored_days,
    trace_files,
)

if TYPE_CHECKING:
    from eval_pipeline.defs.chain import Job

USAGE_JOB = "usage_daily"
#: Recommendations shown in an asset's metadata, and drafted as tests.
TOP = 10


@dataclass(frozen=True)
class UsageAssets:
    conversations: dg.AssetsDefinition
    signals: dg.AssetsDefinition
    recommendations: dg.AssetsDefinition
    candidates: dg.AssetsDefinition
    job: "Job"
    schedule: dg.ScheduleDefinition

    @property
    def assets(self) -> list[dg.AssetsDefinition]:
        return [self.conversations, self.signals, self.recommendations, self.candidates]


def usage_partitions(config: SuiteConfig) -> dg.DailyPartitionsDefinition:
    """A day per day of production usage, to today: from a year back (so past traces can be
    imported from the UI, a backfill), or from the first day stored when that is earlier."""
    days = stored_days(StateFolder.of(config))
    first = datetime.now(UTC).date() - timedelta(days=365)
    first = min(first, days[0]) if days else first
    return dg.DailyPartitionsDefinition(start_date=first.isoformat(), end_offset=1)


def _table(rows: list[list[object]], header: list[str]) -> dg.MetadataValue:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return dg.MetadataValue.md("\n".join(lines))


def build_usage_assets(
    names: SuiteNames, daily: dg.DailyPartitionsDefinition, test_cases: dg.AssetKey, cron: str
) -> UsageAssets:
    group = names.group(groups.USAGE)
    resources = {names.resource(SUITE_KEY)}

    @dg.asset(
        key=names.key("production_conversations"),
        group_name=group,
        partitions_def=daily,
        required_resource_keys=resources,
        kinds={"duckdb", "python"},
        description="The day's production conversations, read from the files usage.traces names "
        "in eval_config.yaml (OpenTelemetry GenAI traces or JSONL) into usage_conversations: "
        "users as pseudonyms, personal data masked; a conversation read again replaces its "
        "earlier reading.",
    )
    def production_conversations(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        config, layout = suite.config(), suite.store()
        files = trace_files(config.root, config.usage.traces)
        if not files:
            raise dg.Failure(
                description="no production traces to read: usage.traces in eval_config.yaml "
                f"names no file in {config.root} (e.g. usage: {{traces: [traces/*.jsonl]}})",
                allow_retries=False,
            )
        day = date.fromisoformat(context.partition_key)
        privacy = Privacy.of_folder(layout.root / "usage", mask_text=config.usage.mask_text)
        report = import_usage(
            files, layout, privacy, source=config.usage.source, days=[day], refresh=False
        )
        for problem in report.problems[:20]:
            context.log.warning(f"left out: {problem}")
        rows = read_latest(layout, "usage_conversations", run_date=day)
        hashes = "".join(sorted(f"{r['conversation_id']}:{r['content_hash']}" for r in rows))
        return dg.MaterializeResult(
            data_version=dg.DataVersion(hashlib.sha256(hashes.encode()).hexdigest()[:16]),
            metadata={
                "conversations": len(rows),
                "users": len({r["user_key"] for r in rows if r["user_key"]}),
                "new": report.added,
                "updated": report.updated,
                "unchanged": report.unchanged,
                "records_left_out": len(report.problems),
                "files": dg.MetadataValue.md("\n".join(f"* `{f}`" for f in files)),
            },
        )

    @dg.asset(
        key=names.key("usage_signals"),
        group_name=group,
        partitions_def=daily,
        required_resource_keys=resources,
        deps=[production_conversations, test_cases],
        kinds={"duckdb", "python"},
        description="The friction in the day's conversations (tool_error, negative_feedback, "
        "correction, no_answer, inconsistent, uncovered), found without a model; a new test "
        "asking a question makes it covered.",
    )
    def usage_signals(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        layout = suite.store()
        refresh_signals(layout, prompts_of(suite.load().cases))
        day = date.fromisoformat(context.partition_key)
        rows = read_latest(layout, "usage_signals", run_date=day)
        counts = {kind: sum(1 for r in rows if r["kind"] == kind) for kind in SIGNAL_KINDS}
        return dg.MaterializeResult(metadata={"signals": len(rows), **counts})

    @dg.asset(
        key=names.key("recommendations"),
        group_name=group,
        required_resource_keys=resources,
        deps=[dg.AssetDep(usage_signals, partition_mapping=dg.AllPartitionMapping())],
        kinds={"duckdb", "python"},
        description="What production usage says to change, best first: the last 30 days' "
        "friction clustered and ranked by impact, each naming the context file to edit, with "
        "the statuses set by `eval-pipeline recommend --ack/--dismiss/--done`.",
    )
    def recommendations(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        # usage_signals, upstream, brought the signals up to date with the tests just now.
        ranking = current_recommendations(suite.load(), suite.store(), refresh=False)
        top = [
            [i, r.id, r.kind, f"{r.score:.1f}", len(r.conversations), f"`{r.file}`", r.summary]
            for i, r in enumerate(ranking.recommendations[:TOP], start=1)
        ]
        return dg.MaterializeResult(
            metadata={
                "recommendations": len(ranking.recommendations),
                "since": str(ranking.since),
                "top": _table(
                    top, ["#", "id", "kind", "score", "conversations", "file", "summary"]
                ),
            }
        )

    @dg.asset(
        key=names.key("test_candidates"),
        group_name=group,
        required_resource_keys=resources,
        deps=[recommendations],
        kinds={"python"},
        description="A test drafted from each of the top recommendations: the question and the "
        "query of the answer the user accepted. Nothing is written under cases/: "
        "`eval-pipeline promote ID` writes one.",
    )
    def test_candidates(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        layout = suite.store()
        ranked = rank(layout, suite.path, None, write=False).recommendations[:TOP]
        conversations = {c.id: c for c in stored_conversations(layout)}
        rows = []
        for r in ranked:
            chosen = [conversations[c] for c in r.conversations if c in conversations]
            if not chosen:
                continue
            draft = draft_test(chosen, origin=f"recommendation {r.id}")
            reference = "yes" if draft.reference_from else "needs one"
            rows.append([r.id, draft.name, chosen[0].question[:80], reference])
        return dg.MaterializeResult(
            metadata={
                "candidates": len(rows),
                "drafts": _table(rows, ["recommendation", "test", "question", "reference"]),
            }
        )

    job = dg.define_asset_job(
        names.scoped(USAGE_JOB),
        selection=dg.AssetSelection.assets(
            production_conversations, usage_signals, recommendations, test_candidates
        ),
        description="Import a day's production conversations, find their friction, rank the "
        "recommendations and draft tests from them.",
        run_tags={LAUNCHED_BY_TAG: UI},
    )

    @dg.schedule(
        name=names.scoped("daily_usage"),
        cron_schedule=cron,
        job=job,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        description=f"Run {names.scoped(USAGE_JOB)} on the day before (a whole day of traces).",
    )
    def daily_usage(context: dg.ScheduleEvaluationContext):
        moment = context.scheduled_execution_time or datetime.now(UTC)
        day = (moment.date() - timedelta(days=1)).isoformat()
        return dg.RunRequest(
            run_key=f"usage-{day}", partition_key=day, tags={LAUNCHED_BY_TAG: SCHEDULE}
        )

    return UsageAssets(
        production_conversations, usage_signals, recommendations, test_candidates, job, daily_usage
    )
