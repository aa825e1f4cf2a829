"""eval_config.yaml as observed inputs: the grading settings `grading_rules` reads and each model's settings its runs use, so an edit marks exactly what it feeds unsynced."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import dagster as dg

from eval_pipeline.agents import answerer_identity
from eval_pipeline.defs import groups
from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import BY_MODEL
from eval_pipeline.grading import GradingRules
from eval_pipeline.suite import SuiteConfig

GRADING_SETTINGS, MODEL_SETTINGS = "grading_settings", "model_settings"
#: An observed version: the asset, its partition (a model id, or None), the data version.
Observed = tuple[dg.AssetKey, str | None, str]


@dataclass(frozen=True)
class SettingsSources:
    """The two parts of eval_config.yaml Dagster observes (never materializes): as the test
    files, a new version marks what read the old one unsynced, naming the source."""

    grading: dg.AssetSpec
    models: dg.AssetSpec

    @property
    def all(self) -> list[dg.AssetSpec]:
        return [self.grading, self.models]


def build_settings_sources(names: SuiteNames) -> SettingsSources:
    group = names.group(groups.SUITE)
    return SettingsSources(
        grading=dg.AssetSpec(
            names.key(GRADING_SETTINGS),
            group_name=group,
            kinds={"yaml"},
            description="eval_config.yaml's grading settings (test.comparison tolerance, "
            "extraction, the judge model, its endpoint and prompts), observed by the "
            "watch_suite_files sensor: its data version is the one grading_rules takes, so an "
            "edit re-reads grading_rules and marks the grades unsynced, never the runs.",
        ),
        # Per model: an edit of one model's provider settings marks that model's runs
        # unsynced and leaves the other models' alone.
        models=dg.AssetSpec(
            names.key(MODEL_SETTINGS),
            group_name=group,
            kinds={"yaml"},
            partitions_def=names.models_partitions,
            description="eval_config.yaml's settings of each model under test (its provider's "
            "endpoint, max_tokens and request settings; an HTTP agent's URL or version), "
            "observed per model by the watch_suite_files sensor: a new version marks that "
            "model's agent_runs unsynced.",
        ),
    )


def settings_versions(
    config: SuiteConfig, models: Iterable[str], sources: SettingsSources
) -> list[Observed]:
    """What the settings are now: the grading rules' version (as `grading_rules` records
    it) and each model's answerer identity (what the run keys hold, so an unsynced model is
    one whose runs `eval-pipeline test` would run again)."""
    versions: list[Observed] = [
        (sources.grading.key, None, GradingRules.of(config).settings_version)
    ]
    versions += [(sources.models.key, m, answerer_identity(config, m)) for m in sorted(models)]
    return versions


def with_settings_deps(
    assets: Sequence[dg.AssetsDefinition],
    sources: SettingsSources,
    *,
    grading_rules: dg.AssetKey,
    agent_runs: dg.AssetKey,
) -> list[dg.AssetsDefinition]:
    """`grading_rules` reads the grading settings; each (model, day) of `agent_runs` reads
    its model's settings (the `model` dimension of its partition)."""
    extra = {
        grading_rules: [dg.AssetDep(sources.grading)],
        agent_runs: [dg.AssetDep(sources.models, partition_mapping=BY_MODEL)],
    }

    def add(spec: dg.AssetSpec) -> dg.AssetSpec:
        deps = extra.get(spec.key)
        return spec.merge_attributes(deps=deps) if deps else spec

    # Only the two readers are rebuilt: the dbt assets stay as they were loaded.
    return [
        dg.map_asset_specs(add, [definition])[0]
        if set(definition.keys) & extra.keys()
        else definition
        for definition in assets
    ]
