"""Partitions: results are kept per model (a dynamic dimension) and per day."""

from collections.abc import Sequence

import dagster as dg

HISTORY_START = "2025-01-01"

models_partitions = dg.DynamicPartitionsDefinition(name="models")
# end_offset=1: today's partition exists today, so a morning run evaluates today.
daily_partitions = dg.DailyPartitionsDefinition(start_date=HISTORY_START, end_offset=1)
model_day_partitions = dg.MultiPartitionsDefinition(
    {"date": daily_partitions, "model": models_partitions}
)


def model_day_key(model: str, day: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"model": model, "date": day})


def add_models(instance: dg.DagsterInstance, models: Sequence[str]) -> None:
    """Make sure the models' partitions exist, also when another evaluation adds them at the
    same moment (the instance then refuses the second insert of a partition)."""
    known = set(instance.get_dynamic_partitions(models_partitions.name))
    missing = [m for m in models if m not in known]
    if not missing:
        return
    try:
        instance.add_dynamic_partitions(models_partitions.name, missing)
    except Exception:
        known = set(instance.get_dynamic_partitions(models_partitions.name))
        if any(m not in known for m in missing):
            raise
