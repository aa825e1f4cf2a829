"""People's labels on runs: writing one (an immutable row of the `labels` table) and how far
the graders agree with them."""

from __future__ import annotations

import uuid
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from eval_pipeline.grading import Agreement, agreement
from eval_pipeline.store import StateFolder, write_rows

MAX_NOTE = 4000
MAX_AUTHOR = 80


class LabelError(ValueError):
    """The label form was filled in wrongly (the server answers 400)."""


def parse_label_form(form: dict[str, list[str]]) -> tuple[bool, str, str]:
    """(passed, note, author) from the posted form, or a LabelError saying what is wrong."""
    verdict = (form.get("verdict") or [""])[0]
    if verdict not in ("passed", "failed"):
        raise LabelError("choose passed or failed")
    note = (form.get("note") or [""])[0].strip()
    author = (form.get("author") or [""])[0].strip()
    if len(note) > MAX_NOTE:
        raise LabelError(f"the note is longer than {MAX_NOTE:,} characters")
    if len(author) > MAX_AUTHOR:
        raise LabelError(f"the name is longer than {MAX_AUTHOR} characters")
    return verdict == "passed", note, author


def add_label(
    layout: StateFolder, run: dict[str, Any], *, passed: bool, note: str, author: str = ""
) -> dict[str, Any]:
    """Store a person's verdict on a run as a new file: labels are never overwritten, so the
    history of who said what stays, and `labels_latest` shows the newest per run."""
    moment = datetime.now(UTC)
    row = {
        "label_id": uuid.uuid4().hex,
        "run_key": run.get("run_key"),
        "name": run["name"],
        "model": run["model"],
        "run_date": run["run_date"],
        "attempt": int(run["attempt"]),
        "passed": passed,
        "note": note or None,
        "author": author or None,
        "labelled_at": moment,
    }
    write_rows(layout, "labels", [row], written_at=moment)
    return row


@dataclass(frozen=True)
class AgreementRow:
    """Agreement of one grader (the overall verdict, a check kind or a named evaluator)."""

    grader: str
    kind: str  # "overall", "check" or "evaluator"
    result: Agreement


def judge_verdicts(checks: list[dict[str, Any]]) -> list[tuple[str, str, bool]]:
    """(grader, kind, passed) for each decided verdict in a grade's checks."""
    verdicts = []
    for check in checks:
        status = check.get("status")
        if status in ("passed", "failed"):
            verdicts.append((str(check.get("kind")), "check", status == "passed"))
        if check.get("kind") == "evaluators":
            for item in (check.get("details") or {}).get("evaluators") or []:
                if isinstance(item.get("passed"), bool):
                    verdicts.append((str(item.get("evaluator")), "evaluator", item["passed"]))
    return verdicts


def agreement_rows(labelled: list[dict[str, Any]]) -> list[AgreementRow]:
    """Judge–human agreement over labelled runs: "overall" pairs the grade's verdict with the
    label (runs graded `error` are left out: nobody decided), then one row per check kind and
    one per evaluator."""
    pairs: dict[tuple[str, str], list[tuple[bool, bool]]] = defaultdict(list)
    for row in labelled:
        if row.get("status") not in ("passed", "failed"):
            continue
        human = bool(row["label_passed"])
        pairs[("overall", "overall")].append((bool(row["grade_passed"]), human))
        for grader, kind, passed in judge_verdicts(row.get("checks") or []):
            pairs[(grader, kind)].append((passed, human))
    order = {"overall": 0, "evaluator": 1, "check": 2}
    return [
        AgreementRow(grader, kind, agreement(values))
        for (grader, kind), values in sorted(pairs.items(), key=lambda i: (order[i[0][1]], i[0][0]))
    ]
