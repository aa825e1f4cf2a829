"""Each run on its own, as `nao test` prints it: the `-v` view of `eval-pipeline test`."""

from __future__ import annotations

from collections.abc import Mapping

from rich.console import Console
from rich.text import Text

from eval_pipeline.cli._render import status_text
from eval_pipeline.pipeline import ResultEntry, ResultsDocument
from eval_pipeline.suite import printable

#: The start of a reply the verbose view shows, as `nao test` does.
RESPONSE_START = 200


def _run_cost(result: ResultEntry) -> str:
    return "cost unknown" if result.cost_usd is None else f"${result.cost_usd:.4f}"


def print_verbose(console: Console, document: ResultsDocument, prompts: Mapping[str, str]) -> None:
    """`-v`: each run as `nao test` prints it, in the document's order: the test and model
    (the document's spelling: pass the labelled one), the attempt (from 1, as nao counts),
    the prompt (`prompts`, by test: the document holds none), the start of the reply, the
    tool calls, tokens, cost and time, the verification SQL, the verdict and, for a failed
    data comparison, the differing rows. Everything is printed as text, never as markup."""

    def line(*parts: str | tuple[str, str]) -> None:
        # Each part from the run (a reply, SQL, a results file's text) as `printable` shows it.
        console.print(
            Text.assemble(*(printable(p, lines=True) if isinstance(p, str) else p for p in parts)),
            highlight=False,
            soft_wrap=True,
        )

    for result in document.results:
        details = result.details
        line(
            ("── ", "dim"),
            (printable(result.name), "bold"),
            f" [{result.model}] attempt {result.attempt}",  # the index the table and store use
        )
        line(("prompt: ", "dim"), prompts.get(result.name, "(not in the suite)"))
        reply = details.response_text
        shown = "(no reply)" if not reply else reply[:RESPONSE_START]
        cut = "…" if reply and len(reply) > RESPONSE_START else ""
        line(("response: ", "dim"), shown.replace("\n", " ") + cut)
        names = [str(call.get("toolName", "?")) for call in details.tool_calls]
        line(
            ("tool calls: ", "dim"),
            f"{result.tool_call_count}" + (f" ({', '.join(names)})" if names else ""),
        )
        line(f"{result.tokens:,} tokens, {_run_cost(result)}, {result.duration_ms / 1000:.1f}s")
        if details.verification_sql:
            line(("verification SQL: ", "dim"), details.verification_sql)
        status = status_text(result.status)
        console.print(
            Text.assemble(status, " ", printable(result.message or "", lines=True)),
            highlight=False,
            soft_wrap=True,
        )
        if details.nao_verdict:
            nao = details.nao_verdict
            theirs = {True: "passed", False: "failed", None: "none"}[nao.get("passed")]
            line(("nao's verdict: ", "dim"), f"{theirs} ({nao.get('message') or ''})")
        if details.comparison:
            line(("differing rows:", "dim"))
            for row in details.comparison.splitlines():
                line("  " + row)
        console.print()
