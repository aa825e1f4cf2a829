"""The beta-binomial mixture behind both anytime-valid statistics of attempt budgets (Robbins 1970)."""

from __future__ import annotations

import math

PRIOR = 0.5
"""Symmetric Beta(a, a) mixing prior of every test martingale: Jeffreys' a = ½.

Chosen by simulation (the first crossing time of E ≥ 20 and ≥ 60 over win shares 0.65–1.0):
real agent differences come mostly from tests one model passes and the other fails, win
shares near 1, where a = ½ decides one to two discordant pairs sooner than a = 1; at a share
of 0.75 it is within 5% of a = 1, and a = ¼ gains little at the top and loses in the middle.
"""


def log_beta(x: float, y: float) -> float:
    return math.lgamma(x) + math.lgamma(y) - math.lgamma(x + y)
