"""`eval-pipeline test`: evaluate through the pipeline, show progress and tables, write files, gate CI."""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import date
from functools import partial
from pathlib import Path
from typing import get_args

from eval_pipeline.agents import (
    NAO_PASSWORD_VARIABLE,
    NAO_USERNAME_VARIABLE,
    recording_name,
    require_models,
)
from eval_pipeline.cli._exit import CouldNotRun, ExitCode
from eval_pipeline.cli._formats import junit_xml
from eval_pipeline.cli._options import output_file, parse_day, suite_root
from eval_pipeline.cli._preflight import warehouse_warnings
from eval_pipeline.cli._progress import Progress
from eval_pipeline.cli._render import (
    FULL_REPORT_MAX_RUNS,
    plain_console,
    print_report,
    report_console,
)
from eval_pipeline.cli._run_details import print_verbose
from eval_pipeline.pipeline import (
    AccuracyGate,
    EvaluationRequest,
    EvaluationSession,
    NothingGraded,
    StageFailed,
    today,
)
from eval_pipeline.suite import (
    MAX_ATTEMPTS,
    MAX_BUDGET_RUNS,
    AttemptBudget,
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
        "http:<agent>, nao:<provider>:<model_id> (nao's own agent, on its backend) or "
        "replay:<recording>; repeat to compare (default: test.models)",
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
        "--budget",
        type=int,
        metavar="RUNS",
        help="an attempt budget instead of -k: each test once per model, then further attempts "
        "where the answer is still open, until it is decided or RUNS runs are spent "
        "(default: test.budget)",
    )
    parser.add_argument(
        "--budget-usd",
        type=float,
        metavar="USD",
        help="the same budget in dollars, for models with known prices",
    )
    parser.add_argument(
        "--decide",
        choices=("compare", "pass-rate"),
        help="what the budget decides: which model is better (each pair; the default with "
        "several models) or each model's pass rate within --width (the default with one)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        metavar="A",
        help="the budget's error rate over all its decisions, anytime-valid (default: 0.05)",
    )
    parser.add_argument(
        "--width",
        type=float,
        metavar="W",
        help="--decide pass-rate: the width each model's interval must reach (default: 0.2)",
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
        "--allow-errors",
        action="store_true",
        default=None,
        help="count runs that ended in an error (provider, agent endpoint, timeout, judge) as "
        "not passed and let the gate decide 0 or 1; by default any error run exits 3 "
        "(default: test.allow_errors)",
    )
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress lines; tables and summary only"
    )
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="before the tables, each run as `nao test` prints it: prompt, start of the reply, "
        "tool calls, tokens, cost, time, verification SQL, verdict and the differing rows",
    )
    # nao's flags: the account `nao:` models sign in to nao's backend with.
    parser.add_argument(
        "-u",
        "--username",
        metavar="EMAIL",
        help=f"the account nao's backend signs `nao:` runs in with (default: ${NAO_USERNAME_VARIABLE})",
    )
    parser.add_argument(
        "--password",
        metavar="PASSWORD",
        help=f"its password (default: ${NAO_PASSWORD_VARIABLE})",
    )
    parser.add_argument(
        "--failures-only",
        action="store_true",
        help="the pretty report lists only the runs that did not pass (the summary counts all)",
    )
    parser.add_argument(
        "--all-runs",
        action="store_true",
        help=f"the pretty report lists every run even past {FULL_REPORT_MAX_RUNS} runs (by "
        "default a larger run lists only the runs that did not pass)",
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
    budget = _budget(settings.budget, args, problems)
    if problems:
        raise SuiteError(problems, headline="bad option")
    # The account of nao's backend lives in this process's environment only, where the `nao:`
    # agent reads it (as `nao test` falls back to it): never in the request, which Dagster
    # records, nor in any file.
    for value, variable in (
        (args.username, NAO_USERNAME_VARIABLE),
        (args.password, NAO_PASSWORD_VARIABLE),
    ):
        if value:
            os.environ[variable] = value
    # nao's spelling (`openaiCompatible/vllm:qwen3`) names the same model as ours (`vllm:qwen3`).
    given = [m.strip() for m in (args.models or settings.models) if m.strip()]
    models = tuple(dict.fromkeys(to_model_id(m) for m in given))
    # What the report and the results file call a model: as the user gave it.
    spellings = tuple({to_model_id(m): m for m in given if to_model_id(m) != m}.items())
    require_models(suite.config, models, source="--model", require_one=True)
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
        recording=args.record,
        rejudge=args.rejudge,
        rejudge_samples=args.rejudge_samples,
        spellings=spellings,
        budget=budget,
    )


def _budget(
    configured: AttemptBudget | None, args: argparse.Namespace, problems: list[Problem]
) -> AttemptBudget | None:
    """The attempt budget: the command line's over `test.budget`; None for `k` attempts."""
    if args.budget is not None and not 1 <= args.budget <= MAX_BUDGET_RUNS:
        problems.append(
            Problem("--budget", None, f"expected a number of runs from 1 to {MAX_BUDGET_RUNS:,}")
        )
    if args.budget_usd is not None and not (math.isfinite(args.budget_usd) and args.budget_usd > 0):
        problems.append(Problem("--budget-usd", None, "expected a positive number of dollars"))
    for option, value in (("--alpha", args.alpha), ("--width", args.width)):
        if value is not None and not 0 < value < 1:
            problems.append(Problem(option, None, "expected a fraction between 0 and 1"))
    given = args.budget is not None or args.budget_usd is not None
    budget = AttemptBudget(runs=args.budget, usd=args.budget_usd) if given else configured
    tuning = [
        option
        for option, value in (
            ("--decide", args.decide),
            ("--alpha", args.alpha),
            ("--width", args.width),
        )
        if value is not None
    ]
    if budget is None:
        if tuning:
            problems.append(
                Problem(tuning[0], None, "applies to an attempt budget: add --budget RUNS")
            )
        return None
    if args.k is not None:
        problems.append(
            Problem("-k", None, "an attempt budget decides the attempts: give -k or --budget")
        )
    return replace(
        budget,
        question=(args.decide.replace("-", "_") if args.decide else budget.question),
        alpha=args.alpha if args.alpha is not None else budget.alpha,
        width=args.width if args.width is not None else budget.width,
    )


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


def _emit(text: str, output: Path | None) -> None:
    if output:
        output.write_text(text, encoding="utf-8")
    else:
        sys.stdout.write(text)


class _Dagster:
    """The Dagster side of the command's evaluation (`pipeline.Orchestrator`), imported only
    where it is used: Dagster and dagster-dbt take seconds to import."""

    def build_missing_warehouse(self, config, on_stage: Callable[[str], None]) -> None:
        from eval_pipeline.defs.evaluate import EvaluationFailed, build_missing_warehouse

        _quiet_dagster()
        try:
            build_missing_warehouse(config, on_stage)
        except EvaluationFailed as error:
            raise StageFailed(str(error), details=error.details) from error

    def ready_to_record(self, home: Path, suite_root: Path, day: date) -> Callable[[], int]:
        from eval_pipeline.defs.record import ready_to_record

        return ready_to_record(home, suite_root, day)


def cmd_test(args: argparse.Namespace) -> int:
    """Evaluate, report, write the results file; exit 0/1 by the tests or the accuracy gate,
    3 when the evaluation could not run."""
    suite = load_suite(suite_root(args))
    request = _request(suite, args)
    # Opened before the status line's thread starts: the session forks the model workers
    # and the Dagster recorder, from a process whose only thread is its main one.
    session = EvaluationSession(suite, request, _Dagster())
    try:
        with session:
            return _evaluate_and_report(args, session)
    finally:
        for warning in session.warnings:
            print(f"warning: {warning}", file=sys.stderr)


def _evaluate_and_report(args: argparse.Namespace, session: EvaluationSession) -> int:
    output = output_file(args.output)
    suite, request = session.suite, session.request
    # Progress goes to stderr whenever stdout carries a document (json, junit, or -o FILE).
    machine = args.format != "pretty" or args.output
    progress_console = plain_console(stderr=bool(machine))
    # Whether it is a terminal is decided now: while a Dagster step runs, its log capture puts
    # a pipe on the console's file, and a console asking then drops the cursor codes that
    # keep each run line off the live status line (they ended up glued to it).
    progress_console = plain_console(
        stderr=bool(machine), force_terminal=progress_console.is_terminal
    )
    warnings = warehouse_warnings(suite, suite.select(list(request.select) or None))
    warnings.insert(0, replayed_judge_warning(suite.config.test.judge_model, request.models))
    for warning in filter(None, warnings):
        plain_console(stderr=True).print(warning, markup=False, highlight=False, soft_wrap=True)
    # A model as the user spelled it, everywhere it is shown (the store keeps our ids).
    label = partial(request.model_label, fallback=suite.config.model_label)
    with Progress(
        progress_console, session.planned_runs, quiet=args.quiet, label=label
    ) as progress:
        try:
            evaluation = session.evaluate(
                on_stage=progress.stage,
                on_result=progress,
                min_accuracy=args.min_accuracy,
                threshold_mode=args.threshold_mode,
                allow_errors=args.allow_errors,
                # Secrets are checked there, only when something is to be sent.
                models_from="--model" if args.models else "test.models",
            )
        except NothingGraded as error:
            raise CouldNotRun(str(error)) from error
        except StageFailed as error:  # the machinery, not the agent: exit 3
            raise CouldNotRun(str(error), details=error.details) from error
    gate = evaluation.gate

    if args.format == "json":
        labelled = evaluation.labelled.to_json()
        _emit(json.dumps(labelled, indent=2, default=str, ensure_ascii=False) + "\n", output)
    elif args.format == "junit":
        _emit(junit_xml(evaluation.labelled), output)
    else:
        changes = evaluation.changes()
        report = report_console(io.StringIO() if args.output else None)
        if args.verbose and not args.quiet:
            prompts = {case.name: case.prompt for case in suite.cases}
            print_verbose(report, evaluation.labelled, prompts)
        print_report(
            report,
            evaluation.labelled,
            [label(model) for model in request.models],
            changes={label(model): change for model, change in changes.items()},
            label=label,
            executed=evaluation.ran.executed,
            reused=evaluation.ran.reused,
            reruns=evaluation.ran.reruns,
            regraded=evaluation.ran.regraded,
            failures_only=args.failures_only,
            all_runs=args.all_runs,
            judge_noise=args.rejudge_samples > 1,
        )
        if output:
            _emit(report.file.getvalue(), output)
    for notice in evaluation.ran.notices:
        progress_console.print(f"note: {notice}", highlight=False, markup=False, soft_wrap=True)
    # soft_wrap: never fold a path (or a list of tests) across lines in a log or a pipe.
    progress_console.print(
        f"results written to {evaluation.results_file}",
        highlight=False,
        markup=False,
        soft_wrap=True,
    )

    if gate.threshold is not None or gate.errors:
        # The verdict (and, in `all` mode, the tests below the bar) is a diagnostic, as in
        # oxy: stderr, even when stdout carries the pretty report. Not markup: the tests are
        # named "name [model]", which rich would swallow as a style tag.
        plain_console(stderr=True).print(
            gate_line(gate), highlight=False, markup=False, soft_wrap=True
        )
    # The gate decides, with or without a minimum: the file's `threshold.passed` is the exit,
    # and an error run that failed it is a broken run, not a wrong answer.
    if gate.incomplete:
        return ExitCode.NOT_RUN
    return ExitCode.OK if gate.passed else ExitCode.FAILED


def gate_line(gate: AccuracyGate) -> str:
    """The gate's verdict on stderr, with what to do when error runs failed it."""
    if gate.incomplete:
        return (
            f"error: {gate.message}; exit 3. Fix what the errors say and run again "
            "(unchanged runs are reused), or count them as not passed with --allow-errors"
        )
    return gate.message
