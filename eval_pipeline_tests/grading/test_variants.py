"""Warehouse variants: seeded, reproducible, perturbed, and keeping every key relationship."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from eval_pipeline.grading import MANIFEST, VariantOptions, build_variants
from eval_pipeline_tests.grading.small_shop import CUSTOMERS, ORDERS, build_shop

TABLES = ("customers", "products", "orders", "order_lines")


@pytest.fixture(scope="module", params=[False, True], ids=["named-keys", "declared-keys"])
def shop(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("shop")
    return build_shop(folder / "shop.duckdb", declare_keys=request.param)


def _contents(path: Path) -> dict[str, list[tuple]]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return {t: connection.execute(f"SELECT * FROM {t}").fetchall() for t in TABLES}


def test_the_same_seed_builds_the_same_variants_and_another_seed_others(
    shop: Path, tmp_path: Path
) -> None:
    first = build_variants(shop, tmp_path / "a", count=2, seed=3)
    again = build_variants(shop, tmp_path / "b", count=2, seed=3)
    other = build_variants(shop, tmp_path / "c", count=2, seed=4)
    for one, two, three in zip(first.paths, again.paths, other.paths, strict=True):
        assert _contents(one) == _contents(two)
        assert _contents(one) != _contents(three)
    assert _contents(first.paths[0]) != _contents(first.paths[1])
    assert (tmp_path / "a" / MANIFEST).is_file()


def test_every_row_kept_in_a_variant_keeps_the_rows_it_references(
    shop: Path, tmp_path: Path
) -> None:
    buyer = "buyer" if "buyer" in str(_columns(shop, "orders")) else "customer_id"
    variants = build_variants(shop, tmp_path / "v", count=4, seed=0)
    for path in variants.paths:
        with duckdb.connect(str(path), read_only=True) as connection:
            orphans = connection.execute(
                f"SELECT (SELECT COUNT(*) FROM orders WHERE {buyer} NOT IN "
                "(SELECT id FROM customers)), "
                "(SELECT COUNT(*) FROM order_lines WHERE order_id NOT IN (SELECT id FROM orders)), "
                "(SELECT COUNT(*) FROM order_lines WHERE product_id NOT IN "
                "(SELECT id FROM products))"
            ).fetchall()[0]
            assert orphans == (0, 0, 0), path.name
            # keys stay unique although rows were duplicated
            for table in TABLES:
                count, distinct = connection.execute(
                    f"SELECT COUNT(*), COUNT(DISTINCT id) FROM {table}"
                ).fetchall()[0]
                assert count == distinct, (path.name, table)
            # the view over orders is there, over the variant's rows
            assert connection.execute("SELECT COUNT(*) FROM paid_orders").fetchall()[0][0] > 0


def test_a_variant_samples_duplicates_shifts_and_nulls(shop: Path, tmp_path: Path) -> None:
    variants = build_variants(shop, tmp_path / "v", count=1, seed=0)
    with duckdb.connect(str(variants.paths[0]), read_only=True) as connection:
        connection.execute(f"ATTACH '{shop}' AS base (READ_ONLY)")
        customers, orders, top_id = connection.execute(
            "SELECT (SELECT COUNT(*) FROM customers), (SELECT COUNT(*) FROM orders), "
            "(SELECT MAX(id) FROM orders)"
        ).fetchall()[0]
        assert customers < CUSTOMERS and orders < ORDERS  # sampled
        assert top_id > ORDERS  # duplicated rows got fresh keys past the largest
        duplicated = connection.execute(
            "SELECT COUNT(*) FROM orders AS d JOIN orders AS o ON o.id < d.id "
            f"AND d.id > {ORDERS} AND o.amount = d.amount AND o.status = d.status"
        ).fetchall()[0][0]
        assert duplicated >= 1
        shifted_amounts, shifted_dates = connection.execute(
            "SELECT COUNT(*) FILTER (v.amount <> b.amount), "
            "COUNT(*) FILTER (v.order_date <> b.order_date) "
            "FROM orders AS v JOIN base.orders AS b USING (id)"
        ).fetchall()[0]
        assert shifted_amounts > 0 and shifted_dates > 0
        # dates only move back: no order lands after the warehouse's last day
        last, base_last = connection.execute(
            "SELECT MAX(order_date), (SELECT MAX(order_date) FROM base.orders) FROM orders"
        ).fetchall()[0]
        assert last <= base_last
        # NULLs go into region (nullable, already holds NULLs), never into NOT NULL status
        # or into a column that has none on the warehouse (products.price)
        region_nulls, base_region_nulls = connection.execute(
            "SELECT AVG((region IS NULL)::INT), "
            "(SELECT AVG((region IS NULL)::INT) FROM base.customers) FROM customers"
        ).fetchall()[0]
        assert region_nulls > base_region_nulls
        assert (
            connection.execute("SELECT COUNT(*) FROM orders WHERE status IS NULL").fetchall()[0][0]
            == 0
        )
        assert (
            connection.execute("SELECT COUNT(*) FROM products WHERE price IS NULL").fetchall()[0][0]
            == 0
        )


def test_rows_per_table_are_capped(shop: Path, tmp_path: Path) -> None:
    options = VariantOptions(max_rows_per_table=50, keep_fraction=(1.0, 1.0))
    variants = build_variants(shop, tmp_path / "v", count=1, options=options)
    counts = variants.row_counts[0]
    # at most the cap, plus the duplicated rows (5 %, at least one)
    assert all(rows <= 50 + 3 for rows in counts.values()), counts
    assert counts["main.orders"] >= 50


def _columns(path: Path, table: str) -> list[str]:
    with duckdb.connect(str(path), read_only=True) as connection:
        return [row[0] for row in connection.execute(f"DESCRIBE {table}").fetchall()]


def test_a_rebuild_replaces_its_own_files_only(shop: Path, tmp_path: Path) -> None:
    folder = tmp_path / "v"
    build_variants(shop, folder, count=3)
    (folder / "notes.txt").write_text("mine")
    rebuilt = build_variants(shop, folder, count=2, seed=1)
    assert sorted(p.name for p in folder.iterdir()) == [
        "notes.txt",
        "variant_1.duckdb",
        "variant_2.duckdb",
        MANIFEST,
    ]
    assert rebuilt.paths == (folder / "variant_1.duckdb", folder / "variant_2.duckdb")
