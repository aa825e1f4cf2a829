"""The stage graph on the Dagster side: each stage asset's key, partitions and the stage assets it depends on, read from `pipeline.STAGES` (an asset's module adds only what is no stage: the suite's observed files, the warehouse's models)."""

from dataclasses import dataclass

import dagster as dg

from eval_pipeline.defs.names import SuiteNames
from eval_pipeline.defs.partitions import BY_DATE, DayPartitions
from eval_pipeline.pipeline import stage


@dataclass(frozen=True)
class StageGraph:
    """The declared stages of one suite, keyed by its names and partitioned over its days."""

    partitions: DayPartitions
    names: SuiteNames

    def key(self, asset: str) -> dg.AssetKey:
        return self.names.key(asset)

    def partitions_def(self, asset: str) -> dg.PartitionsDefinition | None:
        """The partitions of `asset`'s stage: none, daily, or model × day."""
        partitioning = stage(asset).partitioning
        if partitioning == "day":
            return self.partitions.daily
        if partitioning == "model_day":
            return self.partitions.model_day
        return None

    def deps(self, asset: str, *also: dg.AssetKey | dg.AssetsDefinition) -> list[dg.AssetDep]:
        """What `asset` depends on: the stages its stage reads (a model's day reads the day's
        partition of a daily stage and the reverse, `BY_DATE`), then `also`."""
        reader = stage(asset)
        deps = []
        for read in reader.reads:
            across = {reader.partitioning, stage(read).partitioning} == {"day", "model_day"}
            deps.append(dg.AssetDep(self.key(read), partition_mapping=BY_DATE if across else None))
        return [*deps, *(dg.AssetDep(other) for other in also)]
