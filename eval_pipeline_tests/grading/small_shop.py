"""A small hand-built shop warehouse (customers, products, orders, order lines) for variant tests."""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

CUSTOMERS, PRODUCTS, ORDERS = 60, 12, 400


def build_shop(path: Path, *, declare_keys: bool = False) -> Path:
    """Write the shop to `path`; with `declare_keys`, keys are declared and named off-convention.

    Without declared keys, references follow the naming convention (`orders.customer_id` →
    `customers.id`); with them, the order's customer column is `buyer`, which only the
    declared FOREIGN KEY can tell. Every reference is whole: no orphan rows.
    """
    rng = np.random.default_rng(7)
    customers = pd.DataFrame(
        {
            "id": np.arange(1, CUSTOMERS + 1),
            "name": [f"customer {i}" for i in range(1, CUSTOMERS + 1)],
            # about one customer in six has no region
            "region": [
                None if i % 6 == 0 else ["EU", "US", "APAC"][i % 3] for i in range(CUSTOMERS)
            ],
        }
    )
    products = pd.DataFrame(
        {
            "id": np.arange(1, PRODUCTS + 1),
            "category": [["garden", "kitchen", "toys"][i % 3] for i in range(PRODUCTS)],
            "price": np.round(rng.uniform(5, 100, PRODUCTS), 2),
        }
    )
    orders = pd.DataFrame(
        {
            "id": np.arange(1, ORDERS + 1),
            "customer_id": rng.integers(1, CUSTOMERS + 1, ORDERS),
            "status": rng.choice(["paid", "shipped", "cancelled"], ORDERS),
            "amount": np.round(rng.uniform(10, 500, ORDERS), 2),
            "order_date": pd.to_datetime("2026-01-01")
            + pd.to_timedelta(rng.integers(0, 180, ORDERS), unit="D"),
        }
    )
    lines = pd.DataFrame(
        {
            "id": np.arange(1, 2 * ORDERS + 1),
            "order_id": np.repeat(orders["id"].to_numpy(), 2),
            "product_id": rng.integers(1, PRODUCTS + 1, 2 * ORDERS),
            "quantity": rng.integers(1, 5, 2 * ORDERS),
        }
    )
    buyer = "buyer" if declare_keys else "customer_id"
    key = " PRIMARY KEY" if declare_keys else ""
    with duckdb.connect(str(path)) as connection:
        connection.execute(
            f"CREATE TABLE customers (id BIGINT{key}, name VARCHAR NOT NULL, region VARCHAR)"
        )
        connection.execute(
            f"CREATE TABLE products (id BIGINT{key}, category VARCHAR NOT NULL, price DECIMAL(10,2))"
        )
        reference = " REFERENCES customers (id)" if declare_keys else ""
        connection.execute(
            f"CREATE TABLE orders (id BIGINT{key}, {buyer} BIGINT NOT NULL{reference}, "
            "status VARCHAR NOT NULL, amount DECIMAL(10,2) NOT NULL, order_date DATE NOT NULL)"
        )
        order_ref = " REFERENCES orders (id)" if declare_keys else ""
        product_ref = " REFERENCES products (id)" if declare_keys else ""
        connection.execute(
            f"CREATE TABLE order_lines (id BIGINT{key}, order_id BIGINT NOT NULL{order_ref}, "
            f"product_id BIGINT NOT NULL{product_ref}, quantity INTEGER NOT NULL)"
        )
        for name, frame in (
            ("customers", customers),
            ("products", products),
            ("orders", orders),
            ("order_lines", lines),
        ):
            connection.register("frame", frame)
            connection.execute(f"INSERT INTO {name} SELECT * FROM frame")
            connection.unregister("frame")
        connection.execute(
            "CREATE VIEW paid_orders AS SELECT * FROM orders WHERE status <> 'cancelled'"
        )
    return path
