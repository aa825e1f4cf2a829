"""Argument parsing and dispatch for `eval-pipeline`; user mistakes exit 2 with a message, never a traceback."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from eval_pipeline.cli._instance import DAGSTER_HOME_ENV, instance_home
from eval_pipeline.suite import SuiteError, find_suite_root, import_csv, load_config, load_suite

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _suite_root(args: argparse.Namespace) -> Path:
    return Path(args.suite).resolve() if args.suite else find_suite_root()


def cmd_list(args: argparse.Namespace) -> int:
    suite = load_suite(_suite_root(args))
    cases = suite.select(args.select)
    width = max((len(c.name) for c in cases), default=4)
    print(f"{'test':<{width}}  {'checks':<34}  tags")
    for case in cases:
        checks = ", ".join(case.kinds) or "no verification"
        print(f"{case.name:<{width}}  {checks:<34}  {', '.join(case.tags)}")
    print(f"\n{len(cases)} test(s) in {suite.cases_dir}")
    return EXIT_OK


def cmd_import_csv(args: argparse.Namespace) -> int:
    root = _suite_root(args)
    written = import_csv(Path(args.file), root, into=args.into or "")
    for path in written:
        print(f"wrote {path.relative_to(root)}")
    print(f"{len(written)} test file(s) imported into {root / 'cases'}")
    return EXIT_OK


def cmd_warehouse(args: argparse.Namespace) -> int:
    """Build the suite's warehouse by materializing its dbt assets in the project's instance."""
    import dagster as dg

    from eval_pipeline.defs import WAREHOUSE_JOB, build_definitions

    config = load_config(_suite_root(args))
    if config.warehouse is None or config.warehouse.dbt_project is None:
        print("the suite configures no dbt project; nothing to build", file=sys.stderr)
        return EXIT_USAGE
    os.environ[DAGSTER_HOME_ENV] = str(instance_home(config))
    job = build_definitions(config.root).get_job_def(WAREHOUSE_JOB)
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(instance=instance, raise_on_error=False)
    if not result.success:
        print("the warehouse build failed; see the dbt output above", file=sys.stderr)
        return EXIT_FAILED
    print(f"warehouse built: {config.warehouse.path}")
    return EXIT_OK


def cmd_ui(args: argparse.Namespace) -> int:
    """Start the Dagster UI on the instance the command line writes to."""
    config = load_config(_suite_root(args))
    env = dict(os.environ, DAGSTER_HOME=str(instance_home(config)), EVAL_SUITE_DIR=str(config.root))
    command = [
        "dagster",
        "dev",
        "-m",
        "eval_pipeline.definitions",
        "-p",
        str(args.port),
        "-h",
        args.host,
    ]
    print(
        f"Dagster UI on http://{args.host}:{args.port} (instance {env['DAGSTER_HOME']})",
        file=sys.stderr,
    )
    return subprocess.call(command, env=env)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="eval-pipeline",
        description="Evaluate AI analytics agents on a suite of unit tests, as Dagster assets in DuckDB.",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, handler, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument(
            "--suite",
            metavar="DIR",
            help="the suite folder (default: the current folder if it holds eval_config.yaml, else ./tests_suite)",
        )
        sub.set_defaults(handler=handler)
        return sub

    listing = add("list", cmd_list, "list the suite's tests with their checks and tags")
    listing.add_argument(
        "-s", "--select", action="append", help="names, file stems or folders, comma-separated"
    )

    importer = add(
        "import-csv", cmd_import_csv, "turn a Calibrate CSV of tests into YAML test files"
    )
    importer.add_argument("file", help="the CSV file")
    importer.add_argument("--into", metavar="FOLDER", help="a subfolder of cases/ to write into")

    add(
        "warehouse",
        cmd_warehouse,
        "build the suite's warehouse with its dbt project (through Dagster)",
    )

    ui = add("ui", cmd_ui, "start the Dagster UI on the project's instance")
    ui.add_argument("--port", type=int, default=3000)
    ui.add_argument("--host", default="127.0.0.1")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except SuiteError as error:
        print(f"error: {error.render()}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
