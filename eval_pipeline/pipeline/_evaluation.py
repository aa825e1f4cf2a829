"""What an evaluation is asked for and what it did: plain values the Dagster layer runs and the CLI shows."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date


@dataclass(frozen=True)
class EvaluationRequest:
    """What an evaluation asks for, with the config's defaults already applied."""

    models: tuple[str, ...]
    run_date: date
    select: tuple[str, ...] = ()
    k: int | None = None
    threads: int | None = None
    no_cache: bool = False
    record: bool = False
    rejudge: bool = False
    #: Judge each run with judged checks this many times (`--rejudge-samples`); 1: once.
    rejudge_samples: int = 1


@dataclass
class EvaluationResult:
    """What an evaluation did: runs executed and reused (over every model), and the Dagster
    run of each model's evaluation, in the order of the request's models."""

    executed: int = 0
    reused: int = 0
    run_ids: list[str] = field(default_factory=list)
