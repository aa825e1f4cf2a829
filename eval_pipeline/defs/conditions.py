"""When the evaluation assets materialize by themselves: after their parents land, never while a parent is in progress or unsynced, never again for what a command-line run did."""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import dagster as dg

# Not in Dagster's public API: the resolver behind the UI's "Unsynced". No public call answers
# "is this partition unsynced?"; defs/test_private_dagster_api.py pins the Dagster minor it
# was checked on, so the next one is looked at before it is used.
from dagster._core.definitions.data_version import CachingStaleStatusResolver, StaleStatus

from eval_pipeline.defs.launched import CLI, LAUNCHED_BY_TAG, SCHEDULE

AC = dg.AutomationCondition


class AnyParentUnsynced(dg.AutomationCondition):
    """A partition with a parent partition Dagster marks unsynced (STALE): grading runs that
    are about to be redone would be wasted, and the badge would lie. The same status the UI
    shows, from the same resolver. `ignored` parents (caches the step rebuilds itself, as the
    warehouse variants) never hold a partition back: nothing may be left to rebuild them. A
    parent partition this tick requests in the partition's own run (the grades a summary
    joins) is redone before it, so it holds nothing back either."""

    ignored: frozenset[dg.AssetKey]

    def __init__(self, ignored: frozenset[dg.AssetKey] = frozenset()) -> None:
        self.ignored = ignored

    @property
    def name(self) -> str:
        return "any_parent_unsynced"

    @property
    def description(self) -> str:
        return "A parent partition is unsynced"

    @property
    def requires_cursor(self) -> bool:
        return False

    def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        view = context.asset_graph_view
        resolver = CachingStaleStatusResolver(view.instance, context.asset_graph, view)
        true = context.get_empty_subset()
        for parent in context.asset_graph.get(context.key).parent_keys - self.ignored:
            parents = context.candidate_subset.compute_parent_subset(parent)
            if parents.is_empty:
                continue
            if parents.is_partitioned:
                stale_keys = {
                    key
                    for key in parents.expensively_compute_partition_keys()
                    if resolver.get_status(parent, key) is StaleStatus.STALE
                }
                stale = parents.compute_intersection_with_partition_keys(stale_keys)
            elif resolver.get_status(parent) is StaleStatus.STALE:
                stale = parents
            else:
                continue
            stale = _not_requested_with(context, parent, stale)
            children = stale.compute_child_subset(context.key)
            true = true.compute_union(children.compute_intersection(context.candidate_subset))
        return dg.AutomationResult(context=context, true_subset=true)


def _not_requested_with(context: dg.AutomationContext, parent: dg.AssetKey, subset):
    """`subset` of `parent`, less what this tick requests of it with the same partitions as
    the asset evaluated: those run first in the same run."""
    # Undocumented, on the public AutomationContext: what this tick requests so far (what
    # `will_be_requested` reads); defs/test_private_dagster_api.py pins it with the rest.
    requested = context.request_subsets_by_key.get(parent)
    same = context.asset_graph.get(parent).partitions_def == context.partitions_def
    if requested is None or requested.is_empty or not same:
        return subset
    return subset.compute_difference(requested)


class RunsWithoutReferences(dg.AutomationCondition):
    """Days on which some model's runs exist (a backfill, an import) while the day's reference
    results do not: the grades of those runs need them."""

    runs_key: dg.AssetKey

    def __init__(self, runs_key: dg.AssetKey) -> None:
        self.runs_key = runs_key

    @property
    def name(self) -> str:
        return "runs_without_references"

    @property
    def description(self) -> str:
        return "Runs exist on this day"

    @property
    def requires_cursor(self) -> bool:
        return False

    async def evaluate(self, context: dg.AutomationContext) -> dg.AutomationResult:
        view = context.asset_graph_view
        runs = view.get_full_subset(key=self.runs_key)
        missing = await view.compute_missing_subset(key=self.runs_key, from_subset=runs)
        present = runs.compute_difference(missing)
        grid = context.asset_graph.get(self.runs_key).partitions_def
        assert isinstance(grid, dg.MultiPartitionsDefinition)
        days = {
            grid.get_partition_key_from_str(key).keys_by_dimension["date"]
            for key in present.expensively_compute_partition_keys()
        }
        true = context.candidate_subset.compute_intersection_with_partition_keys(days)
        return dg.AutomationResult(context=context, true_subset=true)


def _landed() -> dg.AutomationCondition:
    """A new materialization, not made by the run that also made the asset being evaluated
    (runs → grades → summaries in one run) nor by the command line or the schedule."""
    return (
        AC.newly_updated()
        & ~AC.executed_with_root_target()
        # The command line and the daily schedule (`chain`) evaluate the whole chain of
        # their day themselves: what they materialize is no reason for automation to run
        # anything again.
        & ~AC.executed_with_tags(tag_values={LAUNCHED_BY_TAG: CLI})
        & ~AC.executed_with_tags(tag_values={LAUNCHED_BY_TAG: SCHEDULE})
    ).with_label("newly_updated, not by this run, the command line nor the schedule")


def _changed() -> dg.AutomationCondition:
    """Landed with another data version than before: a re-read of unchanged tests, context or
    rules (the UI's "Materialize" with nothing edited) gives the same version, and nothing
    that read them is out of date."""
    return (_landed() & AC.data_version_changed()).with_label("landed with a new data version")


def follows_parents(
    partitioned_parents: Sequence[dg.AssetKey], *, caches: Sequence[dg.AssetKey] = ()
) -> dg.AutomationCondition:
    """A daily or model × day partition runs once a parent of the same partition lands (any
    day: a backfill of runs carries through), or, today only, once an unpartitioned parent
    (the tests, the grading rules) lands with a new data version; it waits while a parent
    is missing, in progress or unsynced. It joins its parent's tick when this tick requests
    that parent's partition (a summary its grades, the report its leaderboard): Dagster
    launches what one tick requests of one partition as one run, so a (model, day) whose runs
    were redone is graded and summarized in one run, as `evaluate_model_day` does. `caches`
    are parents the step rebuilds itself when missing (the warehouse variants): neither a
    reason to run nor to wait."""
    parents = dg.AssetSelection.assets(*partitioned_parents)
    same_partition = AC.any_deps_match(_landed()).allow(parents)
    joined = AC.any_deps_match(AC.will_be_requested()).allow(parents)
    ignored = dg.AssetSelection.assets(*caches)
    today = AC.in_latest_time_window() & AC.any_deps_match(_changed()).ignore(ignored)
    return (
        (same_partition | joined | today).since_last_handled()
        & ~AC.any_deps_match(AC.missing() & ~AC.will_be_requested()).ignore(ignored)
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
        & ~AnyParentUnsynced(frozenset(caches))
    ).with_label("follows_parents")


def leaderboard_condition(summaries: dg.AssetKey) -> dg.AutomationCondition:
    """The day's leaderboard follows each model's summary of the day: a model not evaluated
    that day (a retired one, a later one) is no reason to wait."""
    return (
        AC.any_deps_match(_landed()).allow(dg.AssetSelection.assets(summaries)).since_last_handled()
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
    ).with_label("follows_summaries")


def references_condition(runs: dg.AssetKey) -> dg.AutomationCondition:
    """Today's references when the day starts or the tests or warehouse change (as `eager`),
    and a past day's once runs exist for it without references (a backfill of runs)."""
    today = (
        AC.in_latest_time_window()
        & (AC.newly_missing() | AC.any_deps_match(_changed())).since_last_handled()
    )
    backfilled = (AC.missing() & RunsWithoutReferences(runs)).newly_true()
    return (
        (today | backfilled)
        & ~AC.any_deps_match(AC.missing())
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
    ).with_label("references_follow_tests_and_runs")


def cache_condition() -> dg.AutomationCondition:
    """A cache the steps using it build when missing (the warehouse variants): rebuilt ahead
    of them when a parent lands, never just because it is missing."""
    return (
        AC.any_deps_match(_changed()).since_last_handled()
        & ~AC.any_deps_match(AC.missing())
        & ~AC.any_deps_in_progress()
        & ~AC.in_progress()
    ).with_label("follows_parents")


def automation_sensor(
    name: str, target: dg.AssetSelection
) -> dg.AutomationConditionSensorDefinition:
    """The sensor evaluating the conditions above, over the suite's own assets (`target`):
    in a team's project beside assets of its own, it never launches theirs."""
    with warnings.catch_warnings():
        # Conditions of our own (unsynced parents) are evaluated with the code, as sensors are.
        warnings.simplefilter("ignore", dg.PreviewWarning)
        warnings.simplefilter("ignore", dg.BetaWarning)
        return dg.AutomationConditionSensorDefinition(
            name,
            target=target,
            default_status=dg.DefaultSensorStatus.RUNNING,
            use_user_code_server=True,
            description="Materializes references, grades, summaries, leaderboard and report "
            "once their inputs land (also for the days a backfill of runs fills).",
        )
