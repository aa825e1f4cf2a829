"""Generate payment attempts for each order (deterministic: fixed numpy PCG64 seed).

A paid order has one succeeded payment for its lines after discount plus shipping; some were
preceded by a declined attempt. Cancelled orders had their card authorisation voided.
"""

import numpy as np
import pandas as pd

SEED = 1_005
METHODS = {"card": 0.66, "paypal": 0.20, "apple_pay": 0.10, "gift_card": 0.04}
DECLINED_FIRST_SHARE = 0.03


def model(dbt, session):
    dbt.config(materialized="table")
    orders = dbt.ref("raw_orders").order("order_id").df()
    items = dbt.ref("raw_order_items").df()
    rng = np.random.default_rng(SEED)

    items["line_cents"] = items["quantity"] * items["unit_price_cents"] - items["discount_cents"]
    item_cents = items.groupby("order_id")["line_cents"].sum()
    amount = orders["order_id"].map(item_cents).to_numpy() + orders["shipping_fee_cents"].to_numpy()
    n = len(orders)
    method = rng.choice(list(METHODS), size=n, p=list(METHODS.values()))
    paid_at = orders["ordered_at"] + pd.to_timedelta(rng.integers(5, 90, n), unit="s")
    final_status = np.where(orders["status"] == "cancelled", "voided", "succeeded")

    final = pd.DataFrame(
        {
            "order_id": orders["order_id"],
            "created_at": paid_at,
            "payment_method": method,
            "amount_cents": amount,
            "status": final_status,
        }
    )
    declined_first = rng.random(n) < DECLINED_FIRST_SHARE
    declined = final[declined_first].assign(
        created_at=lambda d: d["created_at"] - pd.Timedelta(seconds=4), status="failed"
    )
    payments = pd.concat([declined, final]).sort_values(["created_at", "order_id"], kind="stable")
    payments.insert(0, "payment_id", np.arange(1, len(payments) + 1, dtype="int64"))
    return payments.reset_index(drop=True)
