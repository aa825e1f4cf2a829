"""Partitions: results are kept per model (a dynamic dimension) and per day, from where the history starts."""

import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import dagster as dg

from eval_pipeline.defs.names import UNNAMED, SuiteNames
from eval_pipeline.pipeline import first_evaluated_day, today
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import SuiteConfig

# Dagster tags the run of a MultiPartitionKey with its own `dagster/partition/<dimension>`
# keys and then warns that they are not compliant (two slashes); no code of ours sets them.
warnings.filterwarnings(
    "ignore",
    message=r"Non-compliant tag keys like \['dagster/partition/",
    category=DeprecationWarning,
)

models_partitions = UNNAMED.models_partitions


@dataclass(frozen=True)
class DayPartitions:
    """The daily partitions of a suite and the model × day grid over them."""

    daily: dg.DailyPartitionsDefinition
    model_day: dg.MultiPartitionsDefinition


def day_partitions(start: date, names: SuiteNames = UNNAMED) -> DayPartitions:
    # end_offset=1: today's partition exists today, so a morning run evaluates today.
    daily = dg.DailyPartitionsDefinition(start_date=start.isoformat(), end_offset=1)
    return DayPartitions(
        daily=daily,
        model_day=dg.MultiPartitionsDefinition({"date": daily, "model": names.models_partitions}),
    )


def history_start(config: SuiteConfig) -> date:
    """The first daily partition: `test.start_date`, else the day of the suite's first
    evaluation, else today; moved back to an earlier evaluated day, so the UI shows no
    partition before the history begins and every evaluated day has one."""
    first = first_evaluated_day(StateFolder.of(config))
    days = [config.test.start_date or first or today(), first]
    return min(day for day in days if day is not None)


def model_day_key(model: str, day: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model, "date": day})


def add_models(
    instance: dg.DagsterInstance, models: Sequence[str], names: SuiteNames = UNNAMED
) -> None:
    """Make sure the models' partitions exist, also when another evaluation adds them at the
    same moment (the instance then refuses the second insert of a partition)."""
    partitions = names.models_partitions.name
    known = set(instance.get_dynamic_partitions(partitions))
    missing = [m for m in models if m not in known]
    if not missing:
        return
    try:
        instance.add_dynamic_partitions(partitions, missing)
    except Exception:
        known = set(instance.get_dynamic_partitions(partitions))
        if any(m not in known for m in missing):
            raise


with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.BetaWarning)  # stable in practice; only the name is beta
    #: A (model, day) asset's dependency on a day's asset: the same date.
    BY_DATE = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="date")
    #: A (model, day) asset's dependency on a per-model input (its settings): the same model.
    BY_MODEL = dg.MultiToSingleDimensionPartitionMapping(partition_dimension_name="model")
