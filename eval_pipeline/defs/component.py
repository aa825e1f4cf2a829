"""`EvalSuiteComponent`: an eval_pipeline suite as a component of a team's own Dagster project (`defs.yaml`)."""

from __future__ import annotations

import re

import dagster as dg
from pydantic import Field

from eval_pipeline.defs import suite_definitions


class EvalSuiteScaffolder(dg.Scaffolder):
    """`dg scaffold defs eval_pipeline.defs.component.EvalSuiteComponent <folder>`: a
    `defs.yaml` naming the suite after its folder (a name is what lets a second suite in)."""

    def scaffold(self, request: dg.ScaffoldRequest) -> None:
        name = re.sub(r"\W", "_", request.target_path.name)
        dg.scaffold_component(request, {"suite_dir": "suite", "name": name})


@dg.scaffold_with(EvalSuiteScaffolder)
class EvalSuiteComponent(dg.Component, dg.Model, dg.Resolvable):
    """One eval_pipeline suite's assets, checks, jobs, schedules and sensors
    (`eval_pipeline.defs.suite_definitions`).

    Attributes:
        suite_dir: the suite folder (its `eval_config.yaml`), relative to this `defs.yaml`'s
            folder or absolute.
        name: prefixes the suite's asset keys (`sales/agent_runs`), groups, jobs, schedules,
            sensors (`sales__daily_evaluation`), resource keys (`sales_suite`, `sales_dbt`)
            and models partitions (`sales_models`), so it merges beside other suites and the
            project's own assets and resources. Without one the bare names are used: one
            suite per code location.
        owners: the owners of every asset of the suite (`team:analytics`,
            `ana@example.com`), as the catalog shows and filters them.
    """

    suite_dir: str
    name: str | None = None
    owners: list[str] = Field(default_factory=list)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return suite_definitions(context.path / self.suite_dir, name=self.name, owners=self.owners)
