"""`eval-pipeline test`: evaluate through the pipeline, show progress and tables, write files, gate CI."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
from datetime import date
from pathlib import Path
from typing import get_args

from eval_pipeline.agents import check_models, check_secrets, recording_name
from eval_pipeline.cli._exit import CouldNotRun, ExitCode
from eval_pipeline.cli._formats import junit_xml
from eval_pipeline.cli._options import output_file, parse_day, suite_root
from eval_pipeline.cli._preflight import check_warehouse
from eval_pipeline.cli._progress import Progress
from eval_pipeline.cli._render import plain_console, print_report, report_console
from eval_pipeline.pipeline import (
    EvaluationRequest,
    EvaluationResult,
    LastEvaluation,
    RunChanges,
    accuracy_gate,
    build_results,
    check_day,
    instance_home,
    label_models,
    plan_requests,
    read_run_rows,
    since_previous_run,
    subscribe,
    today,
    ungraded_rows,
    write_results_file,
)
from eval_pipeline.store import StoreLayout
from eval_pipeline.suite import (
    MAX_ATTEMPTS,
    Problem,
    Suite,
    SuiteError,
    ThresholdMode,
    load_suite,
    to_model_id,
)

#: Judge samples per run are paid LLM calls each: a bound against a typo such as 100.
MAX_REJUDGE_SAMPLES = 20


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m",
        "--model",
        action="append",
        dest="models",
        metavar="MODEL",
        help="provider:model_id (or nao's spelling, e.g. openaiCompatible/vllm:qwen3), "
        "http:<agent> or replay:<recording>; repeat to compare (default: test.models)",
    )
    parser.add_argument(
        "-t",
        "--threads",
        type=int,
        metavar="N",
        help="runs in flight at once (default: test.threads)",
    )
    parser.add_argument(
        "-s",
        "--select",
        action="append",
        metavar="TESTS",
        help="test names, file stems or folders, comma-separated (default: all)",
    )
    parser.add_argument(
        "-k",
        type=int,
        metavar="K",
        help="attempts per test and model, for pass@k (default: test.k)",
    )
    parser.add_argument(
        "--date", metavar="YYYY-MM-DD", help="the day the results belong to (default: today, UTC)"
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="run every test afresh instead of reusing unchanged runs",
    )
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="ask the judge and extraction model again instead of using their cached answers",
    )
    parser.add_argument(
        "--rejudge-samples",
        type=int,
        default=1,
        metavar="J",
        help="judge each run with judged checks J times in all, and report the judge's "
        "self-agreement per test beside the agent's flakiness (default: 1, once)",
    )
    parser.add_argument(
        "--record",
        action="store_true",
        help="record real model exchanges to recordings/<model>.jsonl",
    )
    parser.add_argument(
        "--format",
        choices=("pretty", "json", "junit"),
        default="pretty",
        help="what goes to stdout",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the chosen format to FILE instead of stdout"
    )
    parser.add_argument(
        "--min-accuracy",
        type=float,
        metavar="X",
        help="pass when accuracy ≥ X (0-1) instead of requiring every run to pass",
    )
    parser.add_argument(
        "--threshold-mode",
        choices=get_args(ThresholdMode),
        help="average of the tests' accuracies, or every test (default: test.threshold_mode)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines; tables and summary only"
    )
    parser.add_argument(
        "--failures-only",
        action="store_true",
        help="the pretty report lists only the runs that did not pass (the summary counts all)",
    )


def _run_date(text: str | None) -> date:
    return today() if text is None else parse_day(text)


def _request(suite: Suite, args: argparse.Namespace) -> EvaluationRequest:
    settings = suite.config.test
    problems = []
    if args.threads is not None and args.threads < 1:
        problems.append(Problem("--threads", None, "expected at least 1"))
    if args.k is not None and not 1 <= args.k <= MAX_ATTEMPTS:
        problems.append(Problem("-k", None, f"expected an integer from 1 to {MAX_ATTEMPTS}"))
    if not 1 <= args.rejudge_samples <= MAX_REJUDGE_SAMPLES:
        problems.append(
            Problem(
                "--rejudge-samples", None, f"expected an integer from 1 to {MAX_REJUDGE_SAMPLES}"
            )
        )
    if args.min_accuracy is not None and not 0 <= args.min_accuracy <= 1:
        problems.append(Problem("--min-accuracy", None, "expected a fraction between 0 and 1"))
    if problems:
        raise SuiteError(problems, headline="bad option")
    # nao's spelling (`openaiCompatible/vllm:qwen3`) names the same model as ours (`vllm:qwen3`).
    given = (m.strip() for m in (args.models or settings.models))
    models = tuple(dict.fromkeys(to_model_id(m) for m in given if m))
    check_models(suite.config, models, source="--model", require_one=True)
    check_secrets(suite.config, models, source="--model" if args.models else "test.models")
    select = tuple(args.select or ())
    # An unknown name stops here, listing the tests; evaluating nothing is never a pass.
    if not suite.select(list(select) or None):
        raise SuiteError(
            [Problem(str(suite.cases_dir), None, "no test to evaluate; add a test file")],
            headline="nothing to evaluate",
        )
    return EvaluationRequest(
        models=models,
        run_date=_run_date(args.date),
        select=select,
        k=args.k,
        threads=args.threads,
        no_cache=args.no_cache,
        record=args.record,
        rejudge=args.rejudge,
        rejudge_samples=args.rejudge_samples,
    )


def _changes(layout: StoreLayout, models, day: date, names) -> dict[str, RunChanges]:
    """Per model: the tests whose verdict changed since its previous run, and why."""
    changes = {}
    for model in models:
        found = since_previous_run(layout, model, day, names)
        if found is not None:
            changes[model] = found
    return changes


def replayed_judge_warning(judge_model: str | None, models) -> str | None:
    """A recorded judge answers only the judge requests it recorded: with a live model under
    test, its judged checks can only end as errors. Said once, before anything runs."""
    if judge_model is None or recording_name(judge_model) is None:
        return None
    live = [m for m in models if recording_name(m) is None]
    if not live:
        return None
    return (
        f"warning: the judge {judge_model} is a recording; it answers only the requests it "
        f"recorded, so the judged checks of {', '.join(live)} will be errors ('no recording "
        "for this request'). Set test.judge_model to a live model to grade them."
    )


def _quiet_dagster() -> None:
    # Dagster's own event log goes to the UI; on a terminal it would bury the results.
    for name in ("dagster", "dagster_dbt"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _dialects(suite: Suite):
    """A test's database name → its SQL dialect (`duckdb`, `postgres`, `mysql`)."""

    def dialect(name: str | None) -> str | None:
        database = suite.config.database(name)
        return database.type if database is not None else None

    return dialect


def _emit(text: str, output: Path | None) -> None:
    if output:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def _run_pipeline(suite: Suite, request: EvaluationRequest, progress: Progress) -> EvaluationResult:
    # Dagster and the definitions take a second or more to import: only when something runs,
    # so `list`, `sql`, `diff`, an unchanged rerun and every usage error answer without.
    from eval_pipeline.defs.evaluate import EvaluationFailed, run_evaluation

    _quiet_dagster()
    unsubscribe = subscribe(progress)
    try:
        # Nothing but the report may reach stdout: stray prints go to stderr.
        with contextlib.redirect_stdout(sys.stderr):
            return run_evaluation(suite, request, on_stage=progress.stage)
    except EvaluationFailed as error:  # the machinery, not the agent: exit 3
        raise CouldNotRun(str(error), details=error.details) from error
    finally:
        unsubscribe()


def cmd_test(args: argparse.Namespace) -> int:
    """Evaluate, report, write the results file; exit 0/1 by the tests or the accuracy gate."""
    output = output_file(args.output)
    suite = load_suite(suite_root(args))
    request = _request(suite, args)
    settings = suite.config.test
    # Progress goes to stderr whenever stdout carries a document (json, junit, or -o FILE).
    machine = args.format != "pretty" or args.output
    progress_console = plain_console(stderr=bool(machine))
    # Whether it is a terminal is decided now: while a Dagster step runs, its log capture puts
    # a pipe on the console's file, and a console asking then drops the cursor codes that
    # keep each run line off the live status line (they ended up glued to it).
    progress_console = plain_console(
        stderr=bool(machine), force_terminal=progress_console.is_terminal
    )
    selected = suite.select(list(request.select) or None)
    warnings = check_warehouse(suite, selected)
    warnings.insert(0, replayed_judge_warning(settings.judge_model, request.models))
    for warning in filter(None, warnings):
        plain_console(stderr=True).print(warning, markup=False, highlight=False, soft_wrap=True)
    check_day(request.run_date)
    names = [c.name for c in selected]
    k = request.k or settings.k
    planned = [
        (m, r.case.name, r.attempt)
        for m in request.models
        for r in plan_requests(selected, m, request.run_date, "", k=k)
    ]
    total = len(planned)
    with Progress(progress_console, total, quiet=args.quiet) as progress:
        # Nothing changed since the last complete evaluation (the inputs, the store's files of
        # the day): it would run nothing and write nothing, so the results come from the store
        # without starting Dagster.
        reused = LastEvaluation(suite, request, instance_home(suite.config)).reused()
        if reused is not None:
            progress.stage(
                f"nothing changed since the last evaluation of {request.run_date.isoformat()}: "
                f"{reused} stored run(s) reused, no Dagster run"
            )
            evaluated = EvaluationResult(reused=reused)
        else:
            evaluated = _run_pipeline(suite, request, progress)

    layout = StoreLayout.of(suite.config)
    rows = read_run_rows(layout, request.models, request.run_date, names)
    if not rows:  # evaluating nothing is never a pass
        raise CouldNotRun(f"no graded run of this evaluation was found in {layout.root}")
    # Exactly the planned runs: one the store holds no grade of is an error, never left out.
    rows += ungraded_rows(rows, planned, request.run_date)
    document = build_results(
        rows, request.models, names, request.run_date, dialect=_dialects(suite)
    )
    threshold = args.min_accuracy if args.min_accuracy is not None else settings.min_accuracy
    mode = args.threshold_mode or settings.threshold_mode
    accuracies = {
        f"{m['name']} [{m['model']}]": m["pass_at_1"] for m in document["pass_metrics_by_test"]
    }
    gate = accuracy_gate(accuracies, threshold, mode)
    document["executed_runs"], document["reused_runs"] = evaluated.executed, evaluated.reused
    document["threshold"] = {
        "min_accuracy": threshold,
        "mode": mode,
        "accuracy": gate.accuracy,
        "passed": gate.passed,
    }
    # The file and the JSON name models as the user spelled them (nao's `model`); the
    # tables keep our ids, which the gate and the change lines are keyed by.
    spelled = label_models(document, suite.config.model_label)
    path = write_results_file(spelled, suite.config.results_dir)

    if args.format == "json":
        _emit(json.dumps(spelled, indent=2, default=str, ensure_ascii=False) + "\n", output)
    elif args.format == "junit":
        _emit(junit_xml(document), output)
    else:
        changes = _changes(layout, request.models, request.run_date, names)
        report = report_console(io.StringIO() if args.output else None)
        print_report(
            report,
            document,
            request.models,
            changes=changes,
            executed=evaluated.executed,
            reused=evaluated.reused,
            answerer_changed=evaluated.answerer_changed,
            failures_only=args.failures_only,
            judge_noise=args.rejudge_samples > 1,
        )
        if output:
            _emit(report.file.getvalue(), output)
    # soft_wrap: never fold a path (or a list of tests) across lines in a log or a pipe.
    progress_console.print(
        f"results written to {path}", highlight=False, markup=False, soft_wrap=True
    )

    if threshold is not None:
        # The verdict (and, in `all` mode, the tests below the bar) is a diagnostic, as in
        # oxy: stderr, even when stdout carries the pretty report. Not markup: the tests are
        # named "name [model]", which rich would swallow as a style tag.
        plain_console(stderr=True).print(
            gate.message, highlight=False, markup=False, soft_wrap=True
        )
    # The gate decides, with or without a minimum: the file's `threshold.passed` is the exit.
    return ExitCode.OK if gate.passed else ExitCode.FAILED
