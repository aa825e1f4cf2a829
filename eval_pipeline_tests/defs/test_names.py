"""A suite's names in Dagster: bare without a name (what the CLI and the stored history use), prefixed with one."""

from __future__ import annotations

import dagster as dg
import pytest

from eval_pipeline.defs.names import UNNAMED, SuiteNames


def test_an_unnamed_suite_keeps_the_bare_names_its_instance_history_is_recorded_under():
    assert UNNAMED.key("agent_runs") == dg.AssetKey("agent_runs")
    assert UNNAMED.scoped("evaluate_model_day") == "evaluate_model_day"
    assert UNNAMED.resource("suite") == "suite"
    assert UNNAMED.group("evaluation") == "evaluation"
    assert UNNAMED.models_partitions.name == "models"


def test_a_named_suite_prefixes_every_name_it_defines():
    names = SuiteNames("sales")
    assert names.key("agent_runs") == dg.AssetKey(["sales", "agent_runs"])
    assert names.prefixed(dg.AssetKey(["warehouse", "orders"])).path == [
        "sales",
        "warehouse",
        "orders",
    ]
    assert names.scoped("evaluate_model_day") == "sales__evaluate_model_day"
    assert names.resource("dbt") == "sales_dbt"
    assert names.group("history") == "sales_history"
    assert names.models_partitions.name == "sales_models"


@pytest.mark.parametrize("name", ["sales-team", "sales/eu", "", "ventes été"])
def test_a_name_dagster_could_not_use_is_refused_naming_what_is_allowed(name):
    with pytest.raises(ValueError, match="letters, digits and underscores"):
        SuiteNames(name)
