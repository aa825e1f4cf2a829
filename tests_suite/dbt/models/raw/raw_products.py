"""Generate the shop's product catalogue (deterministic: fixed numpy PCG64 seed)."""

import numpy as np
import pandas as pd

SEED = 1_002

# category_id (seeds/raw_product_categories.csv) -> (base names, variants, price range in USD)
CATALOGUE = {
    1: (
        [
            "Wireless Earbuds",
            "Bluetooth Speaker",
            "USB-C Charger",
            "Smart Watch",
            "Portable Power Bank",
        ],
        ["", " Pro", " Mini"],
        (19, 249),
    ),
    2: (
        ["Chef's Knife", "Cast Iron Skillet", "French Press", "Linen Throw", "Ceramic Mug Set"],
        ["", " Deluxe", " Compact"],
        (15, 120),
    ),
    3: (
        ["Merino T-Shirt", "Rain Jacket", "Everyday Hoodie", "Running Socks", "Canvas Sneakers"],
        [" - Navy", " - Black", " - Sand"],
        (12, 180),
    ),
    4: (
        ["Face Serum", "Hand Cream", "Shampoo Bar", "Lip Balm", "Clay Mask"],
        ["", " Travel Size", " Fragrance Free"],
        (6, 60),
    ),
    5: (
        [
            "Yoga Mat",
            "Trail Backpack",
            "Insulated Water Bottle",
            "Resistance Bands",
            "Camping Lantern",
        ],
        ["", " XL", " Lite"],
        (10, 150),
    ),
    6: (
        [
            "Weeknight Cookbook",
            "Birds of Europe Field Guide",
            "Travel Journal",
            "Mystery Novel Box Set",
            "Crossword Collection",
        ],
        ["", " (Hardcover)", " (Gift Edition)"],
        (9, 40),
    ),
    7: (
        [
            "Building Blocks",
            "Strategy Board Game",
            "1000-Piece Jigsaw",
            "Plush Bear",
            "Party Card Game",
        ],
        ["", " Junior", " Family Edition"],
        (8, 70),
    ),
    8: (
        ["Pruning Shears", "Seed Starter Kit", "Watering Can", "Raised Bed Kit", "Garden Gloves"],
        ["", " Pro", " Kids"],
        (8, 120),
    ),
}
GARDEN_CATEGORY_ID = 8
# The garden line was dropped after the 2025 season: nothing in it has sold since.
GARDEN_DISCONTINUED_ON = "2025-10-31"
# Listed in the catalogue ahead of launch, so they have never sold.
COMING_SOON = [(1, "Smart Watch Gen 2", 279), (1, "Wireless Earbuds Gen 2", 159)]
COMING_SOON_LAUNCH = "2026-07-15"
PRICE_CHANGE_ON = "2026-01-01"


def to_price_cents(usd: np.ndarray) -> np.ndarray:
    """Round to a shelf price ending in .99."""
    return (np.floor(usd).astype("int64") * 100 + 99).astype("int64")


def model(dbt, session):
    dbt.config(materialized="table")
    window = dbt.ref("reporting_date").df().iloc[0]
    start = pd.Timestamp(window["history_start_date"])
    today = pd.Timestamp(window["as_of_date"])
    rng = np.random.default_rng(SEED)

    rows = []
    for category_id, (names, variants, (low, high)) in CATALOGUE.items():
        for name in names:
            base = rng.uniform(low, high)
            for variant in variants:
                rows.append(
                    {
                        "category_id": category_id,
                        "product_name": name + variant,
                        "base_usd": base * rng.uniform(0.8, 1.25),
                    }
                )
    for category_id, name, usd in COMING_SOON:
        rows.append({"category_id": category_id, "product_name": name, "base_usd": usd - 0.5})
    products = pd.DataFrame(rows)
    n = len(products)
    coming_soon = products["product_name"].isin([name for _, name, _ in COMING_SOON]).to_numpy()
    garden = (products["category_id"] == GARDEN_CATEGORY_ID).to_numpy()

    # Most of the range was there on day one; about a fifth launched later (not the garden line).
    late_launch = (rng.random(n) < 0.2) & ~garden
    launch_offset = pd.to_timedelta(rng.integers(30, (today - start).days - 60, size=n), unit="D")
    launched_on = pd.Series(start, index=products.index).where(
        ~late_launch, (start + launch_offset).to_numpy()
    )
    launched_on[coming_soon] = pd.Timestamp(COMING_SOON_LAUNCH)

    discontinued_on = pd.Series(pd.NaT, index=products.index, dtype="datetime64[ns]")
    retired = (rng.random(n) < 0.05) & ~garden & ~coming_soon & ~late_launch
    retire_offset = rng.integers(120, (today - start).days - 30, size=n)
    discontinued_on[retired] = start + pd.to_timedelta(retire_offset[retired], unit="D")
    discontinued_on[garden] = pd.Timestamp(GARDEN_DISCONTINUED_ON)

    price_cents = to_price_cents(products["base_usd"].to_numpy())
    # A share of the range got a price rise on New Year 2026; older order lines keep the old price.
    repriced = (rng.random(n) < 0.3) & ~garden & ~coming_soon
    new_price_cents = to_price_cents(price_cents / 100 * 1.08)
    previous_price_cents = pd.Series(price_cents, dtype="Int64").where(repriced)
    price_changed_on = pd.Series(pd.Timestamp(PRICE_CHANGE_ON), index=products.index).where(
        repriced
    )
    unit_cost_cents = np.round(price_cents * rng.uniform(0.35, 0.65, size=n)).astype("int64")
    product_id = np.arange(1, n + 1, dtype="int64")

    return pd.DataFrame(
        {
            "product_id": product_id,
            "sku": [
                f"SKU-{c}-{i:04d}" for c, i in zip(products["category_id"], product_id, strict=True)
            ],
            "product_name": products["product_name"],
            "category_id": products["category_id"].astype("int64"),
            "list_price_cents": np.where(repriced, new_price_cents, price_cents),
            "previous_price_cents": previous_price_cents,
            "price_changed_on": price_changed_on.dt.date,
            "unit_cost_cents": unit_cost_cents,
            "launched_on": launched_on.dt.date,
            "discontinued_on": discontinued_on.dt.date,
        }
    )
