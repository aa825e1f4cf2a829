"""`eval-pipeline test`: evaluate through the pipeline, show progress and tables, write files, gate CI."""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import logging
import sys
from datetime import UTC, date, datetime
from pathlib import Path

from rich.console import Console

from eval_pipeline.cli._evaluate import EvaluationRequest, check_models, run_evaluation
from eval_pipeline.cli._formats import junit_xml
from eval_pipeline.cli._render import Progress, print_report, report_console
from eval_pipeline.cli._results import (
    build_results,
    previous_statuses,
    read_run_rows,
    write_results_file,
)
from eval_pipeline.pipeline import plan_requests, subscribe
from eval_pipeline.pipeline._gates import accuracy_gate
from eval_pipeline.store import StoreLayout, query
from eval_pipeline.suite import MAX_ATTEMPTS, Problem, Suite, SuiteError, load_suite

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-m",
        "--model",
        action="append",
        dest="models",
        metavar="MODEL",
        help="provider:model_id, http:<agent> or replay:<recording>; repeat to compare (default: test.models)",
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
        choices=("average", "all"),
        help="average of the tests' accuracies, or every test (default: test.threshold_mode)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines; tables and summary only"
    )


def _run_date(text: str | None) -> date:
    if text is None:
        return datetime.now(UTC).date()
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise SuiteError(
            [Problem("--date", None, f"expected YYYY-MM-DD, got {text!r}")], headline="bad option"
        ) from None


def _request(suite: Suite, args: argparse.Namespace) -> EvaluationRequest:
    settings = suite.config.test
    problems = []
    if args.threads is not None and args.threads < 1:
        problems.append(Problem("--threads", None, "expected at least 1"))
    if args.k is not None and not 1 <= args.k <= MAX_ATTEMPTS:
        problems.append(Problem("-k", None, f"expected an integer from 1 to {MAX_ATTEMPTS}"))
    if args.min_accuracy is not None and not 0 <= args.min_accuracy <= 1:
        problems.append(Problem("--min-accuracy", None, "expected a fraction between 0 and 1"))
    if problems:
        raise SuiteError(problems, headline="bad option")
    models = tuple(dict.fromkeys(m.strip() for m in (args.models or settings.models) if m.strip()))
    check_models(suite, models)
    select = tuple(args.select or ())
    suite.select(list(select) or None)  # an unknown name stops here, listing the tests
    return EvaluationRequest(
        models=models,
        run_date=_run_date(args.date),
        select=select,
        k=args.k,
        threads=args.threads,
        no_cache=args.no_cache,
        record=args.record,
    )


def _changes(
    layout: StoreLayout, models, day: date, names
) -> dict[str, tuple[list[str], list[str]]]:
    changes = {}
    for model in models:
        frame = query(
            layout,
            "SELECT name, bool_and(passed) AS passed, max(written_at) AS at FROM grades "
            "WHERE model = ? AND run_date = ? GROUP BY name",
            [model, day],
        )
        if frame.empty:
            continue
        before = previous_statuses(layout, model, frame["at"].min().to_pydatetime())
        now = dict(zip(frame["name"], frame["passed"].astype(bool), strict=True))
        shared = [n for n in names if n in now and n in before]
        changes[model] = (
            [n for n in shared if before[n] and not now[n]],
            [n for n in shared if not before[n] and now[n]],
        )
    return changes


def _quiet_dagster() -> None:
    # Dagster's own event log goes to the UI; on a terminal it would bury the results.
    for name in ("dagster", "dagster_dbt"):
        logging.getLogger(name).setLevel(logging.WARNING)


def _emit(text: str, output: str | None) -> None:
    if output:
        Path(output).write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


def cmd_test(args: argparse.Namespace, suite_root: Path) -> int:
    suite = load_suite(suite_root)
    request = _request(suite, args)
    settings = suite.config.test
    # Progress goes to stderr whenever stdout carries a document (json, junit, or -o FILE).
    machine = args.format != "pretty" or args.output
    progress_console = Console(stderr=True) if machine else Console()
    selected = suite.select(list(request.select) or None)
    names = [c.name for c in selected]
    k = request.k or settings.k
    total = sum(len(plan_requests(selected, m, request.run_date, "", k=k)) for m in request.models)
    _quiet_dagster()
    with Progress(progress_console, total, quiet=args.quiet) as progress:
        unsubscribe = subscribe(progress)
        try:
            # Nothing but the report may reach stdout: stray prints go to stderr.
            with contextlib.redirect_stdout(sys.stderr):
                outcome = run_evaluation(suite, request, on_stage=progress.stage)
        finally:
            unsubscribe()

    layout = StoreLayout(suite.config.state_path)
    rows = read_run_rows(layout, request.models, request.run_date, names)
    document = build_results(rows, request.models, names, request.run_date)
    threshold = args.min_accuracy if args.min_accuracy is not None else settings.min_accuracy
    mode = args.threshold_mode or settings.threshold_mode
    accuracies = {f"{m['name']} [{m['model']}]": m["pass_at_1"] for m in document["pass_metrics"]}
    gate = accuracy_gate(accuracies, threshold, mode)
    document["executed_runs"], document["reused_runs"] = outcome.executed, outcome.reused
    document["threshold"] = {
        "min_accuracy": threshold,
        "mode": mode,
        "accuracy": gate.accuracy,
        "passed": gate.passed,
    }
    path = write_results_file(document, suite.root)

    if args.format == "json":
        _emit(json.dumps(document, indent=2, default=str, ensure_ascii=False) + "\n", args.output)
    elif args.format == "junit":
        _emit(junit_xml(document), args.output)
    else:
        changes = _changes(layout, request.models, request.run_date, names)
        report = report_console(io.StringIO() if args.output else None)
        print_report(
            report,
            document,
            request.models,
            changes=changes,
            executed=outcome.executed,
            reused=outcome.reused,
        )
        if args.output:
            _emit(report.file.getvalue(), args.output)
    # soft_wrap: never fold a path (or a list of tests) across lines in a log or a pipe.
    progress_console.print(
        f"results written to {path}", highlight=False, markup=False, soft_wrap=True
    )

    if threshold is not None:
        # The verdict (and, in `all` mode, the tests below the bar) is a diagnostic, as in
        # oxy: stderr, even when stdout carries the pretty report. Not markup: the tests are
        # named "name [model]", which rich would swallow as a style tag.
        Console(stderr=True).print(gate.message, highlight=False, markup=False, soft_wrap=True)
        return EXIT_OK if gate.passed else EXIT_FAILED
    return EXIT_OK if document["summary"]["passed"] == document["summary"]["total"] else EXIT_FAILED
