"""One evaluation of a suite, end to end: what `eval-pipeline test` does between its options and its report.

`evaluate` plans the runs of the request, runs what changed (or answers from the store when
nothing did), reads the graded runs back, builds the results document, decides the gate and
writes the results file. What runs the stages is handed in (`Runner`): the CLI's runs them in
its own process (`run_stages`) and has their Dagster record written after.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from eval_pipeline.agents import require_secrets
from eval_pipeline.pipeline._budget import spend_budget
from eval_pipeline.pipeline._dagster_home import instance_home
from eval_pipeline.pipeline._document import ResultsDocument, Threshold
from eval_pipeline.pipeline._evaluation import (
    EvaluationRequest,
    EvaluationResult,
    Runner,
    require_day,
)
from eval_pipeline.pipeline._gates import (
    AccuracyGate,
    RunChanges,
    accuracy_gate,
    since_previous_run,
)
from eval_pipeline.pipeline._results import (
    stored_results,
    write_results_file,
)
from eval_pipeline.pipeline._runs import plan_requests
from eval_pipeline.pipeline._spellings import store_spellings
from eval_pipeline.pipeline._unchanged import LastEvaluation
from eval_pipeline.store import (
    DamagedFile,
    StateFolder,
    awaiting_rerun,
    ensure_schema_files,
    one_connection,
    quarantine_day,
)
from eval_pipeline.suite import Suite, ThresholdMode


class NothingGraded(RuntimeError):
    """The store holds no graded run of the evaluation: evaluating nothing is never a pass."""


@dataclass(frozen=True)
class Evaluation:
    """What one evaluation produced. Nothing changes it once `evaluate` returns it.

    `document` names the models by our ids (the gate and the change lines are keyed by
    them); `labelled` is the same document with the models as the user spelled them
    (`EvaluationRequest.model_label`), as the results file, `--format json` and the pretty
    report give it.
    """

    request: EvaluationRequest
    names: tuple[str, ...]
    document: ResultsDocument
    labelled: ResultsDocument
    gate: AccuracyGate
    ran: EvaluationResult
    results_file: Path
    layout: StateFolder

    def changes(self) -> dict[str, RunChanges]:
        """Per model: the tests whose verdict changed since its previous run, and why."""
        with one_connection(self.layout):
            found = {
                model: since_previous_run(self.layout, model, self.request.run_date, self.names)
                for model in self.request.models
            }
        return {model: change for model, change in found.items() if change is not None}


def planned_attempts(suite: Suite, request: EvaluationRequest) -> list[tuple[str, str, int]]:
    """(model, test, attempt) of every run the request plans, in report order."""
    selected = suite.select(list(request.select) or None)
    k = request.k or suite.config.test.k
    return [
        (model, planned.case.name, planned.attempt)
        for model in request.models
        for planned in plan_requests(
            selected, model, request.run_date, "", k=k, attempts=request.attempts_of(model)
        )
    ]


def _sending(runner: Runner, models_from: str) -> Runner:
    """`runner`, which may send requests, refused before it starts when a secret a model (or
    the judge) needs is not in the environment: the only way to the runner, so a rerun that
    sends nothing (nothing changed) needs no secret."""

    def run(
        suite: Suite, request: EvaluationRequest, on_stage: Callable[[str], None]
    ) -> EvaluationResult:
        label = partial(request.model_label, fallback=suite.config.model_label)
        require_secrets(suite.config, request.models, source=models_from, label=label)
        return runner(suite, request, on_stage)

    return run


def evaluate(
    suite: Suite,
    request: EvaluationRequest,
    *,
    runner: Runner,
    on_stage: Callable[[str], None] = lambda _line: None,
    min_accuracy: float | None = None,
    threshold_mode: ThresholdMode | None = None,
    allow_errors: bool | None = None,
    models_from: str = "--model",
) -> Evaluation:
    """Evaluate `request` on `suite` and write its results file.

    What runs again is decided in one place per level: the whole command here (nothing
    changed since the last complete evaluation: `LastEvaluation`, the results then come from
    the store and `runner` is not called); each model's partition and each run inside the
    runner's stages, by their inputs' data versions and the stored runs they may reuse.

    Args:
        runner: runs the stages (see `Runner`).
        on_stage: one line per stage, for progress.
        min_accuracy, threshold_mode, allow_errors: the gate's, when given; else the suite's
            `test:` ones.
        models_from: where the models were given (`--model`, `test.models`), for the
            message of a missing secret.

    Raises:
        NothingGraded: no graded run of the evaluation is stored.
        MissingSecret: something must be sent and a secret it needs is not set (nothing
            was run).
        SuiteError: a `--date` that cannot hold results.
    """
    require_day(request.run_date)
    runner = _sending(runner, models_from)
    settings = suite.config.test
    names = tuple(case.name for case in suite.select(list(request.select) or None))
    budget = None
    if request.budget is not None:
        # Rounds of runs, each one an evaluation that skips what did not change.
        request, ran, budget = spend_budget(suite, request, runner, on_stage)
    elif (
        # Only read: a command stopped before anything runs (a missing secret) leaves no
        # instance behind.
        reused := LastEvaluation(suite, request, instance_home(suite.config, create=False)).reused()
    ) is not None:
        on_stage(
            f"nothing changed since the last evaluation of {request.run_date.isoformat()}: "
            f"{reused} stored run(s) reused, no Dagster run"
        )
        ran = EvaluationResult(reused=reused)
    else:
        ran = runner(suite, request, on_stage)
    planned = planned_attempts(suite, request)

    layout = StateFolder.of(suite.config)
    ensure_schema_files(layout)  # a runner that stopped before its first write left none
    label = partial(request.model_label, fallback=suite.config.model_label)
    # A damaged file of the day is set aside before anything reads it back, even a table no
    # query below reads (the report's, the summaries').
    quarantine_day(layout, request.run_date, request.models)

    def build() -> tuple[ResultsDocument, int]:
        """The document of the stored runs and the planned runs missing from them (an
        error each, never left out); how many were stored."""
        with one_connection(layout):
            built = stored_results(
                layout,
                request.models,
                request.run_date,
                names,
                dialect=_dialects(suite),
                planned=planned,
            )
            store_spellings(layout, request.models, label)
        return built

    built, stored = build()
    if damaged := awaiting_rerun(layout, run_date=request.run_date, models=request.models):
        # Reading the results set aside a damaged file of the day (named as it was): its
        # partitions are evaluated again, which rebuilds what it held from what is left.
        on_stage(f"rebuilding what {_files(damaged)} held")
        ran = ran.then(runner(suite, request, on_stage))
        built, stored = build()
    if not stored:
        raise NothingGraded(f"no graded run of this evaluation was found in {layout.root}")
    threshold = min_accuracy if min_accuracy is not None else settings.min_accuracy
    mode = threshold_mode or settings.threshold_mode
    accuracies = {f"{m.name} [{m.model}]": m.pass_at_1 for m in built.pass_metrics_by_test}
    gate = accuracy_gate(
        accuracies,
        threshold,
        mode,
        errored={f"{m.name} [{m.model}]": m.errors for m in built.pass_metrics_by_test},
        allow_errors=settings.allow_errors if allow_errors is None else allow_errors,
    )
    document = built.with_evaluation(
        executed_runs=ran.executed,
        reused_runs=ran.reused,
        # The gate decides, with or without a minimum: `passed` is the command's exit (1
        # when not, 3 when error runs failed it: `errors` and not `allow_errors`).
        threshold=Threshold(
            min_accuracy=threshold,
            mode=mode,
            accuracy=gate.accuracy,
            passed=gate.passed,
            errors=gate.errors,
            allow_errors=gate.allow_errors,
        ),
        budget=budget,
    )
    labelled = document.labelled(label)
    return Evaluation(
        request=request,
        names=names,
        document=document,
        labelled=labelled,
        gate=gate,
        ran=ran,
        results_file=write_results_file(labelled, suite.config.results_dir),
        layout=layout,
    )


def _files(damaged: list[DamagedFile]) -> str:
    """ "the damaged model_summaries file of replay:good", for a line of progress."""
    tables = sorted({d.table for d in damaged})
    return f"the damaged {', '.join(tables)} file{'s' if len(damaged) > 1 else ''}"


def _dialects(suite: Suite) -> Callable[[str | None], str | None]:
    """A test's database name → its SQL dialect (`duckdb`, `postgres`, `mysql`)."""

    def dialect(name: str | None) -> str | None:
        database = suite.config.database(name)
        return database.type if database is not None else None

    return dialect
