"""`eval-pipeline diff FILE FILE | --last` and `eval-pipeline summary`: results files compared and summed up, as nao's `test diff` / `test summary`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eval_pipeline.cli._exit import ExitCode
from eval_pipeline.cli._options import suite_root
from eval_pipeline.pipeline import (
    BY_RULES,
    CHANGES,
    REGRESSION,
    PairChange,
    ResultsFileError,
    compare_results,
    count_changes,
    latest_results_files,
    results_entries,
    summarize_results,
)
from eval_pipeline.suite import load_config, printable


def add_file_diff_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "files",
        nargs="*",
        metavar="FILE",
        help="two results files, before and after (nao's or ours): compare them instead of "
        "two stored days",
    )
    parser.add_argument(
        "--last",
        action="store_true",
        help="compare the two results files written last in the suite's results folder",
    )
    parser.add_argument("--test", help="with files: only this test")
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="with files: only the summary line"
    )
    parser.add_argument(
        "--no-fail", action="store_true", help="with files: exit 0 even on a regression"
    )


def wants_files(args: argparse.Namespace) -> bool:
    return bool(args.files or args.last)


def _usage(message: str) -> int:
    print(f"error: {printable(message)}", file=sys.stderr)
    return ExitCode.USAGE


def _plural(count: int, word: str, plural: str) -> str:
    return f"{count} {word if count == 1 else plural}"


def _summary_line(counts: dict[str, int]) -> str:
    """nao's line, and the tests now in error after it when there are some."""
    parts = [
        _plural(counts["regression"], "regression", "regressions"),
        _plural(counts["fix"], "fix", "fixes"),
        f"{counts['unchanged']} unchanged",
        f"{counts['added']} added",
        f"{counts['removed']} removed",
    ]
    if counts["error"]:
        parts.append(_plural(counts["error"], "error", "errors"))
    if counts[BY_RULES]:
        parts.append(f"{counts[BY_RULES]} {BY_RULES}")
    return ", ".join(parts)


#: A test's outcome in a file, as the diff shows it (`-`: the file has no run of it).
_SHOWN = {"passed": "PASS", "failed": "FAIL", "error": "ERROR", None: "-"}


def _change_text(pair: PairChange) -> str:
    """The pair's change, naming the other grader of a change the grading rules made."""
    if pair.change == BY_RULES:
        return f"{BY_RULES} ({pair.other_rules})"
    return pair.change


def cmd_file_diff(args: argparse.Namespace) -> int:
    """Each (test, model) of two results files: regression, error, changed by grading rules,
    fix, unchanged, added or removed; exit 1 on a regression unless --no-fail (an error is
    none: its run says nothing of the agent, and `eval-pipeline test` exits 3 on it; nor is a
    verdict that changed between nao's grading and ours: the rules differ, not the agent)."""
    if args.base or args.date:
        return _usage("--base and --date compare stored days; give them without files")
    if args.last and args.files:
        return _usage("give two results files or --last, not both")
    if args.last:
        folder = load_config(suite_root(args)).results_dir
        files = latest_results_files(folder, 2)
        if not files:
            return _usage(f"--last needs two results files in {folder}; run `eval-pipeline test`")
    elif len(args.files) != 2:
        return _usage(f"give two results files, before and after (got {len(args.files)})")
    else:
        files = [Path(f) for f in args.files]
    try:
        before, after = (results_entries(path) for path in files)
    except ResultsFileError as error:
        return _usage(str(error))
    pairs = [
        pair
        for pair in compare_results(before, after)
        if (not args.model or any(pair.names(m) for m in args.model))
        and (args.test is None or pair.test == args.test)
    ]
    counts = count_changes(pairs)
    if not args.quiet:
        # The files' names and text are the files' authors': shown as `printable` makes them.
        print(printable(f"{files[0]} → {files[1]}"))
        if not pairs:
            print("no test matches the filters")
        test_width = max((len(printable(p.test)) for p in pairs), default=4)
        model_width = max((len(printable(p.model)) for p in pairs), default=5)
        # As wide as the outcomes shown: a diff with no error keeps nao's columns.
        width = max((len(_SHOWN[o]) for p in pairs for o in (p.before, p.after)), default=4)
        for pair in sorted(pairs, key=lambda p: (CHANGES.index(p.change), p.test, p.model)):
            print(
                f"  {printable(pair.test):<{test_width}}  {printable(pair.model):<{model_width}}  "
                f"{_SHOWN[pair.before]:>{width}} → {_SHOWN[pair.after]:<{width}}  "
                f"{printable(_change_text(pair))}"
            )
    print(f"Summary: {_summary_line(counts)}")
    return ExitCode.FAILED if counts[REGRESSION] and not args.no_fail else ExitCode.OK


def add_summary_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-f",
        "--file",
        metavar="FILE",
        help="a results file, nao's or ours (default: the one written last in the suite's "
        "results folder)",
    )
    parser.add_argument("--json", action="store_true", help="the summary as JSON")


def _failed_text(counts: dict) -> str:
    """`2 failed`, or `1 failed, 1 error(s)`: a run that ended in an error is counted apart,
    as `eval-pipeline test`'s summary line counts it (nao's `failed` counts both)."""
    if not counts["errors"]:
        return f"{counts['failed']} failed"
    return f"{counts['failed'] - counts['errors']} failed, {counts['errors']} error(s)"


def cmd_summary(args: argparse.Namespace) -> int:
    """Totals and one line per model of a results file, computed from its runs."""
    if args.file:
        path = Path(args.file)
    else:
        folder = load_config(suite_root(args)).results_dir
        found = latest_results_files(folder, 1)
        if not found:
            return _usage(f"no results file in {folder}; run `eval-pipeline test` or give -f")
        path = found[0]
    try:
        summary = summarize_results(results_entries(path))
    except ResultsFileError as error:
        return _usage(str(error))
    if args.json:
        print(json.dumps({"file": str(path), **summary}, indent=2))
        return ExitCode.OK
    overall = summary["summary"]
    # Never "$0" for what has no price: nao's total counts an unknown cost as 0, ours says so.
    unpriced = overall["unpriced_runs"]
    if unpriced == overall["total"]:
        cost = "cost unknown"
    else:
        cost = f"${overall['total_cost']:.4f}"
        if unpriced:
            cost += f" (cost unknown for {_plural(unpriced, 'run', 'runs')})"
    print(
        f"{printable(str(path))}: {overall['passed']} passed, {_failed_text(overall)}, "
        f"{overall['total']} total, {cost}, {overall['total_duration_s']}s, "
        f"{overall['total_tool_calls']} tool calls"
    )
    rows = summary["by_model"]
    width = max((len(printable(row["model"])) for row in rows), default=5)
    for row in rows:
        cost = "cost unknown" if row["unpriced_runs"] else f"${row['total_cost']:.4f}"
        errors = f"  {row['errors']} error(s)" if row["errors"] else ""
        print(
            f"  {printable(row['model']):<{width}}  {row['passed']}/{row['total']} passed "
            f"({row['pass_rate']:.1f}%){errors}  pass@1 {row['pass_at_1']:.2f}  "
            f"pass^{row['k']} {row['pass_hat_k']:.2f}  {cost}  "
            f"{row['total_tokens']:,} tokens  {row['avg_duration_ms']:.0f} ms/run"
        )
    return ExitCode.OK
