"""Which warehouse models the evaluation depends on: the tables its reference SQL reads."""

from __future__ import annotations

import dagster as dg

from eval_pipeline.defs.assets.warehouse_reads import leaf_models, tables_read


def test_tables_read_names_tables_not_ctes_nor_aliases():
    sql = """
        WITH recent AS (SELECT * FROM Orders WHERE order_date > '2024-01-01')
        SELECT c.region, count(*) FROM recent r JOIN main.customers c USING (customer_id)
        WHERE c.customer_id IN (SELECT customer_id FROM payments)
        GROUP BY 1
    """
    assert tables_read(sql) == {"orders", "customers", "payments"}


def test_sql_sqlglot_cannot_parse_reads_nothing():
    assert tables_read("SELEC nonsense FROM (") == set()


def test_leaf_models_are_those_no_model_is_built_from():
    raw, stg, mart = (dg.AssetKey(["warehouse", n]) for n in ("raw_orders", "stg_orders", "orders"))
    upstream = {raw: set(), stg: {raw}, mart: {stg}}
    assert leaf_models([raw, stg, mart], upstream) == [mart]
