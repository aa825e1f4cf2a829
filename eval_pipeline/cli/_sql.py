"""`eval-pipeline sql`: read-only queries on the results, given as an argument or typed at a read-only SQL prompt."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import duckdb

from eval_pipeline.cli._exit import ExitCode
from eval_pipeline.cli._options import suite_root
from eval_pipeline.suite import load_config, printable

HISTORY_FILE = "sql_history"
HISTORY_LENGTH = 1000
HELP = """Statements end with `;` and may span lines; several run one after the other. Only
reading statements run (SELECT, DESCRIBE, SUMMARIZE, EXPLAIN); nothing can be changed and no
file outside the store read.
  .tables   the tables and views       .help   this text       .quit (or Ctrl-D)   leave"""
QUIT = (".quit", ".exit", ".q")


def read_rows(layout, sql: str, *, fmt: str, limit: int, limits=None):
    """(columns, rows, row count) of one read-only query, as `print_rows` prints them: a
    table shows `limit` rows, so only those are fetched (`head_read_only`); CSV and JSON
    print every row."""
    from eval_pipeline.store import fetch_read_only, head_read_only

    if fmt == "table":
        return head_read_only(layout, sql, limit, limits)
    columns, rows = fetch_read_only(layout, sql, limits)
    return columns, rows, len(rows)


def print_rows(
    columns: Sequence[str],
    rows: Sequence[tuple],
    *,
    fmt: str,
    limit: int,
    row_count: int | None = None,
) -> None:
    """A query's result on stdout as a table (the first `limit` rows, of `row_count` when
    only those were fetched), CSV or JSON."""
    from eval_pipeline.cli._formats import csv_text
    from eval_pipeline.sandbox import to_json_safe

    if fmt == "csv":
        sys.stdout.write(csv_text(columns, rows))
    elif fmt == "json":
        records = [dict(zip(columns, map(to_json_safe, row), strict=True)) for row in rows]
        sys.stdout.write(json.dumps(records, indent=2, ensure_ascii=False) + "\n")
    else:
        from rich.table import Table
        from rich.text import Text

        from eval_pipeline.cli._render import report_console

        # Text, not markup strings: stored agent replies may hold "[/x]" or ":a:"; and
        # printable: or an escape sequence.
        table = Table()
        for column in columns:
            table.add_column(Text(printable(column)))
        for row in rows[:limit]:
            table.add_row(
                *(Text("NULL" if v is None else printable(str(v), lines=True)) for v in row)
            )
        report_console().print(table)
        total = len(rows) if row_count is None else row_count
        if total > limit:
            print(f"({total:,} rows, {limit:,} shown; --limit N or --format csv for all)")


def read_limits(args: argparse.Namespace):
    """The bounds of each query, from `--timeout`, `--memory-limit` and `--max-temp-size`."""
    from eval_pipeline.store import ReadLimits

    given = {
        "timeout_s": args.timeout,
        "memory_limit": args.memory_limit,
        "max_temp_size": args.max_temp_size,
    }
    return ReadLimits(**{key: value for key, value in given.items() if value is not None})


def cmd_sql(args: argparse.Namespace) -> int:
    """Run the SQL given on the results (read-only), as the prompt runs what is typed, and
    print each result; no SQL: the prompt. Exit 2 when a statement failed or was refused.
    Ctrl-C stops the query: exit 130, as for any command."""
    from eval_pipeline.store import StateFolder

    layout = StateFolder.of(load_config(suite_root(args)))
    limits = read_limits(args)
    if args.query is None:
        return sql_prompt(layout, fmt=args.format, limit=args.limit, limits=limits)
    if args.query.strip() in QUIT:
        return ExitCode.OK  # what it asks for at the prompt: nothing more runs
    ran = run_input(layout, args.query, fmt=args.format, limit=args.limit, limits=limits)
    return ExitCode.OK if ran else ExitCode.USAGE


def _fail(message: str) -> bool:
    print(f"error: {printable(message.strip(), lines=True)}", file=sys.stderr)
    return False


def run_input(layout, text: str, *, fmt: str, limit: int, limits=None) -> bool:
    """Run a dot-command, or each statement of `text` one after the other, printing each
    result; a statement that fails, is refused or is too slow says why and the next one
    runs. False when one did not run. What the command line and the prompt run alike.

    The statements are told apart by DuckDB's own parser (a `;` in a string or a comment
    splits nothing), and each is handed to the store's sandbox alone, which parses it
    again and runs it only if it is one reading statement: several never run as one.

    Raises:
        KeyboardInterrupt: Ctrl-C while a statement ran.
    """
    from eval_pipeline.store import TABLE_LISTING, NotReadOnly, QueryTooSlow

    command = text.strip()
    if command == ".help":
        print(HELP)
        return True
    if command.startswith("."):
        if command != ".tables":
            return _fail(f"unknown command {command.split()[0]}; .help lists them")
        statements = [TABLE_LISTING]
    else:
        try:
            statements = [s.query.strip() for s in duckdb.extract_statements(text)]
        except duckdb.Error as error:
            return _fail(str(error))
        if not statements:
            return _fail("no SQL statement given; .help says what runs here")
    ran = True
    for statement in statements:
        try:
            columns, rows, count = read_rows(
                layout, statement.rstrip("; \n"), fmt=fmt, limit=limit, limits=limits
            )
        except (duckdb.Error, NotReadOnly, QueryTooSlow) as error:
            ran = _fail(str(error))
            continue
        print_rows(columns, rows, fmt=fmt, limit=limit, row_count=count)
        sys.stdout.flush()
    return ran


def _statements(interactive: bool) -> Iterator[str]:
    """Statements as typed: lines gathered until one ends with `;`, a dot-command alone.
    Ctrl-C drops what is being typed; Ctrl-D (or the end of piped input) ends."""
    pending: list[str] = []
    while True:
        prompt = ("   ...> " if pending else "results> ") if interactive else ""
        try:
            line = input(prompt)
        except KeyboardInterrupt:
            print()
            pending.clear()
            continue
        except EOFError:
            if interactive:
                print()
            if "".join(pending).strip():
                yield "\n".join(pending)
            return
        if not pending and line.strip().startswith("."):
            yield line.strip()
            continue
        pending.append(line)
        if line.rstrip().endswith(";"):
            statement = "\n".join(pending).strip()
            pending.clear()
            if statement.strip("; \n"):
                yield statement


@contextlib.contextmanager
def _history(path: Path, interactive: bool) -> Iterator[None]:
    """Line editing and the history of earlier sessions (arrow up), kept beside the store's
    logs. Without a terminal (piped input) there is nothing to edit or remember."""
    readline = None
    if interactive:
        with contextlib.suppress(ImportError):  # not on every platform (Windows)
            import readline
    if readline is not None:
        with contextlib.suppress(OSError):
            readline.read_history_file(path)
        readline.set_history_length(HISTORY_LENGTH)
    try:
        yield
    finally:
        if readline is not None:
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                readline.write_history_file(path)


def sql_prompt(layout, *, fmt: str, limit: int, limits=None) -> int:
    """Read statements from the terminal (or piped input) and run each read-only, as
    `eval-pipeline sql "…"` does (`run_input`); a refused, failing or too slow statement
    says why and the prompt goes on, and so does one stopped by Ctrl-C."""
    interactive = sys.stdin.isatty()
    if interactive:
        print(f"Read-only SQL on {layout.root / 'results.duckdb'}'s tables.\n{HELP}")
    failed = False
    with _history(layout.logs_dir / HISTORY_FILE, interactive):
        for statement in _statements(interactive):
            if statement in QUIT:
                break
            try:
                failed |= not run_input(layout, statement, fmt=fmt, limit=limit, limits=limits)
            except KeyboardInterrupt:
                if not interactive:
                    raise  # a script stops: exit 130
                print("interrupted", file=sys.stderr)
    # A script piped in fails (exit 2) when a statement did; a person at the prompt saw it.
    return ExitCode.USAGE if failed and not interactive else ExitCode.OK
