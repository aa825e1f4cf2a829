"""A nao backend's own usage, read-only from its database (SQLite, or PostgreSQL by its URL): its chats, their messages and message parts (text and tool calls), regenerated answers and the users' votes.

Read as nao-core 0.3.x writes them, the same tables in both databases: `chat` (`id`,
`user_id`, `created_at` — epoch milliseconds in SQLite, a timestamp (UTC) in PostgreSQL —,
`deleted_at` once deleted), `chat_message` (`role`, `created_at`,
`llm_model_id`, `superseded_at` once the user regenerated the answer, `error_message`),
`message_part` (in `order`: `text` parts, and `tool-<name>` parts with `tool_name`,
`tool_state`, `tool_input`, `tool_output`, `tool_error_text`) and `message_feedback` (`vote`
up or down, `explanation`). Deleted chats are left out, and so is everything nao keeps of a
person (the `user` table, sessions, accounts): a chat's user is stored as a pseudonym of its
`user_id`. The database is opened read-only (SQLite's read-only mode; a PostgreSQL session
whose transactions are read-only, so a role granted SELECT alone is enough), so the backend
may keep running. A PostgreSQL URL's password is never shown.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from eval_pipeline.usage._conversation import Conversation, ToolCall, Turn, UsageProblem
from eval_pipeline.usage._privacy import Privacy

__all__ = ["SQLITE_HEADER", "is_database_url", "read_nao_database", "shown_url"]

#: The first bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"
_TABLES = ("chat", "chat_message", "message_part")
_URL_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(source: str | Path) -> bool:
    """Whether an import names a nao backend's PostgreSQL database (its `DB_URI`)."""
    return isinstance(source, str) and source.startswith(_URL_SCHEMES)


def shown_url(url: str) -> str:
    """The URL as messages and the store may show it: without its password."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    where = f"{parts.username}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=where))


class _Database(Protocol):
    def rows(self, sql: str) -> list[tuple]: ...

    def columns(self, table: str) -> set[str]: ...


class _SQLite:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self._connection = connection

    def rows(self, sql: str) -> list[tuple]:
        return self._connection.execute(sql).fetchall()

    def columns(self, table: str) -> set[str]:
        return {row[1] for row in self._connection.execute(f'PRAGMA table_info("{table}")')}


class _Postgres:
    """A nao database on PostgreSQL, through ADBC (the driver PostgreSQL warehouses use)."""

    def __init__(self, cursor: Any) -> None:
        self._cursor = cursor

    def rows(self, sql: str) -> list[tuple]:
        self._cursor.execute(sql)
        return self._cursor.fetchall()

    def columns(self, table: str) -> set[str]:
        return {
            row[0]
            for row in self.rows(
                "SELECT column_name FROM information_schema.columns "
                f"WHERE table_schema = current_schema() AND table_name = '{table}'"
            )
        }


def read_nao_database(
    source: Path | str, privacy: Privacy
) -> Iterator[Conversation | UsageProblem]:
    """The conversations of a nao backend's database — a SQLite file, or a PostgreSQL URL —,
    or one problem saying why it cannot be read (not a nao database, a table missing)."""
    if is_database_url(source):
        yield from _read_postgres(str(source), privacy)
        return
    path = Path(source)
    try:
        connection = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30)
    except sqlite3.Error as error:
        yield UsageProblem(str(path), None, None, f"cannot open it read-only: {error}")
        return
    try:
        yield from _read(_SQLite(connection), str(path), privacy)
    except sqlite3.Error as error:
        yield UsageProblem(str(path), None, None, f"not a nao database nao-core 0.3 reads: {error}")
    finally:
        connection.close()


def _read_postgres(url: str, privacy: Privacy) -> Iterator[Conversation | UsageProblem]:
    import adbc_driver_manager
    import adbc_driver_postgresql.dbapi as adbc

    where = shown_url(url)
    try:
        # Each statement its own transaction, every one of them read-only (below).
        connection = adbc.connect(url, autocommit=True)
    except adbc_driver_manager.Error as error:
        reason = str(error).replace(url, where).splitlines()[0]
        yield UsageProblem(where, None, None, f"cannot connect: {reason}")
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
            yield from _read(_Postgres(cursor), where, privacy)
    except adbc_driver_manager.Error as error:
        reason = str(error).replace(url, where).splitlines()[0]
        yield UsageProblem(where, None, None, f"not a nao database nao-core 0.3 reads: {reason}")
    finally:
        connection.close()


def _read(
    database: _Database, where: str, privacy: Privacy
) -> Iterator[Conversation | UsageProblem]:
    missing = [t for t in _TABLES if not database.columns(t)]
    if missing:
        yield UsageProblem(
            where,
            None,
            None,
            f"no {', '.join(missing)} table: not a nao backend's database (nao chat keeps it "
            "where DB_URI points)",
        )
        return
    deleted = "AND deleted_at IS NULL" if "deleted_at" in database.columns("chat") else ""
    message_columns = database.columns("chat_message")
    optional = [
        c for c in ("llm_model_id", "superseded_at", "error_message") if c in message_columns
    ]
    chats = database.rows(
        f"SELECT id, user_id, created_at FROM chat WHERE 1 = 1 {deleted} ORDER BY created_at, id"
    )
    select = ", ".join(["id", "chat_id", "role", "created_at", *optional])
    messages: dict[str, list[dict[str, Any]]] = {}
    for row in database.rows(f"SELECT {select} FROM chat_message ORDER BY created_at, id"):
        message = dict(zip(["id", "chat_id", "role", "created_at", *optional], row, strict=True))
        messages.setdefault(message["chat_id"], []).append(message)
    parts: dict[str, list[tuple]] = {}
    for row in database.rows(
        'SELECT message_id, "order", type, text, tool_name, tool_state, '
        "CAST(tool_input AS TEXT), CAST(tool_output AS TEXT), tool_error_text "
        'FROM message_part ORDER BY message_id, "order"'
    ):
        parts.setdefault(row[0], []).append(row)
    votes: dict[str, tuple[str, str | None]] = {}
    if database.columns("message_feedback"):
        for message_id, vote, explanation in database.rows(
            "SELECT message_id, vote, explanation FROM message_feedback"
        ):
            votes[message_id] = (vote, explanation)
    for chat_id, user_id, created_at in chats:
        turns = [
            _turn(m, parts.get(m["id"], []), votes.get(m["id"]), privacy)
            for m in messages.get(chat_id, [])
            if m["role"] in ("user", "assistant")
        ]
        if not turns:
            continue
        model = next(
            (m.get("llm_model_id") for m in messages[chat_id] if m.get("llm_model_id")), None
        )
        yield Conversation(
            id=str(chat_id),
            source="nao",
            started_at=_time(created_at),
            turns=tuple(turns),
            user=privacy.pseudonym(str(user_id)) if user_id else None,
            model=model,
        )


def _turn(
    message: dict[str, Any],
    parts: list[tuple],
    vote: tuple[str, str | None] | None,
    privacy: Privacy,
) -> Turn:
    texts, calls = [], []
    for _, _, kind, text, tool_name, state, tool_input, tool_output, error_text in parts:
        if kind == "text" and text:
            texts.append(text)
        elif isinstance(kind, str) and kind.startswith("tool-"):
            error = error_text or ("the tool failed" if state == "output-error" else None)
            calls.append(
                ToolCall(
                    tool_name or kind.removeprefix("tool-"),
                    privacy.masked(_json_object(tool_input)),
                    privacy.text(tool_output) if tool_output is not None else None,
                    privacy.text(error) if error else None,
                )
            )
    # An answer that failed (nao's `error_message`) has no text: it is no answer.
    text = "\n".join(texts)
    feedback = vote[0] if vote and vote[0] in ("up", "down") else None
    return Turn(
        role=message["role"],
        text=privacy.text(text),
        at=_time(message["created_at"]),
        tool_calls=tuple(calls),
        feedback=feedback,  # type: ignore[arg-type]
        feedback_comment=privacy.text(vote[1]) if vote and vote[1] else None,
        regenerated=message.get("superseded_at") is not None,
    )


def _json_object(value: Any) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return {"input": value}
    return value if isinstance(value, dict) else {}


def _time(value: Any) -> datetime:
    """nao's timestamps: epoch milliseconds in SQLite, timestamps (UTC) in PostgreSQL."""
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
    return datetime.fromtimestamp(float(value) / 1000, UTC)
