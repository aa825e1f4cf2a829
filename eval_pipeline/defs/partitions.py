"""Partitions: results are kept per model (a dynamic dimension) and per day."""

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
