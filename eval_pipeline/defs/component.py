"""`EvalSuiteComponent`: an eval_pipeline suite as a component of a team's own Dagster project (`defs.yaml`)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import dagster as dg
from pydantic import BaseModel, Field

from eval_pipeline.defs import suite_definitions
from eval_pipeline.suite import CONFIG_FILE, find_suite_root, suite_marker

#: What the scaffold writes for a suite it cannot find: a reminder, refused until it is set.
UNSET_SUITE_DIR = "<the suite's folder, relative to this file>"


class EvalSuiteScaffoldParams(BaseModel):
    """What `dg scaffold defs … EvalSuiteComponent <folder>` takes besides the folder."""

    suite_dir: str | None = Field(
        default=None,
        description="the suite folder, relative to the current folder or absolute "
        "(default: the current folder when it is a suite)",
    )


class EvalSuiteScaffolder(dg.Scaffolder[EvalSuiteScaffoldParams]):
    """`dg scaffold defs eval_pipeline.defs.component.EvalSuiteComponent <folder>
    [--suite-dir DIR]`: a `defs.yaml` naming the suite after its folder (a name is what lets
    a second suite in) and pointing at a suite that exists, written relative to the file."""

    @classmethod
    def get_scaffold_params(cls) -> type[EvalSuiteScaffoldParams]:
        return EvalSuiteScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest[EvalSuiteScaffoldParams]) -> None:
        given = request.params.suite_dir if request.params else None
        suite = Path(given).resolve() if given else find_suite_root()
        name = re.sub(r"\W", "_", request.target_path.name)
        if suite_marker(suite) is not None:
            suite_dir = os.path.relpath(suite, request.target_path.resolve())
        else:
            # No suite to point at: a value that reads as what to do, which `dg check defs`
            # refuses by name until it is set (dg has made the folder already: no refusal).
            suite_dir = UNSET_SUITE_DIR
            where = suite if given else f"the current folder ({Path.cwd()})"
            print(
                f"{where} is no eval_pipeline suite: set attributes.suite_dir in "
                f"{request.target_path / 'defs.yaml'} to your suite's folder (relative to "
                "that file), or scaffold again with --suite-dir DIR",
                file=sys.stderr,
            )
        dg.scaffold_component(request, {"suite_dir": suite_dir, "name": name})


@dg.scaffold_with(EvalSuiteScaffolder)
class EvalSuiteComponent(dg.Component, dg.Model, dg.Resolvable):
    """One eval_pipeline suite's assets, checks, jobs, schedules and sensors
    (`eval_pipeline.defs.suite_definitions`).

    Attributes:
        suite_dir: the suite folder (its `eval_config.yaml`), relative to this `defs.yaml`'s
            folder or absolute; a folder that is no suite fails the load (`dg check defs`).
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
        suite = (context.path / self.suite_dir).resolve()
        if suite_marker(suite) is None:
            # Without this a missing folder loads as a suite with no test: `dg check defs`
            # passes and the schedule evaluates nothing, every day.
            raise dg.DagsterInvalidDefinitionError(
                f"{context.path / 'defs.yaml'}: attributes.suite_dir: {self.suite_dir!r} is no "
                f"eval_pipeline suite ({suite} holds no {CONFIG_FILE}, cases/ or "
                "nao_config.yaml); set it to the suite's folder, relative to this file's"
            )
        return suite_definitions(suite, name=self.name, owners=self.owners)
