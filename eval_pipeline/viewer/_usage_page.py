"""The recommendations page: production usage's friction, ranked, each with what to change where and the conversations it came from."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import duckdb

from eval_pipeline.viewer._html import Markup, cell, el, fmt_int, join, section, table
from eval_pipeline.viewer._pages import empty_state

#: Conversations shown under each recommendation (the rest are counted).
EXAMPLES = 5

_COLUMNS = (
    "recommendation_id, rank, kind, score, file, summary, conversations, users, tables, "
    "first_seen, last_seen, status"
)


def read_recommendations(
    con: duckdb.DuckDBPyConnection,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The ranked recommendations as last stored, and the example conversations of each
    (their first `EXAMPLES`) by id."""
    cursor = con.execute(f"SELECT {_COLUMNS} FROM recommendations ORDER BY rank")
    names = [d[0] for d in cursor.description]
    ranked = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    wanted = sorted({c for r in ranked for c in (r["conversations"] or [])[:EXAMPLES]})
    if not wanted:
        return ranked, {}
    rows = con.execute(
        "SELECT conversation_id, run_date, user_key, model, question, turns "
        "FROM usage_conversations WHERE list_contains(?, conversation_id)",
        [wanted],
    ).fetchall()
    conversations = {
        row[0]: {
            "day": row[1],
            "user": row[2],
            "model": row[3],
            "question": row[4],
            "turns": json.loads(row[5]),
        }
        for row in rows
    }
    return ranked, conversations


def recommendations_body(
    ranked: Sequence[Mapping[str, Any]], conversations: Mapping[str, Mapping[str, Any]]
) -> Markup:
    if not ranked:
        return empty_state(
            "No recommendations yet",
            join(
                "Import production conversations with ",
                el("code", "eval-pipeline usage import PATH"),
                ", then run ",
                el("code", "eval-pipeline recommend"),
                ".",
            ),
        )
    rows = [
        el(
            "tr",
            cell(fmt_int(r["rank"]), sort=r["rank"], num=True),
            cell(el("a", r["recommendation_id"], href=f"#{r['recommendation_id']}")),
            cell(r["kind"]),
            cell(f"{r['score']:.1f}", sort=r["score"], num=True),
            cell(
                fmt_int(len(r["conversations"] or [])), sort=len(r["conversations"] or []), num=True
            ),
            cell(fmt_int(r["users"]), sort=r["users"], num=True),
            cell(el("code", r["file"])),
            cell(r["status"]),
        )
        for r in ranked
    ]
    overview = section(
        "Recommendations",
        el(
            "p",
            "Friction in production conversations, clustered and ranked by impact. ",
            el("code", "eval-pipeline promote ID"),
            " drafts a test from one; ",
            el("code", "eval-pipeline recommend --ack/--dismiss/--done ID"),
            " records what you did.",
        ),
        table(
            [
                ("#", "num"),
                ("id", "text"),
                ("kind", "text"),
                ("score", "num"),
                ("conversations", "num"),
                ("users", "num"),
                ("file to change", "text"),
                ("status", "text"),
            ],
            rows,
            id_="recommendations",
        ),
    )
    details = [_details(r, conversations) for r in ranked]
    return join(overview, *details)


def _details(r: Mapping[str, Any], conversations: Mapping[str, Mapping[str, Any]]) -> Markup:
    ids = list(r["conversations"] or [])
    shown = [conversations[c] | {"id": c} for c in ids[:EXAMPLES] if c in conversations]
    more = len(ids) - len(shown)
    return section(
        f"{r['rank']}. {r['kind']} → {r['file']}",
        el("p", r["summary"]),
        el(
            "p",
            f"Seen {r['first_seen']} to {r['last_seen']}",
            f"; tables: {', '.join(r['tables'])}" if r["tables"] else "",
            f"; status: {r['status']}",
            class_="muted",
        ),
        el("ul", [_conversation(c) for c in shown], class_="conversations"),
        el("p", f"… and {more} more conversation(s)", class_="muted") if more > 0 else None,
        id_=r["recommendation_id"],
    )


def _conversation(c: Mapping[str, Any]) -> Markup:
    turns = []
    for turn in c["turns"]:
        text = turn.get("text") or ""
        errors = [call.get("error") for call in turn.get("tool_calls") or () if call.get("error")]
        vote = turn.get("feedback")
        turns.append(
            el(
                "li",
                el("strong", "user: " if turn.get("role") == "user" else "agent: "),
                text[:400] or "(no answer)",
                [el("div", el("code", f"error: {e[:300]}")) for e in errors],
                el("span", f" [voted {vote}]", class_="muted") if vote else None,
            )
        )
    return el(
        "li",
        el(
            "div",
            el("code", c["id"]),
            f" · {c['day']} · {c['model'] or 'model unknown'} · {c['user'] or 'user unknown'}",
            class_="muted",
        ),
        el("ol", turns),
    )
