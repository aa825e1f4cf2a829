"""Generate the shop's customer accounts (deterministic: fixed numpy PCG64 seed)."""

import numpy as np
import pandas as pd

SEED = 1_001
N_CUSTOMERS = 8_000
N_TEST_ACCOUNTS = 12

# (country code, region, share of customers). Region is the sales region the shop reports by.
COUNTRIES = [
    ("US", "North America", 0.40),
    ("CA", "North America", 0.08),
    ("MX", "Latin America", 0.03),
    ("BR", "Latin America", 0.03),
    ("GB", "Europe", 0.12),
    ("DE", "Europe", 0.09),
    ("FR", "Europe", 0.07),
    ("NL", "Europe", 0.03),
    ("ES", "Europe", 0.03),
    ("IT", "Europe", 0.03),
    ("SE", "Europe", 0.02),
    ("AU", "Asia Pacific", 0.05),
    ("NZ", "Asia Pacific", 0.01),
    ("SG", "Asia Pacific", 0.01),
]
# Accounts migrated from the old storefront never had an address captured: no country, no region.
MISSING_ADDRESS_SHARE = 0.05

# Keys are channel_id values from seeds/raw_marketing_channels.csv.
ACQUISITION_WEIGHTS = {1: 0.30, 2: 0.20, 3: 0.15, 4: 0.05, 5: 0.08, 6: 0.15, 7: 0.07}

# fmt: off
FIRST_NAMES = [
    "Olivia", "Liam", "Emma", "Noah", "Ava", "Elijah", "Sophia", "Lucas", "Mia", "Mateo",
    "Amelia", "Leo", "Harper", "Ethan", "Chloe", "Hugo", "Lea", "Finn", "Ines", "Jonas",
    "Sofia", "Luca", "Freya", "Oscar", "Isla", "Arjun", "Priya", "Kenji", "Aiko", "Wei", "Mei",
    "Diego", "Camila", "Rafael", "Lucia", "Omar", "Layla", "Nina", "Erik", "Astrid",
]
LAST_NAMES = [
    "Smith", "Johnson", "Brown", "Garcia", "Miller", "Davis", "Martin", "Lopez", "Wilson",
    "Taylor", "Clark", "Lewis", "Walker", "Young", "King", "Wright", "Muller", "Schmidt",
    "Schneider", "Dubois", "Moreau", "Laurent", "Rossi", "Bianchi", "Fernandez", "Silva",
    "Santos", "Jansen", "Visser", "Andersson", "Nilsson", "Tanaka", "Chen", "Wang", "Patel",
    "Singh", "Nguyen", "Kim", "Murphy", "O'Brien",
]
# fmt: on
EMAIL_DOMAINS = ["gmail.com", "outlook.com", "yahoo.com", "icloud.com", "proton.me", "gmx.de"]


def signup_day_weights(days: pd.DatetimeIndex) -> np.ndarray:
    """Sign-ups grow steadily over the two years and pick up before the holidays."""
    progress = np.linspace(0.0, 1.0, len(days))
    growth = 1.0 + 1.5 * progress
    holiday = np.where(days.month.isin([11, 12]), 1.3, 1.0)
    weights = growth * holiday
    return weights / weights.sum()


def model(dbt, session):
    dbt.config(materialized="table")
    window = dbt.ref("reporting_date").df().iloc[0]
    days = pd.date_range(window["history_start_date"], window["as_of_date"], freq="D")
    rng = np.random.default_rng(SEED)

    n_real = N_CUSTOMERS - N_TEST_ACCOUNTS
    signup_days = rng.choice(days, size=n_real, p=signup_day_weights(days))
    signup_seconds = rng.integers(0, 86_400, size=n_real)
    created_at = pd.to_datetime(signup_days) + pd.to_timedelta(signup_seconds, unit="s")

    first = rng.choice(FIRST_NAMES, size=n_real)
    last = rng.choice(LAST_NAMES, size=n_real)
    domain = rng.choice(EMAIL_DOMAINS, size=n_real)
    local_part = [
        f"{f}.{la}".lower().replace(" ", "").replace("'", "") + str(n)
        for f, la, n in zip(first, last, rng.integers(1, 999, size=n_real), strict=True)
    ]
    # The source system keeps emails as typed: some capitalised, some with stray spaces.
    email = [f"{lp}@{d}" for lp, d in zip(local_part, domain, strict=True)]
    shout = rng.random(n_real) < 0.04
    padded = rng.random(n_real) < 0.03
    email = [
        (" " + e + " ") if p else (e.title() if s else e)
        for e, s, p in zip(email, shout, padded, strict=True)
    ]

    country_idx = rng.choice(len(COUNTRIES), size=n_real, p=[c[2] for c in COUNTRIES])
    country = np.array([COUNTRIES[i][0] for i in country_idx], dtype=object)
    region = np.array([COUNTRIES[i][1] for i in country_idx], dtype=object)
    no_address = rng.random(n_real) < MISSING_ADDRESS_SHARE
    country[no_address] = None
    region[no_address] = None

    channel_ids = np.array(list(ACQUISITION_WEIGHTS))
    channel_p = np.array(list(ACQUISITION_WEIGHTS.values()))
    acquisition = rng.choice(channel_ids, size=n_real, p=channel_p / channel_p.sum())

    real = pd.DataFrame(
        {
            "created_at": created_at,
            "first_name": first,
            "last_name": last,
            "email": email,
            "country_code": country,
            "region": region,
            "acquisition_channel_id": acquisition,
        }
    )

    # Internal QA accounts place test orders on production; they must never reach a report.
    test_days = rng.choice(days[:30], size=N_TEST_ACCOUNTS)
    test = pd.DataFrame(
        {
            "created_at": pd.to_datetime(test_days) + pd.to_timedelta(9, unit="h"),
            "first_name": "QA",
            "last_name": [f"Robot {i:02d}" for i in range(1, N_TEST_ACCOUNTS + 1)],
            "email": [f"qa+{i:02d}@shop-internal.test" for i in range(1, N_TEST_ACCOUNTS + 1)],
            "country_code": "US",
            "region": "North America",
            "acquisition_channel_id": 6,
        }
    )

    customers = pd.concat([real, test], ignore_index=True)
    customers = customers.sort_values("created_at", kind="stable").reset_index(drop=True)
    customers.insert(0, "customer_id", np.arange(1, len(customers) + 1, dtype="int64"))
    return customers
