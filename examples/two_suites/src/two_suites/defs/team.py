"""The team's own assets and resources, which the suites beside them must leave alone."""

import dagster as dg


class TeamDbt(dg.ConfigurableResource):
    """Stands in for the team's own dbt resource: the key `dbt` is theirs, not a suite's."""

    project_dir: str

    def run(self, *args: str) -> str:
        return f"dbt {' '.join(args)} in {self.project_dir}"


@dg.asset(automation_condition=dg.AutomationCondition.eager())
def weekly_kpis(context: dg.AssetExecutionContext, dbt: TeamDbt) -> None:
    context.log.info(dbt.run("build", "--select", "kpis"))


@dg.definitions
def defs() -> dg.Definitions:
    return dg.Definitions(assets=[weekly_kpis], resources={"dbt": TeamDbt(project_dir="analytics")})
