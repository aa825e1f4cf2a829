"""Generate order lines: which products each order holds, at what price and discount.

Deterministic (fixed numpy PCG64 seed). Money is in integer cents, as the source system stores it.
"""

import numpy as np
import pandas as pd

SEED = 1_004
TEST_DOMAIN = "@shop-internal.test"
EXTRA_LINES_MEAN = 0.7  # lines per order = 1 + Poisson(this), capped
MAX_LINES = 5
QUANTITY_P = {1: 0.78, 2: 0.16, 3: 0.05, 4: 0.01}
TEST_QUANTITY = (5, 12)  # QA accounts order in bulk, which inflates revenue if not excluded
PROMO_DISCOUNT = {"WELCOME10": 0.10, "BFCM25": 0.25, "SPRING15": 0.15, "LOYAL5": 0.05}


def pick_products(rng, order_dates, products, popularity):
    """One product per line, weighted by popularity, only among products on sale that day."""
    launched = products["launched_on"].to_numpy(dtype="datetime64[D]")
    retired = products["discontinued_on"].to_numpy(dtype="datetime64[D]")
    retired = np.where(np.isnat(retired), np.datetime64("9999-12-31"), retired)
    chosen = rng.choice(len(products), size=len(order_dates), p=popularity)
    for _ in range(50):
        off_sale = (order_dates < launched[chosen]) | (order_dates > retired[chosen])
        if not off_sale.any():
            return chosen
        chosen[off_sale] = rng.choice(len(products), size=off_sale.sum(), p=popularity)
    raise RuntimeError("could not find an on-sale product for some order lines")


def model(dbt, session):
    dbt.config(materialized="table")
    orders = dbt.ref("raw_orders").order("order_id").df()
    products = dbt.ref("raw_products").order("product_id").df()
    customers = dbt.ref("raw_customers").order("customer_id").df()
    rng = np.random.default_rng(SEED)

    test_customers = customers.loc[
        customers["email"].str.strip().str.lower().str.endswith(TEST_DOMAIN), "customer_id"
    ]
    popularity = rng.lognormal(0.0, 1.0, len(products))
    popularity /= popularity.sum()

    line_count = np.minimum(1 + rng.poisson(EXTRA_LINES_MEAN, len(orders)), MAX_LINES)
    order_pos = np.repeat(np.arange(len(orders)), line_count)
    order_dates = orders["ordered_at"].to_numpy(dtype="datetime64[D]")[order_pos]
    product_pos = pick_products(rng, order_dates, products, popularity)

    lines = pd.DataFrame({"order_pos": order_pos, "product_pos": product_pos})
    # A product appears once per order; a repeated pick becomes a larger quantity instead.
    quantity_values = np.array(list(QUANTITY_P))
    quantity_p = np.array(list(QUANTITY_P.values()))
    lines["quantity"] = rng.choice(quantity_values, size=len(lines), p=quantity_p)
    lines = lines.groupby(["order_pos", "product_pos"], as_index=False, sort=True)["quantity"].sum()

    header = orders.iloc[lines["order_pos"]].reset_index(drop=True)
    product = products.iloc[lines["product_pos"]].reset_index(drop=True)
    is_test = header["customer_id"].isin(test_customers).to_numpy()
    quantity = np.where(is_test, rng.integers(*TEST_QUANTITY, len(lines)), lines["quantity"])

    before_change = product["price_changed_on"].notna() & (
        header["ordered_at"].dt.normalize() < pd.to_datetime(product["price_changed_on"])
    )
    unit_price = np.where(
        before_change, product["previous_price_cents"].fillna(0), product["list_price_cents"]
    ).astype("int64")
    discount_rate = header["promo_code"].map(PROMO_DISCOUNT).fillna(0.0).to_numpy()
    discount = np.round(quantity * unit_price * discount_rate).astype("int64")

    return pd.DataFrame(
        {
            "order_item_id": np.arange(1, len(lines) + 1, dtype="int64"),
            "order_id": header["order_id"].to_numpy(),
            "product_id": product["product_id"].to_numpy(),
            "quantity": quantity.astype("int64"),
            "unit_price_cents": unit_price,
            "discount_cents": discount,
        }
    )
