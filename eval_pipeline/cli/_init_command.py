"""`eval-pipeline init`: start a suite on a warehouse, say what was written and the next command."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from eval_pipeline.cli._exit import ExitCode
from eval_pipeline.pipeline import NewSuite, start_suite
from eval_pipeline.suite import ENVIRONMENT_KEYS, engine_named


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # `dest="suite"`: an error's log goes to the new suite's .eval/logs/, as for other commands.
    parser.add_argument(
        "suite",
        nargs="?",
        default=".",
        metavar="DIR",
        help="the new suite's folder (default: the current folder; created if missing)",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--warehouse",
        metavar="FILE",
        help="a DuckDB file (default: the one *.duckdb file in DIR)",
    )
    where.add_argument(
        "--url",
        metavar="URL",
        help="a server: postgresql://user:password@host:port/dbname or mysql://…; a password "
        "is not written: the config reads the URL from WAREHOUSE_URL",
    )


def cmd_init(args: argparse.Namespace) -> int:
    """Start a suite in DIR; exit 2, naming the file, when DIR is a suite already."""
    started = start_suite(
        Path(args.suite),
        warehouse=Path(args.warehouse) if args.warehouse else None,
        url=args.url,
    )
    for action, name in started.written:
        print(f"{action} {name}")
    print(_warehouse_line(started))
    count = started.reference.rows[0][0] if started.reference.rows else None
    print(
        f"first test: {started.test_file}; its reference SQL ran read-only on the warehouse "
        f"(row_count = {count})"
    )
    print(f"suite started in {started.root}\n\nnext:")
    for line in _next_commands(started):
        print(f"  {line}")
    return ExitCode.OK


def _warehouse_line(started: NewSuite) -> str:
    database = started.database
    label = engine_named(database.type).label
    shown = ", ".join(started.tables[:5]) + (", …" if len(started.tables) > 5 else "")
    tables = f"{len(started.tables)} table(s): {shown}"
    if database.path is not None:
        return f"warehouse: {database.path} ({label}, {tables})"
    assert database.url is not None
    where = (
        f"URL read from {started.url_variable}, password kept out of the file"
        if started.url_variable
        else database.url.template
    )
    return f"warehouse: {label} server, {where} ({tables})"


def _next_commands(started: NewSuite) -> list[str]:
    lines = []
    provider = started.models.models[0].partition(":")[0]
    key = ENVIRONMENT_KEYS.get(provider)
    if key and not os.environ.get(key):
        lines.append(f"export {key}=...")
    if started.url_variable:
        lines.append(f"export {started.url_variable}='<the URL you gave, password included>'")
    here = Path.cwd().resolve()
    if started.root == here:
        lines.append("eval-pipeline test")
    else:
        folder = os.path.relpath(started.root, here) if started.root.is_relative_to(here) else None
        lines.append(f"cd {shlex.quote(folder or str(started.root))} && eval-pipeline test")
    return lines
