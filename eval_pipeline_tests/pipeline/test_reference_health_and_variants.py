"""The `reference_health` asset check on `reference_results` and the `warehouse_variants` asset."""

from __future__ import annotations

import dagster as dg
import pytest
import yaml

from eval_pipeline_tests.pipeline.small_suite import materialize, prepare

pytestmark = pytest.mark.slow


def write_case(suite, name: str, **fields) -> None:
    text = yaml.safe_dump({"name": name, "prompt": f"{name}?", **fields}, sort_keys=False)
    suite.case_file(name).write_text(text)


def test_reference_health_warns_on_an_empty_reference_unless_the_test_expects_it(
    small_suite, instance
):
    write_case(small_suite, "no_big_orders", sql="SELECT order_id FROM orders WHERE amount > 1e6")
    write_case(
        small_suite,
        "no_orders_in_asia",
        sql="SELECT c.customer_id FROM customers c WHERE region = 'APAC'",
        tags=["empty-answer"],
    )
    prepare(small_suite, instance)
    [check] = instance.event_log_storage.get_latest_asset_check_execution_by_key(
        [dg.AssetCheckKey(dg.AssetKey("reference_results"), "reference_health")]
    ).values()
    evaluation = check.event.dagster_event.event_specific_data
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.WARN
    assert evaluation.metadata["by_kind"].value == {"no_rows": 1}
    assert "no_big_orders" in evaluation.metadata["warnings"].value
    assert "no_orders_in_asia" not in evaluation.metadata["warnings"].value


def test_warehouse_variants_are_built_once_and_reused(small_suite, instance):
    small_suite.write_config(semantic={"variants": 3, "seed": 1})
    defs = prepare(small_suite, instance)

    def materialized() -> dict:
        result = materialize(defs, ["warehouse_variants"], instance=instance)
        assert result.success
        [event] = result.get_asset_materialization_events()
        return {k: v.value for k, v in event.materialization.metadata.items()}

    first, second = materialized(), materialized()
    assert (first["built"], first["reused"], first["variants"]) == (1, 0, 3)
    assert (second["built"], second["reused"]) == (0, 1)
    folders = list(small_suite.layout.variants_dir.rglob("variants.json"))
    assert len(folders) == 1 and "seed=1" in str(folders[0])
