"""Dagster resources: the suite being evaluated, swappable in tests."""

from pathlib import Path

import dagster as dg

from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.pipeline import load_suite_once
from eval_pipeline.store import StateFolder, ensure_schema_files
from eval_pipeline.suite import (
    AgentContext,
    Suite,
    SuiteConfig,
    load_agent_context,
    load_config,
)

SUITE_KEY = "suite"


class SuiteResource(dg.ConfigurableResource):
    """The suite folder (test files, `eval_config.yaml`, context files, dbt project).

    A run reads the suite once per process (`load_suite_once`): an evaluation from the
    command line hands its stages the suite it loaded and checked, with the digest of its
    files (`files_digest`), and each stage fails once the files no longer hash to it; a run
    from the UI, a schedule or the daemon loads the suite once per run process.
    """

    root: str
    #: The digest of the suite's files the run was launched with (`remember_suite`); None:
    #: the run reads the suite as it finds it.
    files_digest: str | None = None

    @property
    def path(self) -> Path:
        return Path(self.root)

    def load(self) -> Suite:
        """The validated suite; raises `SuiteError` listing all problems, or `SuiteChanged`
        when its files no longer hash to `files_digest`."""
        return load_suite_once(self.path, launched=self.files_digest)

    def config(self) -> SuiteConfig:
        """The suite's configuration: in a run launched with a loaded suite, that suite's (a
        run reads one suite); else as `eval_config.yaml` holds it now, whatever the test
        files (the store, the report and the compaction need no valid test)."""
        if self.files_digest is not None:
            return self.load().config
        return load_config(self.path)

    def agent_context(self) -> AgentContext:
        return load_agent_context(self.config())

    def store(self) -> StateFolder:
        """The suite's result store, its folders and schema files in place (results.duckdb is
        published at the end of an evaluation, `publish_results`: writers never need it)."""
        layout = StateFolder.of(self.config())
        ensure_schema_files(layout)
        return layout


def suite_of(
    context: dg.AssetExecutionContext | dg.OpExecutionContext, names: SuiteNames
) -> SuiteResource:
    """The suite resource of a step, under the key the suite's names give it (`suite`,
    `sales_suite`): a parameter named `suite` could only ever be the unnamed one."""
    return getattr(context.resources, names.resource(SUITE_KEY))
