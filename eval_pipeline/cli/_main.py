"""Argument parsing and dispatch for `eval-pipeline`; every error ends in one line and an exit code, never a traceback."""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval_pipeline.cli._exit import ERROR_LOG, ExitCode, report_error
from eval_pipeline.cli._init_command import add_arguments as add_init_arguments
from eval_pipeline.cli._init_command import cmd_init
from eval_pipeline.cli._options import output_file, parse_day, port_number, seconds, suite_root
from eval_pipeline.cli._results_files import (
    add_file_diff_arguments,
    add_summary_arguments,
    cmd_file_diff,
    cmd_summary,
    wants_files,
)
from eval_pipeline.cli._sql import cmd_sql
from eval_pipeline.cli._test_command import add_arguments as add_test_arguments
from eval_pipeline.cli._test_command import cmd_test
from eval_pipeline.cli._ui import cmd_ui
from eval_pipeline.cli._usage import (
    add_promote_arguments,
    add_recommend_arguments,
    add_usage_arguments,
    cmd_promote,
    cmd_recommend,
    cmd_usage,
)
from eval_pipeline.suite import (
    import_csv,
    load_config,
    load_suite,
    printable,
    redact,
    to_model_id,
)


def cmd_list(args: argparse.Namespace) -> int:
    suite = load_suite(suite_root(args))
    cases = suite.select(args.select)
    width = max((len(c.name) for c in cases), default=4)
    print(f"{'test':<{width}}  {'checks':<34}  tags")
    for case in cases:
        checks = ", ".join(case.kinds) or "no verification"
        print(printable(f"{case.name:<{width}}  {checks:<34}  {', '.join(case.tags)}"))
    print(f"\n{len(cases)} test(s) in {suite.cases_dir}")
    return ExitCode.OK


def cmd_import_csv(args: argparse.Namespace) -> int:
    root = suite_root(args)
    written = import_csv(Path(args.file), root, into=args.into or "")
    for path in written:
        print(f"wrote {path.relative_to(root)}")
    print(f"{len(written)} test file(s) imported into {root / 'cases'}")
    return ExitCode.OK


def cmd_import_results(args: argparse.Namespace) -> int:
    """Bring results files (nao's or ours) into the store as the days they were run on."""
    from eval_pipeline.pipeline import import_results
    from eval_pipeline.store import StateFolder

    config = load_config(suite_root(args))
    report = import_results(args.files, layout=StateFolder.of(config))
    for path in report.imported:
        print(printable(f"imported {path}"))
    for path in report.already_imported:
        print(printable(f"already in the store: {path} (nothing added)"))
    for path, why in report.skipped:
        print(printable(f"skipped {path}: {why}"), file=sys.stderr)
    days = ", ".join(day.isoformat() for day in report.days) or "none"
    print(f"{report.runs} run(s) from {len(report.imported)} file(s) imported; days: {days}")
    return ExitCode.USAGE if report.skipped else ExitCode.OK


def cmd_warehouse(args: argparse.Namespace) -> int:
    """Build the suite's warehouse by materializing its dbt assets in the suite's instance."""
    config = load_config(suite_root(args))
    if config.warehouse is None or config.warehouse.dbt_project is None:
        print("the suite configures no dbt project; nothing to build", file=sys.stderr)
        return ExitCode.USAGE
    from eval_pipeline.defs.evaluate import build_warehouse

    if not build_warehouse(config):
        print("the warehouse build failed; see the dbt output above", file=sys.stderr)
        return ExitCode.NOT_RUN
    print(f"warehouse built: {config.warehouse.path}")
    return ExitCode.OK


def _listed(values: Sequence[object], most: int = 10) -> str:
    """`a, b, c` — the first `most`, then how many more (a year of days is no line)."""
    shown = ", ".join(str(v) for v in values[:most]) or "none"
    return shown + (f" and {len(values) - most} more" if len(values) > most else "")


def cmd_diff(args: argparse.Namespace) -> int:
    """Improved / regressed / still failing tests between two days, and those now in error
    (or two results files: `cmd_file_diff`); exit 1 on regressions (an error is none)."""
    if wants_files(args):
        return cmd_file_diff(args)
    for option in ("test", "quiet", "no_fail"):
        if getattr(args, option):
            flag = "--" + option.replace("_", "-")
            print(f"error: {flag} applies to results files (FILE FILE or --last)", file=sys.stderr)
            return ExitCode.USAGE
    from eval_pipeline.pipeline import diff_days, since_previous_day
    from eval_pipeline.store import StateFolder, graded_days, latest_graded_day, models_graded_on

    config = load_config(suite_root(args))
    layout = StateFolder.of(config)
    head = parse_day(args.date) if args.date else latest_graded_day(layout)
    if head is None:
        print("error: no graded results yet; run `eval-pipeline test` first", file=sys.stderr)
        return ExitCode.USAGE
    base = parse_day(args.base, "--base") if args.base else None
    days = graded_days(layout)
    for option, day in (("--date", head), ("--base", base)):
        if day is not None and day not in days:
            print(
                f"error: no results on {day} ({option}); days with results: {_listed(days)}",
                file=sys.stderr,
            )
            return ExitCode.USAGE
    on_head = models_graded_on(layout, head)
    # Either spelling: nao's `openaiCompatible/vllm:qwen3` names our `vllm:qwen3`.
    wanted = list(dict.fromkeys(to_model_id(m) for m in args.model or ()))
    unknown = [m for m in wanted if m not in on_head]
    if unknown:
        print(
            printable(
                f"error: no results for {', '.join(unknown)} on {head}; "
                f"models with results that day: {_listed(on_head)}"
            ),
            file=sys.stderr,
        )
        return ExitCode.USAGE
    models = wanted or on_head
    regressions = 0
    for model in models:
        # Without --base: since the model's previous evaluated day, as the no_regression check.
        diff = (
            diff_days(layout, model, base, head)
            if base
            else since_previous_day(layout, model, head)
        )
        print(
            f"{printable(config.model_label(model))}: {diff.base or 'no earlier day'} → {head}"
            + ("" if diff.base_found or diff.base is None else f" (no results on {diff.base})")
        )
        for label, names in (
            ("regressed", diff.regressed),
            ("improved", diff.improved),
            ("still failing", diff.still_failing),
            # A run now in error says nothing of the agent: named apart, when there is one.
            *((("error", diff.errors),) if diff.errors else ()),
        ):
            print(f"  {label} ({len(names)}): {printable(', '.join(names)) if names else '—'}")
        if diff.base_found:
            print(f"  {diff.paired_line}")
        regressions += len(diff.regressed)
    return ExitCode.FAILED if regressions else ExitCode.OK


def cmd_export(args: argparse.Namespace) -> int:
    """Write a day's results as CSV (spreadsheet-safe)."""
    from eval_pipeline.cli._formats import results_csv
    from eval_pipeline.pipeline import stored_results
    from eval_pipeline.store import StateFolder, latest_graded_day, models_graded_on

    output = output_file(args.output)
    requested = parse_day(args.date) if args.date else None
    suite = load_suite(suite_root(args))
    layout = StateFolder.of(suite.config)
    day = requested or latest_graded_day(layout)
    if day is None:
        print("error: no graded results yet; run `eval-pipeline test` first", file=sys.stderr)
        return ExitCode.USAGE
    models = args.model or models_graded_on(layout, day)
    if args.format == "html":
        from eval_pipeline.viewer import NoResults, render_html_export

        try:
            text = render_html_export(layout, day, models=models)
        except NoResults as error:
            print(f"error: {error}", file=sys.stderr)
            return ExitCode.USAGE
        what = "a self-contained page"
    else:
        names = [c.name for c in suite.cases]
        document, _ = stored_results(layout, models, day, names)
        text = results_csv(document)
        what = f"{len(document.results)} runs"
    text = redact(text)
    if output:
        output.write_text(text, encoding="utf-8")
        print(f"wrote {output} ({what})", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return ExitCode.OK


def cmd_server(args: argparse.Namespace) -> int:
    """Serve the results viewer over the store's whole history."""
    from eval_pipeline.store import StateFolder
    from eval_pipeline.viewer import serve

    config = load_config(suite_root(args))
    try:
        serve(
            StateFolder.of(config),
            host=args.host,
            port=args.port,
            open_browser=not args.no_open,
        )
    except OSError as error:
        print(f"error: cannot serve on {args.host}:{args.port}: {error}", file=sys.stderr)
        return ExitCode.USAGE
    return ExitCode.OK


def cmd_compact(args: argparse.Namespace) -> int:
    """Fold the store's older files into segments, so queries open a few files, not thousands."""
    from eval_pipeline.store import StateFolder, compact_store

    report = compact_store(StateFolder.of(load_config(suite_root(args))))
    print(report.message, file=sys.stdout if report.status != "busy" else sys.stderr)
    return ExitCode.NOT_RUN if report.status == "busy" else ExitCode.OK


def cmd_store(args: argparse.Namespace) -> int:
    """`store check`: read every store file and set damaged ones aside. Exit 1 while a
    partition whose latest file was set aside (now or before) has not been rewritten."""
    from eval_pipeline.store import StateFolder, needs_rerun, quarantine_damaged, quarantined

    layout = StateFolder.of(load_config(suite_root(args)))
    found = quarantine_damaged(layout)
    for damaged in found:
        print(f"damaged: {damaged.describe()}; set aside in {damaged.moved_to}")
    pending = {(d.table, d.partition): d for d in quarantined(layout) if needs_rerun(layout, d)}
    for damaged in pending.values():
        print(f"to rerun: {damaged.table} {damaged.partition or '(whole table)'} ({damaged.file})")
    print(
        f"store check: {len(found)} damaged file(s) found now, {len(pending)} partition(s) to rerun"
    )
    return ExitCode.FAILED if pending else ExitCode.OK


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval-pipeline",
        description="Evaluate AI analytics agents on a suite of unit tests, as Dagster assets in DuckDB.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(
        name: str, handler, help_text: str, *, suite_option: bool = True
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        if suite_option:
            sub.add_argument(
                "--suite",
                metavar="DIR",
                help="the suite folder (default: the current folder if it holds "
                "eval_config.yaml or cases/, else ./tests_suite)",
            )
        sub.add_argument(
            "--debug",
            action="store_true",
            help="on an error that stops the command, show the traceback instead of one line",
        )
        sub.set_defaults(handler=handler)
        return sub

    init = add(
        "init",
        cmd_init,
        "start a suite on a warehouse: a commented eval_config.yaml, a first test, RULES.md",
        suite_option=False,
    )
    add_init_arguments(init)

    listing = add("list", cmd_list, "list the suite's tests with their checks and tags")
    listing.add_argument(
        "-s", "--select", action="append", help="names, file stems or folders, comma-separated"
    )

    importer = add(
        "import-csv", cmd_import_csv, "turn a Calibrate CSV of tests into YAML test files"
    )
    importer.add_argument("file", help="the CSV file")
    importer.add_argument("--into", metavar="FOLDER", help="a subfolder of cases/ to write into")

    results = add(
        "import-results",
        cmd_import_results,
        "bring results files (nao's tests/outputs/results_*.json, or ours) into the store as past days",
    )
    results.add_argument("files", nargs="+", metavar="FILE", help="results files")

    add(
        "warehouse",
        cmd_warehouse,
        "build the suite's warehouse with its dbt project (through Dagster)",
    )

    test = add("test", cmd_test, "run, grade and summarize the suite for one day, through Dagster")
    add_test_arguments(test)

    sql = add(
        "sql",
        cmd_sql,
        "run SQL queries on the results, or with none open a SQL prompt (read-only, no file access)",
    )
    sql.add_argument(
        "query",
        nargs="?",
        help='e.g. "SELECT model, run_date, pass_rate FROM model_summaries"; several, '
        "separated by `;`, run one after the other; a dot-command as at the prompt "
        "(.tables, .help); none: a prompt with history",
    )
    sql.add_argument("--format", choices=("table", "csv", "json"), default="table")
    sql.add_argument("--limit", type=int, default=100, help="rows shown as a table (default 100)")
    sql.add_argument(
        "--timeout",
        type=seconds,
        metavar="SECONDS",
        help="stop a query after this long (default 300)",
    )
    sql.add_argument(
        "--memory-limit",
        metavar="SIZE",
        help="DuckDB memory_limit of the queries (default 2GB)",
    )
    sql.add_argument(
        "--max-temp-size",
        metavar="SIZE",
        help="what a query may spill to disk (DuckDB max_temp_directory_size, default 4GB)",
    )

    add(
        "compact",
        cmd_compact,
        "fold the results written over ten minutes ago into one file per table (faster SQL)",
    )

    store = add("store", cmd_store, "check the results store: list damaged files, set them aside")
    store.add_argument("action", choices=("check",))

    diff = add(
        "diff",
        cmd_diff,
        "tests that improved, regressed or still fail between two days, or two results files",
    )
    diff.add_argument(
        "--base",
        metavar="YYYY-MM-DD",
        help="the earlier day (default: each model's previous evaluated day)",
    )
    diff.add_argument(
        "--date", metavar="YYYY-MM-DD", help="the later day (default: the latest graded)"
    )
    diff.add_argument("--model", action="append", help="only this model (repeatable)")
    add_file_diff_arguments(diff)

    summary = add("summary", cmd_summary, "a results file summed up: totals and one line per model")
    add_summary_arguments(summary)

    export = add(
        "export",
        cmd_export,
        "write a day's results as a spreadsheet-safe CSV or a self-contained HTML page",
    )
    export.add_argument("--format", choices=("csv", "html"), default="csv")
    export.add_argument("--date", metavar="YYYY-MM-DD", help="default: the latest graded day")
    export.add_argument("--model", action="append", help="only this model (repeatable)")
    export.add_argument("-o", "--output", metavar="FILE", help="default: stdout")

    server = add("server", cmd_server, "serve the results viewer (every day in the store)")
    server.add_argument("--port", type=port_number, default=8765)
    server.add_argument(
        "--host", default="127.0.0.1", help="default 127.0.0.1: only this machine can connect"
    )
    server.add_argument("--no-open", action="store_true", help="do not open a browser")

    usage = add(
        "usage",
        cmd_usage,
        "import production conversations (OpenTelemetry GenAI traces, or JSONL) into the store",
    )
    add_usage_arguments(usage)
    recommend = add(
        "recommend",
        cmd_recommend,
        "what production usage says to change: friction clustered, ranked, each naming a file",
    )
    add_recommend_arguments(recommend)
    promote = add(
        "promote", cmd_promote, "draft a test from a recommendation or a conversation, in cases/"
    )
    add_promote_arguments(promote)

    ui = add("ui", cmd_ui, "start the Dagster UI on the project's instance")
    ui.add_argument("--port", type=port_number, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    return parser


def _error_log(args: argparse.Namespace) -> Path | None:
    """Where a stopped command's traceback goes: the suite's `.eval/logs/`, when it is known."""
    try:
        from eval_pipeline.store import StateFolder

        return StateFolder(load_config(suite_root(args)).state_path).logs_dir / ERROR_LOG
    except Exception:  # the configuration itself may be what failed; the caller falls back
        return None


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; its exit code is one of `ExitCode` (README "Exit codes")."""
    parser = build_parser()
    args = parser.parse_args(argv)  # a malformed command line exits 2 here, as argparse does
    interrupted = threading.Event()
    restore = _note_interrupts(interrupted)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Exception as error:
        if interrupted.is_set():
            # Ctrl-C came, and a library turned it into an error of its own (DuckDB's "Query
            # interrupted" when it arrives during a query): the user stopped the command.
            print("interrupted", file=sys.stderr)
            return ExitCode.INTERRUPTED
        if args.debug:
            traceback.print_exc()  # and still the exit code a CI gate reads
        return report_error(error, command=args.command, log=_error_log(args))
    finally:
        restore()


def _note_interrupts(interrupted: threading.Event) -> Callable[[], None]:
    """While the command runs, Ctrl-C still raises KeyboardInterrupt, and is noted in
    `interrupted`; the function that puts Python's own handler back. Nothing is changed
    off the main thread, or when a handler other than Python's is in place."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        return lambda: None

    def noted(number: int, frame: Any) -> None:
        interrupted.set()
        signal.default_int_handler(number, frame)

    signal.signal(signal.SIGINT, noted)
    return lambda: signal.signal(signal.SIGINT, signal.default_int_handler)


def run() -> None:
    """The console script: `main`, then the process ends without tearing the interpreter down.

    Once a command has returned, its files are closed, its locks released and its output
    written; what is left is Python freeing every module's objects one by one, which with
    Dagster, pandas and DuckDB loaded takes 1–2 s on a 2-core machine for nothing. The exit
    handlers still run (logging's flush, temporary files), then the standard streams are
    flushed and the process exits with the command's code. While a thread that is not a
    daemon is still alive, the interpreter's usual exit waits for it instead, unless the
    command was interrupted: Ctrl-C does not wait for a model's answer to end.
    """
    code = main()
    main_thread = threading.main_thread()
    waiting = any(t is not main_thread and not t.daemon for t in threading.enumerate())
    if waiting and code != ExitCode.INTERRUPTED:
        sys.exit(code)
    # What the interpreter's own exit calls first (CPython has no public name for it).
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        # A reader that left (`| head`), a closed stream: nothing more to write to.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    run()
