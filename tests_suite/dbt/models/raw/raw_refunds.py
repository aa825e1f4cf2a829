"""Generate refunds (deterministic: fixed numpy PCG64 seed).

Returned orders get their lines refunded in full (shipping is not refunded). Some delivered
orders get a partial refund, for a damaged or missing item or a late delivery.
"""

import numpy as np
import pandas as pd

SEED = 1_006
PARTIAL_SHARE = 0.04  # of delivered orders
PARTIAL_REASONS = {"damaged_item": 0.45, "missing_item": 0.25, "late_delivery": 0.30}


def model(dbt, session):
    dbt.config(materialized="table")
    window = dbt.ref("reporting_date").df().iloc[0]
    end_of_today = pd.Timestamp(window["as_of_date"]) + pd.Timedelta(days=1, seconds=-1)
    orders = dbt.ref("raw_orders").order("order_id").df()
    items = dbt.ref("raw_order_items").df()
    rng = np.random.default_rng(SEED)

    items["line_cents"] = items["quantity"] * items["unit_price_cents"] - items["discount_cents"]
    orders["item_cents"] = orders["order_id"].map(items.groupby("order_id")["line_cents"].sum())

    returned = orders[orders["status"] == "returned"]
    full = pd.DataFrame(
        {
            "order_id": returned["order_id"],
            "created_at": returned["returned_at"]
            + pd.to_timedelta(rng.uniform(1, 5, len(returned)), unit="D"),
            "amount_cents": returned["item_cents"],
            "reason": "returned",
        }
    )

    delivered = orders[orders["status"] == "delivered"]
    picked = delivered[rng.random(len(delivered)) < PARTIAL_SHARE]
    share = rng.uniform(0.1, 0.5, len(picked))
    partial = pd.DataFrame(
        {
            "order_id": picked["order_id"],
            "created_at": picked["delivered_at"]
            + pd.to_timedelta(rng.uniform(0.5, 15, len(picked)), unit="D"),
            "amount_cents": np.round(picked["item_cents"] * share).astype("int64"),
            "reason": rng.choice(
                list(PARTIAL_REASONS), size=len(picked), p=list(PARTIAL_REASONS.values())
            ),
        }
    )

    refunds = pd.concat([full, partial])
    refunds["created_at"] = refunds["created_at"].dt.floor("s")
    # A refund still being processed after today has not happened yet.
    refunds = refunds[refunds["created_at"] <= end_of_today]
    refunds = refunds.sort_values(["created_at", "order_id"], kind="stable").reset_index(drop=True)
    refunds.insert(0, "refund_id", np.arange(1, len(refunds) + 1, dtype="int64"))
    return refunds
