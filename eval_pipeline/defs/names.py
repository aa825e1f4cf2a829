"""The names one suite's definitions take in Dagster: asset keys, groups, jobs, schedules, sensors, resources and the models partitions, prefixed when the suite has a name."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property

import dagster as dg

# What Dagster accepts in an asset key part, a job and a resource key alike.
_VALID = re.compile(r"^[A-Za-z0-9_]+$")


@dataclass(frozen=True)
class SuiteNames:
    """How a suite's definitions are named, so several suites (and a team's own assets)
    merge into one code location without a clash.

    Unnamed (`SuiteNames()`, the CLI and the repository's own code location) every name is
    the bare one (`agent_runs`, `suite`, `models`, `evaluate_model_day`): the instance's
    history is recorded under these. Named `sales`: asset keys `sales/agent_runs`, groups
    `sales_evaluation`, jobs, schedules and sensors `sales__evaluate_model_day`, resource
    keys `sales_suite`, partitions `sales_models`.
    """

    name: str | None = None

    def __post_init__(self) -> None:
        if self.name is not None and not _VALID.match(self.name):
            raise ValueError(
                f"suite name {self.name!r}: use letters, digits and underscores only "
                "(it prefixes asset keys, jobs and resource keys)"
            )

    def key(self, asset: str | Sequence[str]) -> dg.AssetKey:
        """The asset key of one of the suite's assets, by its bare name or path."""
        return self.prefixed(dg.AssetKey(asset))

    def prefixed(self, key: dg.AssetKey) -> dg.AssetKey:
        """A key as the suite names it (a dbt model's `warehouse/orders`: `sales/warehouse/orders`)."""
        return key if self.name is None else key.with_prefix(self.name)

    def group(self, group: str) -> str:
        # Prefixed, not shared: a group selection (the history marts' schedule) must never
        # reach another suite's assets, and the UI shows each suite's stages apart.
        return group if self.name is None else f"{self.name}_{group}"

    def scoped(self, name: str) -> str:
        """A job's, schedule's, sensor's or op's name."""
        return name if self.name is None else f"{self.name}__{name}"

    def resource(self, key: str) -> str:
        """A resource key (`suite`, `dbt`, `history_dbt`): a team's own `dbt` merges beside it."""
        return key if self.name is None else f"{self.name}_{key}"

    @cached_property
    def models_partitions(self) -> dg.DynamicPartitionsDefinition:
        """The dynamic partitions of the models under test; the instance knows them by name."""
        return dg.DynamicPartitionsDefinition(name=self.resource("models"))


#: The names of the CLI's definitions and of the repository's code location.
UNNAMED = SuiteNames()
