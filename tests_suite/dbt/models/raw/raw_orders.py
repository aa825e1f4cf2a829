"""Generate order headers: who ordered when, through which channel, and what became of it.

Deterministic (fixed numpy PCG64 seed). Amounts live on the order lines (raw_order_items);
a header only knows the promo code and the shipping fee.
"""

import numpy as np
import pandas as pd

SEED = 1_003
TEST_DOMAIN = "@shop-internal.test"

# Buying behaviour of a real (non-test) account.
BUYER_SHARE = 0.88  # the rest sign up and never order
FIRST_ORDER_LAG_DAYS = 6.0  # mean days from sign-up to first order
LIFETIME_DAYS = 450.0  # mean days a customer keeps buying before drifting away
ORDERS_PER_YEAR_SHAPE, ORDERS_PER_YEAR_MEAN = 0.8, 14.0
TEST_ORDERS_PER_ACCOUNT = (15, 30)

CANCELLED_SHARE = 0.04
RETURNED_SHARE = 0.03  # of delivered orders

# Keys are channel_id values from seeds/raw_marketing_channels.csv.
ORDER_CHANNEL_WEIGHTS = {1: 0.28, 2: 0.18, 3: 0.12, 4: 0.14, 5: 0.06, 6: 0.17, 7: 0.05}
SAME_CHANNEL_AS_ACQUISITION = 0.5

SHIPPING_FEE_CENTS = {"standard": 499, "express": 1299}
EXPRESS_SHARE = 0.15
# Order hour (UTC) preference: quiet nights, busy evenings.
HOUR_WEIGHTS = np.array([2, 1, 1, 1, 1, 1, 2, 3, 4, 5, 5, 6, 6, 6, 6, 6, 7, 8, 9, 9, 8, 6, 4, 3])


def black_friday(year: int) -> pd.Timestamp:
    """The day after the fourth Thursday of November."""
    november_first = pd.Timestamp(year=year, month=11, day=1)
    first_thursday = november_first + pd.Timedelta(days=(3 - november_first.day_of_week) % 7)
    return first_thursday + pd.Timedelta(days=22)


def cyber_weekend(days: pd.DatetimeIndex) -> np.ndarray:
    """True for Black Friday through Cyber Monday."""
    hit = np.zeros(len(days), dtype=bool)
    for year in sorted(set(days.year)):
        friday = black_friday(year)
        hit |= (days >= friday) & (days <= friday + pd.Timedelta(days=3))
    return hit


def order_day_weights(days: pd.DatetimeIndex) -> np.ndarray:
    """Relative order volume per day: weekends, the holiday peak, Black Friday, a January lull."""
    weights = np.ones(len(days))
    weights *= np.where(days.day_of_week >= 5, 1.15, 1.0)
    weights *= np.where(days.month == 12, 1.35, 1.0)
    weights *= np.where(days.month == 1, 0.8, 1.0)
    weights *= np.where(cyber_weekend(days), 2.5, 1.0)
    return weights


def sample_days_between(rng, cumulative, first, last):
    """Draw one day index per row, in [first, last], with probability proportional to weight."""
    low = np.where(first > 0, cumulative[np.maximum(first - 1, 0)], 0.0)
    high = cumulative[last]
    target = low + rng.random(len(first)) * (high - low)
    return np.clip(np.searchsorted(cumulative, target, side="right"), first, last)


def promo_codes(rng, ordered_at, is_first_order):
    """Promo code per order (None for most): welcome offer, Black Friday, spring sale, loyalty."""
    code = np.full(len(ordered_at), None, dtype=object)
    day = ordered_at.normalize()
    month = ordered_at.month.to_numpy()
    code[(month == 4) & (rng.random(len(code)) < 0.2)] = "SPRING15"
    code[(rng.random(len(code)) < 0.03)] = "LOYAL5"
    code[cyber_weekend(day) & (rng.random(len(code)) < 0.6)] = "BFCM25"
    code[is_first_order & (rng.random(len(code)) < 0.35)] = "WELCOME10"
    return code


def only_where(stamps: pd.DatetimeIndex, reached: np.ndarray) -> pd.Series:
    """Keep a milestone timestamp only for orders that actually reached it."""
    return pd.Series(stamps).where(reached, pd.NaT)


def model(dbt, session):
    dbt.config(materialized="table")
    window = dbt.ref("reporting_date").df().iloc[0]
    days = pd.date_range(window["history_start_date"], window["as_of_date"], freq="D")
    end_of_today = days[-1] + pd.Timedelta(days=1) - pd.Timedelta(seconds=1)
    customers = dbt.ref("raw_customers").order("customer_id").df()
    rng = np.random.default_rng(SEED)
    cumulative = np.cumsum(order_day_weights(days))
    last_day = len(days) - 1

    signup_day = (customers["created_at"].dt.normalize() - days[0]).dt.days.to_numpy()
    is_test = customers["email"].str.strip().str.lower().str.endswith(TEST_DOMAIN).to_numpy()
    n = len(customers)

    # Real customers: a first order shortly after sign-up, then repeat orders at a personal
    # rate until they drift away (or until today).
    buyer = (rng.random(n) < BUYER_SHARE) & ~is_test
    first_day = signup_day + np.floor(rng.exponential(FIRST_ORDER_LAG_DAYS, n)).astype(int)
    buyer &= first_day <= last_day
    stop_day = np.minimum(first_day + rng.exponential(LIFETIME_DAYS, n).astype(int), last_day)
    rate = rng.gamma(ORDERS_PER_YEAR_SHAPE, ORDERS_PER_YEAR_MEAN / ORDERS_PER_YEAR_SHAPE, n)
    repeat_count = rng.poisson(rate * np.maximum(stop_day - first_day, 0) / 365.0)
    repeat_count[~buyer] = 0

    # QA accounts order all through the history.
    test_count = np.where(is_test, rng.integers(*TEST_ORDERS_PER_ACCOUNT, n), 0)

    first_idx = np.flatnonzero(buyer)
    repeat_idx = np.repeat(np.arange(n), repeat_count)
    test_idx = np.repeat(np.arange(n), test_count)
    repeat_days = sample_days_between(rng, cumulative, first_day[repeat_idx], stop_day[repeat_idx])
    test_days = rng.integers(signup_day[test_idx], last_day + 1)

    customer_idx = np.concatenate([first_idx, repeat_idx, test_idx])
    day_idx = np.concatenate([first_day[first_idx], repeat_days, test_days])
    is_first = np.concatenate(
        [np.ones(len(first_idx), bool), np.zeros(len(repeat_idx) + len(test_idx), bool)]
    )
    hour = rng.choice(24, size=len(day_idx), p=HOUR_WEIGHTS / HOUR_WEIGHTS.sum())
    ordered_at = days[day_idx] + pd.to_timedelta(
        hour * 3600 + rng.integers(0, 3600, len(hour)), unit="s"
    )
    # A first order cannot precede the sign-up it follows on the same day.
    created_at = customers["created_at"].to_numpy()[customer_idx]
    ordered_at = pd.DatetimeIndex(
        np.maximum(ordered_at.to_numpy(), created_at + np.timedelta64(10, "m"))
    )
    keep = ordered_at <= end_of_today
    customer_idx, ordered_at, is_first = customer_idx[keep], ordered_at[keep], is_first[keep]

    order = np.argsort(ordered_at.to_numpy(), kind="stable")
    customer_idx, ordered_at, is_first = customer_idx[order], ordered_at[order], is_first[order]
    m = len(order)

    acquisition = customers["acquisition_channel_id"].to_numpy()[customer_idx]
    channel_ids = np.array(list(ORDER_CHANNEL_WEIGHTS))
    channel_p = np.array(list(ORDER_CHANNEL_WEIGHTS.values()))
    channel = rng.choice(channel_ids, size=m, p=channel_p / channel_p.sum())
    channel = np.where(rng.random(m) < SAME_CHANNEL_AS_ACQUISITION, acquisition, channel)

    method = np.where(rng.random(m) < EXPRESS_SHARE, "express", "standard")
    express = method == "express"

    # Fulfilment: cancelled within hours, or shipped after 0-3 days and delivered 1-6 days
    # later (sooner with express). Anything whose next step lies after today waits there.
    ship_lag = pd.to_timedelta(rng.uniform(0.2, np.where(express, 1.5, 3.5)), unit="D")
    transit = pd.to_timedelta(
        rng.uniform(np.where(express, 0.8, 1.5), np.where(express, 2.5, 6.0)), unit="D"
    )
    shipped_at = ordered_at + ship_lag
    delivered_at = shipped_at + transit
    cancelled_at = ordered_at + pd.to_timedelta(rng.exponential(4.0, m), unit="h")
    cancelled = (rng.random(m) < CANCELLED_SHARE) & (cancelled_at <= end_of_today)
    returned_at = delivered_at + pd.to_timedelta(rng.uniform(3, 25, m), unit="D")
    wants_return = rng.random(m) < RETURNED_SHARE

    status = np.full(m, "delivered", dtype=object)
    status[delivered_at > end_of_today] = "shipped"
    status[shipped_at > end_of_today] = "placed"
    returned = (status == "delivered") & wants_return & (returned_at <= end_of_today)
    status[returned] = "returned"
    status[cancelled] = "cancelled"

    shipped = np.isin(status, ["shipped", "delivered", "returned"])
    delivered = np.isin(status, ["delivered", "returned"])

    return pd.DataFrame(
        {
            "order_id": np.arange(1, m + 1, dtype="int64"),
            "customer_id": customers["customer_id"].to_numpy()[customer_idx],
            "channel_id": channel.astype("int64"),
            "ordered_at": ordered_at.floor("s"),
            "status": status,
            "promo_code": promo_codes(rng, ordered_at, is_first),
            "shipping_method": method,
            "shipping_fee_cents": np.array([SHIPPING_FEE_CENTS[x] for x in method], dtype="int64"),
            "shipped_at": only_where(shipped_at.floor("s"), shipped),
            "delivered_at": only_where(delivered_at.floor("s"), delivered),
            "returned_at": only_where(returned_at.floor("s"), returned),
            "cancelled_at": only_where(cancelled_at.floor("s"), cancelled),
        }
    )
