"""What an evaluation is asked for, what runs its stages (`Runner`) and what it did: plain values the Dagster layer runs and the CLI shows."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Protocol

from eval_pipeline.pipeline._rerun_causes import merge_regraded
from eval_pipeline.suite import AttemptBudget, Problem, Suite, SuiteError


@dataclass(frozen=True)
class EvaluationRequest:
    """What an evaluation asks for, with the config's defaults already applied."""

    models: tuple[str, ...]
    run_date: date
    select: tuple[str, ...] = ()
    k: int | None = None
    threads: int | None = None
    no_cache: bool = False
    recording: bool = False
    rejudge: bool = False
    #: Judge each run with judged checks this many times (`--rejudge-samples`); 1: once.
    rejudge_samples: int = 1
    #: (our id, as the user gave it) of each model given with `-m` in another spelling
    #: (nao's `openaiCompatible/vllm:qwen3` for our `vllm:qwen3`): what the report and the
    #: results file call it. The store keeps our ids.
    spellings: tuple[tuple[str, str], ...] = ()
    #: An attempt budget in place of `k` (`--budget`, `--budget-usd`, `test: budget:`).
    budget: AttemptBudget | None = None
    #: (model, test, attempts) where an attempt budget gives a test more attempts than `k`;
    #: set by the budget's rounds (`pipeline/_budget.py`), never by the user.
    attempts: tuple[tuple[str, str, int], ...] = ()
    #: Which of an attempt budget's rounds this is (0: not one). A later round of the same
    #: command reads the suite's inputs and runs the references no more: the first did, and
    #: the suite the command loaded is the one every round grades.
    budget_round: int = 0

    def attempts_of(self, model: str) -> dict[str, int]:
        """Test name → its attempts for `model`, where the budget gave it more than `k`."""
        return {test: n for m, test, n in self.attempts if m == model}

    def model_label(self, model_id: str, fallback: Callable[[str], str] = str) -> str:
        """The model as the user spelled it: with `-m`, else as `fallback` (the config's
        `model_label`) names it."""
        return dict(self.spellings).get(model_id) or fallback(model_id)


@dataclass
class EvaluationResult:
    """What an evaluation did: runs executed and reused (over every model), and the Dagster
    run of each model's evaluation, in the order of the request's models."""

    executed: int = 0
    reused: int = 0
    #: of the executed, runs the store held made again, by cause (`RerunCauses`): cause → runs
    reruns: dict[str, int] = field(default_factory=dict)
    #: stored runs graded again, by cause (`regrade_causes`): cause → [runs, verdicts moved]
    regraded: dict[str, list[int]] = field(default_factory=dict)
    run_ids: list[str] = field(default_factory=list)
    #: what the user should know of the instance beside the results (runs stuck in a queue)
    notices: list[str] = field(default_factory=list)

    def add_causes(self, reruns: Mapping[str, int], regraded: Mapping[str, Sequence[int]]) -> None:
        """Count runs made again and runs graded again, by cause, in."""
        for cause, runs in reruns.items():
            self.reruns[cause] = self.reruns.get(cause, 0) + runs
        merge_regraded(self.regraded, regraded)

    def then(self, later: EvaluationResult) -> EvaluationResult:
        """What this evaluation and a later one of the same request did together: the later
        one reused the runs this one executed, which count as executed, once."""
        together = EvaluationResult(
            executed=self.executed + later.executed,
            reused=max(0, later.reused - self.executed),
            run_ids=[*self.run_ids, *later.run_ids],
            notices=[*self.notices, *later.notices],
        )
        together.add_causes(self.reruns, self.regraded)
        together.add_causes(later.reruns, later.regraded)
        return together


class Runner(Protocol):
    """Runs the stages of an evaluation (`run_stages`, for the CLI) and says what they did;
    `on_stage` receives one line per stage as it starts."""

    def __call__(
        self, suite: Suite, request: EvaluationRequest, on_stage: Callable[[str], None]
    ) -> EvaluationResult: ...


def today() -> date:
    """The last day that can be evaluated, and the default one: today, UTC (the daily
    partitions' clock)."""
    return datetime.now(UTC).date()


#: The first day that can be evaluated or imported: before it, a day is a typo (year 1 would
#: make the daily partitions 739,000 keys long).
FIRST_DAY = date(2000, 1, 1)


def day_problem(run_date: date) -> str | None:
    """Why `run_date` cannot hold results (after today, UTC, or before `FIRST_DAY`), or None.
    An earlier day than the history's first is fine: its evaluation extends the daily
    partitions back to it (the store then holds it, `history_start`)."""
    last = today()
    if run_date > last:
        return (
            f"{run_date.isoformat()} is in the future; the last day that can be evaluated is "
            f"today, {last.isoformat()} (UTC)"
        )
    if run_date < FIRST_DAY:
        return (
            f"{run_date.isoformat()} is before {FIRST_DAY.isoformat()}, the first day that can "
            "be evaluated"
        )
    return None


def require_day(run_date: date) -> None:
    """Refuse a `--date` that cannot hold results (`day_problem`)."""
    problem = day_problem(run_date)
    if problem:
        raise SuiteError([Problem("--date", None, problem)], headline="bad option; nothing was run")
