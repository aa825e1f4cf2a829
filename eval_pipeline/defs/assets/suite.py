"""Assets for what the user writes: the files on disk as observable sources, the test cases and the context the built-in agent reads, the grading rules."""

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import dagster as dg

from eval_pipeline.defs import groups
from eval_pipeline.defs.metadata import recorded, table_definition
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.resources import SUITE_KEY, SuiteResource, suite_of
from eval_pipeline.defs.stage_graph import StageGraph
from eval_pipeline.grading import GradingRules
from eval_pipeline.pipeline import stages
from eval_pipeline.suite import AgentContext, Suite


def changes(before: Mapping[str, str] | None, after: Mapping[str, str]) -> dict[str, list[str]]:
    """What differs between two {name: content hash} maps: added, edited and removed names
    (everything is "added" when there is no earlier map)."""
    before = before or {}
    return {
        "added": sorted(set(after) - set(before)),
        "edited": sorted(n for n in after if n in before and before[n] != after[n]),
        "removed": sorted(set(before) - set(after)),
    }


def _changes_text(changed: dict[str, list[str]]) -> str:
    parts = [f"{kind}: {', '.join(names)}" for kind, names in changed.items() if names]
    return "; ".join(parts) or "nothing changed"


def _hashes(metadata: Mapping[str, Any] | None, key: str) -> dict[str, str] | None:
    """The per-item hashes a materialization recorded under `key`, as a stage or Dagster
    gives them (None: none recorded)."""
    value = (metadata or {}).get(key)
    value = getattr(value, "value", None)
    return dict(value) if isinstance(value, Mapping) else None


#: Per suite input asset: the metadata key of its per-item hashes.
_HASHES = {
    "test_cases": "case_hashes",
    "agent_context": "file_hashes",
    "grading_rules": "rule_digests",
}


def what_changed(
    asset: str, done: stages.Materialized, previous: Mapping[str, Any] | None
) -> stages.Metadata:
    """What a reader of a new data version of a suite input asset (`test_cases`,
    `agent_context`, `grading_rules`) wants to know first: what changed since its previous
    materialization, whose metadata is `previous` (None before one), shown before the
    stage's own metadata. Empty for any other asset."""
    if asset not in _HASHES:
        return {}
    before, after = _hashes(previous, _HASHES[asset]), _hashes(done.metadata, _HASHES[asset])
    assert after is not None, f"{asset} records no {_HASHES[asset]}"
    if asset == "grading_rules":
        return {
            "changed_rules": ", ".join(GradingRules.changed(before, after)) or "nothing changed"
        }
    changed = changes(before, after)
    name = "changed_tests" if asset == "test_cases" else "changed_files"
    return {name: _changes_text(changed), "changes": stages.as_json(changed)}


def reads_previous(asset: str) -> bool:
    """Whether `what_changed` reads the asset's previous metadata (a suite input asset)."""
    return asset in _HASHES


def previous_metadata(instance: dg.DagsterInstance, key: dg.AssetKey) -> Mapping[str, Any] | None:
    """The metadata of the asset's latest materialization (None before one)."""
    event = instance.get_latest_materialization_event(key)
    if event is None or event.asset_materialization is None:
        return None
    return event.asset_materialization.metadata


def _read(context: dg.AssetExecutionContext, asset: str, done: stages.Materialized):
    first = what_changed(asset, done, previous_metadata(context.instance, context.asset_key))
    context.log.info(
        ", ".join(f"{key}: {value}" for key, value in first.items() if key != "changes")
    )
    return recorded(context, done, first=first)


#: The observed files (source assets), by their bare names.
TEST_FILES, CONTEXT_FILES = "test_files", "context_files"
#: What an observation of files records: their data version and its metadata.
ObservedFiles = tuple[str, dict[str, int]]


def file_versions(suite: Suite, context: AgentContext, names: SuiteNames) -> dict[dg.AssetKey, str]:
    """The data versions of the observed files as `suite` and `context` read them: the suite
    hash for `test_files`, the context hash for `context_files` (the versions `test_cases`
    and `agent_context` take too)."""
    return {names.key(TEST_FILES): suite.hash, names.key(CONTEXT_FILES): context.hash}


@dataclass(frozen=True)
class SuiteAssets:
    """What the user writes, as assets: the files on disk (observable sources, never
    materialized), and what is read of them: the tests, the agent's context, the grading
    rules."""

    test_files: dg.AssetsDefinition
    context_files: dg.AssetsDefinition
    test_cases: dg.AssetsDefinition
    agent_context: dg.AssetsDefinition
    grading_rules: dg.AssetsDefinition

    @property
    def all(self) -> list[dg.AssetsDefinition]:
        """The materializable ones, which a run reads the suite into."""
        return [self.test_cases, self.agent_context, self.grading_rules]

    @property
    def sources(self) -> list[dg.AssetsDefinition]:
        return [self.test_files, self.context_files]


def build_suite_assets(graph: StageGraph) -> SuiteAssets:
    """The suite's input assets, keyed and grouped as `graph.names` say."""
    names = graph.names
    group = names.group(groups.SUITE)
    resources = {names.resource(SUITE_KEY)}

    # The files themselves: observed, never materialized (the watch_suite_files sensor
    # observes them every 30 s without a run, a command-line evaluation before it reads them,
    # and the UI's "Observe sources" on demand). A new data version marks what read them
    # unsynced, with these assets named as the cause.
    def observed(
        name: str, kind: str, description: str, read: Callable[[SuiteResource], ObservedFiles]
    ) -> dg.AssetsDefinition:
        with warnings.catch_warnings():
            # Dagster calls observable sources beta; they are its one way to observe something
            # it does not materialize and still give data versions for staleness. The multi-
            # form is an AssetsDefinition, so `map_asset_specs` and a component's
            # post-processing (owners, tags) reach these too.
            warnings.simplefilter("ignore", dg.BetaWarning)

            @dg.multi_observable_source_asset(
                name=names.scoped(f"observe_{name}"),
                specs=[
                    dg.AssetSpec(
                        names.key(name), group_name=group, kinds={kind}, description=description
                    )
                ],
                required_resource_keys=resources,
            )
            def observe(context: dg.AssetExecutionContext):
                version, metadata = read(suite_of(context, names))
                yield dg.ObserveResult(data_version=dg.DataVersion(version), metadata=metadata)

        return observe

    def read_tests(suite: SuiteResource) -> ObservedFiles:
        loaded = suite.load()
        return loaded.hash, {"cases": len(loaded.cases)}

    def read_context(suite: SuiteResource) -> ObservedFiles:
        loaded = suite.agent_context()
        return loaded.hash, {"files": len(loaded.all_files)}

    test_files = observed(
        TEST_FILES,
        "yaml",
        "The test files on disk, observed: its data version is the suite hash (every test's "
        "verdict-relevant content); test_cases reads them.",
        read_tests,
    )
    context_files = observed(
        CONTEXT_FILES,
        "markdown",
        "The files the built-in agent is told (context files, dbt docs, synced docs) on disk, "
        "observed: its data version is the context hash; agent_context reads them.",
        read_context,
    )

    @dg.asset(
        key=graph.key("test_cases"),
        group_name=group,
        partitions_def=graph.partitions_def("test_cases"),
        deps=graph.deps("test_cases", test_files),
        required_resource_keys=resources,
        kinds={"yaml", "duckdb"},
        description="The suite's test files, validated. Its data version is the suite hash, so "
        "editing a test marks the runs and grades that depend on it as unsynced; the "
        "watch_suite_files sensor observes test_files and re-reads them within a minute of "
        "an edit, and `changed_tests` names the tests added, edited or removed.",
        metadata=table_definition("test_cases"),
    )
    def test_cases(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        return _read(context, "test_cases", stages.test_cases(suite.load(), suite.store()))

    @dg.asset(
        key=graph.key("agent_context"),
        group_name=group,
        partitions_def=graph.partitions_def("agent_context"),
        deps=graph.deps("agent_context", context_files),
        required_resource_keys=resources,
        kinds={"markdown"},  # it reads dbt docs, but it is no dbt asset
        description="What the built-in agent is told besides the question: the configured context "
        "files (RULES.md), the dbt model documentation and, in a nao project, the docs `nao sync` "
        "wrote under databases/. Editing them marks agent runs unsynced "
        "(context_files is observed and re-read by the watch_suite_files sensor; "
        "`changed_files` names them).",
    )
    def agent_context(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        return _read(context, "agent_context", stages.agent_context(suite.agent_context()))

    @dg.asset(
        key=graph.key("grading_rules"),
        group_name=group,
        partitions_def=graph.partitions_def("grading_rules"),
        deps=graph.deps("grading_rules"),
        required_resource_keys=resources,
        kinds={"yaml"},
        description="How runs are graded besides what each test says: the suite's comparison "
        "defaults (test.comparison), the answer extraction, the judge model with its prompts and "
        "endpoint. A change marks the grades unsynced (`changed_rules` names it); regrading reads "
        "the stored runs, with no agent call. The grading code is the grades' code version.",
    )
    def grading_rules(context: dg.AssetExecutionContext) -> dg.MaterializeResult:
        suite = suite_of(context, names)
        return _read(context, "grading_rules", stages.grading_rules(suite.config()))

    return SuiteAssets(
        test_files=test_files,
        context_files=context_files,
        test_cases=test_cases,
        agent_context=agent_context,
        grading_rules=grading_rules,
    )
