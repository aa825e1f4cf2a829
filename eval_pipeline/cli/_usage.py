"""`eval-pipeline usage import`, `recommend` and `promote`: production usage in, ranked recommendations out, a test drawn from one."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eval_pipeline.cli._exit import ExitCode
from eval_pipeline.cli._options import parse_day, suite_root
from eval_pipeline.pipeline import current_recommendations
from eval_pipeline.store import StateFolder
from eval_pipeline.suite import Problem, Suite, SuiteError, load_suite, printable
from eval_pipeline.usage import (
    WINDOW_DAYS,
    ContextFiles,
    Privacy,
    Recommendation,
    draft_test,
    import_usage,
    is_database_url,
    prompts_of,
    recommend,
    set_status,
    shown_url,
    stored_conversations,
    stored_signals,
    write_draft,
)

#: Problems listed one per line; the rest are counted.
_SHOWN_PROBLEMS = 20


def add_usage_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("import",))
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files to import, or a nao backend's PostgreSQL database as its URL "
        "(postgresql://user:password@host/db)",
    )
    parser.add_argument(
        "--source",
        choices=("otel", "nao", "jsonl"),
        help="what the files hold: OpenTelemetry GenAI traces as OTLP/JSON, a nao backend's "
        "database (SQLite, or PostgreSQL by its URL; read-only), or the documented JSONL of "
        "conversations (default: told by each file's first bytes)",
    )


def add_recommend_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--since",
        metavar="YYYY-MM-DD",
        help=f"the first day to read (default: {WINDOW_DAYS} days before the latest)",
    )
    parser.add_argument("--format", choices=("table", "json"), default="table")
    parser.add_argument("--limit", type=int, default=20, help="recommendations shown (table)")
    parser.add_argument("--all", action="store_true", help="include those dismissed or done")
    for status, verb in (("acknowledged", "ack"), ("dismissed", "dismiss"), ("done", "done")):
        parser.add_argument(
            f"--{verb}",
            action="append",
            default=[],
            metavar="ID",
            help=f"mark a recommendation {status} (repeatable); kept across re-runs",
        )
    parser.add_argument(
        "--reopen", action="append", default=[], metavar="ID", help="mark new again"
    )
    parser.add_argument("--note", help="a note stored with the status change")
    parser.add_argument(
        "--rejudge",
        action="store_true",
        help="ask the judge model for its summaries again instead of using its cached ones",
    )


def add_promote_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", help="a recommendation id (r_…) or a conversation id")
    parser.add_argument("--name", help="the test's name (default: from the question)")


def _layout_and_suite(args: argparse.Namespace) -> tuple[Suite, StateFolder]:
    suite = load_suite(suite_root(args))
    return suite, StateFolder.of(suite.config)


def cmd_usage(args: argparse.Namespace) -> int:
    paths: list[Path | str] = [p if is_database_url(p) else Path(p) for p in args.paths]
    problems = [
        Problem(str(p), None, "no such file")
        for p in paths
        if isinstance(p, Path) and not p.is_file()
    ]
    if args.source not in (None, "nao"):
        problems += [
            Problem(shown_url(p), None, f"a database URL is a nao backend's, not {args.source}")
            for p in paths
            if isinstance(p, str)
        ]
    if problems:
        raise SuiteError(problems, headline="nothing imported")
    suite, layout = _layout_and_suite(args)
    privacy = Privacy.of_folder(layout.root / "usage")
    report = import_usage(
        paths, layout, privacy, source=args.source, prompts=prompts_of(suite.cases)
    )
    days = (
        f" over {len(report.days)} day(s), {report.days[0]} to {report.days[-1]}"
        if report.days
        else ""
    )
    print(
        f"{report.read} conversation(s) read: {report.added} new, {report.updated} updated, "
        f"{report.unchanged} unchanged{days}; {report.signals} signal(s) in the store"
    )
    if not report.problems:
        return ExitCode.OK
    for problem in report.problems[:_SHOWN_PROBLEMS]:
        print(printable(str(problem)), file=sys.stderr)
    more = len(report.problems) - _SHOWN_PROBLEMS
    if more > 0:
        print(f"… and {more} more problem(s)", file=sys.stderr)
    print(
        f"{len(report.problems)} record(s) could not be read and were left out; the others are "
        "stored. Fix them and import the file again (what is stored is not imported twice).",
        file=sys.stderr,
    )
    return ExitCode.USAGE


def cmd_recommend(args: argparse.Namespace) -> int:
    suite, layout = _layout_and_suite(args)
    changes = [
        (ident, status)
        for status, idents in (
            ("acknowledged", args.ack),
            ("dismissed", args.dismiss),
            ("done", args.done),
            ("new", args.reopen),
        )
        for ident in idents
    ]
    if changes:  # recorded as asked, with no ranking (nor judge) spent on it
        return _set_statuses(suite, layout, changes, args.note)
    since = parse_day(args.since, "--since") if args.since else None
    ranking = current_recommendations(suite, layout, since=since, rejudge=args.rejudge)
    if ranking.latest is None:
        print("no production usage in the store yet: run `eval-pipeline usage import PATH`")
        return ExitCode.OK
    shown = [
        r for r in ranking.recommendations if args.all or r.status not in ("dismissed", "done")
    ]
    if ranking.left_out:  # a diagnostic: stdout may carry the JSON list
        print(
            f"the judge found {ranking.left_out} correction(s) in the users' words to be none; "
            "left out (usage.confirm_corrections)",
            file=sys.stderr,
        )
    if args.format == "json":
        json.dump([r.to_json() for r in shown], sys.stdout, indent=2, ensure_ascii=False)
        print()
        return ExitCode.OK
    if not shown:
        print(f"no friction found since {ranking.since}")
        return ExitCode.OK
    for position, item in enumerate(shown[: args.limit], start=1):
        status = "" if item.status == "new" else f" [{item.status}]"
        print(
            printable(
                f"{position:>2}. {item.id}  {item.kind:<17} score {item.score:>7.2f}  "
                f"{len(item.conversations)} conversation(s)  → {item.file}{status}"
            )
        )
        print(printable(f"    {item.summary}"))
    if len(shown) > args.limit:
        print(f"… {len(shown) - args.limit} more (--limit, or --format json)")
    print(
        f"\n{len(shown)} recommendation(s) since {ranking.since}; `eval-pipeline promote ID` "
        "drafts a test from one, --ack/--dismiss/--done ID records what you did"
    )
    return ExitCode.OK


def _ever_made(suite: Suite, layout: StateFolder) -> dict[str, Recommendation]:
    """Every recommendation the stored signals make, by id, not only the window's: any can
    be marked or promoted."""
    signals = stored_signals(layout)
    return {r.id: r for r in recommend(signals, ContextFiles.of_folder(suite.root))}


def _set_statuses(
    suite: Suite, layout: StateFolder, changes: list[tuple[str, str]], note: str | None
) -> int:
    known = set(_ever_made(suite, layout))
    unknown = [ident for ident, _ in changes if ident not in known]
    if unknown:
        raise SuiteError(
            [Problem("recommend", ident, "no such recommendation") for ident in unknown],
            headline="no status changed",
        )
    for ident, status in changes:
        set_status(layout, ident, status, note)  # type: ignore[arg-type]
        print(f"{ident}: {status}")
    return ExitCode.OK


def cmd_promote(args: argparse.Namespace) -> int:
    suite, layout = _layout_and_suite(args)
    conversations = {c.id: c for c in stored_conversations(layout)}
    ident, origin = args.id, ""
    if ident in conversations:
        chosen = [conversations[ident]]
    else:
        found = _ever_made(suite, layout)
        if ident not in found:
            raise SuiteError(
                [Problem("promote", "ID", f"{ident!r} is no recommendation or conversation id")],
                headline="no test written",
            )
        origin = f"recommendation {ident} ({found[ident].kind})"
        chosen = [conversations[c] for c in found[ident].conversations if c in conversations]
    draft = draft_test(chosen, name=args.name, origin=origin)
    try:
        path = write_draft(draft, suite.cases_dir)
    except FileExistsError:
        raise SuiteError(
            [Problem(str(suite.cases_dir / f"{draft.name}.yml"), None, "exists")],
            headline="no test written: choose another name with --name",
        ) from None
    print(printable(f"wrote {path}"))
    if draft.reference_from is None:
        print("it needs a reference: write its `sql:` before relying on it", file=sys.stderr)
    return ExitCode.OK
