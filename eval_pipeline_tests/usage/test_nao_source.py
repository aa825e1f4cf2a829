"""`eval-pipeline usage import` of a nao backend's database: the schema nao-core 0.3.29 makes (its own SQLite migrations, from the wheel), filled as its chat server fills it — chats, messages, text and tool parts, a regenerated answer, votes, a deleted chat — read read-only, with nothing of nao's `user` table stored."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import types
from datetime import UTC, datetime
from pathlib import Path

import pytest

from eval_pipeline.store import StateFolder
from eval_pipeline.usage import stored_conversations, stored_signals
from eval_pipeline_tests.agents.real_nao_backend import NaoUnavailable, nao_python
from eval_pipeline_tests.cli.console import run_cli
from eval_pipeline_tests.usage.production import write_project
from eval_pipeline_tests.warehouses.servers import postgres_missing, postgres_server

pytestmark = pytest.mark.slow  # builds nao-core's environment once (a subprocess)

MS = 1_790_000_000_000  # epoch milliseconds, as nao stores times (2026-09-21)


def nao_migrations() -> Path:
    try:
        python = nao_python()
    except NaoUnavailable as error:
        pytest.skip(f"nao-core 0.3.29 cannot be installed here: {error}")
    where = subprocess.check_output(
        [
            str(python),
            "-c",
            "import nao_core, pathlib; print(pathlib.Path(nao_core.__file__).parent)",
        ],
        text=True,
    ).strip()
    return Path(where) / "bin" / "migrations-sqlite"


def nao_database(path: Path) -> Path:
    """An empty database with nao-core 0.3.29's schema: its migrations, in their order."""
    connection = sqlite3.connect(path)
    for migration in sorted(nao_migrations().glob("*.sql")):
        connection.executescript(migration.read_text(encoding="utf-8"))
    connection.commit()
    return path


def fill(path: Path) -> None:
    """What nao's chat server writes for two users' chats, in SQLite."""
    db = sqlite3.connect(path)
    db.execute("PRAGMA foreign_keys = OFF")
    _fill(db.execute, lambda ms: ms)
    db.commit()
    db.close()


def _fill(execute, t) -> None:
    """The chats, through `execute(sql, parameters)` (`?` placeholders); `t` turns epoch
    milliseconds into the time the database stores."""
    db = types.SimpleNamespace(execute=execute)

    for ident, email in (("usr-ana", "ana@acme.com"), ("usr-bo", "bo@acme.com")):
        db.execute(
            'INSERT INTO "user" (id, name, email, created_at, updated_at) VALUES (?, ?, ?, ?, ?)',
            (ident, f"Name of {ident}", email, t(MS), t(MS)),
        )
    db.execute(
        "INSERT INTO project (id, name, type, path, created_at, updated_at) "
        "VALUES ('p1', 'shop', 'local', '/srv', ?, ?)",
        (t(MS), t(MS)),
    )

    def chat(ident: str, user: str, at, deleted: bool = False) -> None:
        db.execute(
            "INSERT INTO chat (id, user_id, project_id, created_at, updated_at, deleted_at) "
            "VALUES (?, ?, 'p1', ?, ?, ?)",
            (ident, user, at, at, at if deleted else None),
        )

    def message(ident: str, chat_id: str, role: str, at, **columns) -> None:
        names = ["id", "chat_id", "role", "created_at", *columns]
        db.execute(
            f"INSERT INTO chat_message ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            (ident, chat_id, role, at, *columns.values()),
        )

    def text(message_id: str, order: int, body: str) -> None:
        db.execute(
            'INSERT INTO message_part (id, message_id, "order", type, text, created_at) '
            "VALUES (?, ?, ?, ?, ?, ?)",
            (f"{message_id}-{order}", message_id, order, "text", body, t(MS)),
        )

    def tool(message_id: str, order: int, sql: str, *, error: str | None = None) -> None:
        db.execute(
            'INSERT INTO message_part (id, message_id, "order", type, tool_call_id, tool_name, '
            "tool_state, tool_input, tool_output, tool_error_text, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                f"{message_id}-{order}",
                message_id,
                order,
                "tool-execute_sql",
                f"call-{message_id}-{order}",
                "execute_sql",
                "output-error" if error else "output-available",
                json.dumps({"sql_query": sql}),
                None if error else json.dumps({"columns": ["n"], "rows": [[12]]}),
                error,
                t(MS),
            ),
        )

    chat("c-1", "usr-ana", t(MS))
    message("m-1", "c-1", "user", t(MS))
    text("m-1", 0, "How much did we refund in October? mail ana@acme.com")
    message("m-2", "c-1", "assistant", t(MS + 1000), llm_model_id="gpt-4.1")
    tool(
        "m-2", 0, "SELECT sum(refund_amount) FROM refunds", error='column "refund_amount" not found'
    )
    text("m-2", 1, "Sorry, I could not compute it.")
    db.execute(
        "INSERT INTO message_feedback (message_id, vote, explanation, created_at, updated_at) "
        "VALUES ('m-2', 'down', 'useless', ?, ?)",
        (t(MS), t(MS)),
    )

    chat("c-2", "usr-bo", t(MS + 60_000))
    message("m-3", "c-2", "user", t(MS + 60_000))
    text("m-3", 0, "How many orders per status?")
    message(
        "m-4",
        "c-2",
        "assistant",
        t(MS + 61_000),
        llm_model_id="gpt-4.1",
        superseded_at=t(MS + 70_000),
    )
    tool("m-4", 0, "SELECT status, count(*) FROM orders GROUP BY 1")
    text("m-4", 1, "There are 12 orders.")
    message("m-5", "c-2", "assistant", t(MS + 71_000), llm_model_id="gpt-4.1")
    tool("m-5", 0, "SELECT status, count(*) FROM orders GROUP BY status")
    text("m-5", 1, "12 completed, 3 pending.")
    db.execute(
        "INSERT INTO message_feedback (message_id, vote, created_at, updated_at) "
        "VALUES ('m-5', 'up', ?, ?)",
        (t(MS), t(MS)),
    )

    chat("c-3", "usr-bo", t(MS + 90_000), deleted=True)
    message("m-6", "c-3", "user", t(MS + 90_000))
    text("m-6", 0, "something deleted")


def test_a_nao_database_is_read_read_only_with_its_tools_votes_and_regenerations(tmp_path):
    root = write_project(tmp_path / "project")
    database = nao_database(tmp_path / "nao.sqlite")
    fill(database)
    before = database.read_bytes()
    done = run_cli("usage", "import", str(database), cwd=root)  # told by its first bytes
    assert done.returncode == 0, done.stderr
    assert database.read_bytes() == before  # read-only
    assert_read_as_nao_wrote_it(root, done.stdout)
    # The accepted answer's query is what a promoted test checks.
    promoted = run_cli("promote", "c-2", "--name", "orders_status_from_nao", cwd=root)
    assert promoted.returncode == 0, promoted.stderr
    test = (root / "cases" / "orders_status_from_nao.yml").read_text()
    assert "GROUP BY status" in test and "GROUP BY 1" not in test


def assert_read_as_nao_wrote_it(root: Path, said: str) -> None:
    """What `fill` wrote, as the store holds it: two chats (the deleted one left out), the
    failed query and its down vote, the regenerated answer and the accepted one, no person."""
    assert "2 conversation(s) read: 2 new" in said
    layout = StateFolder(root / ".eval")
    stored = {c.id: c for c in stored_conversations(layout)}
    assert set(stored) == {"c-1", "c-2"}  # the deleted chat is left out
    refund = stored["c-1"]
    assert refund.source == "nao" and refund.model == "gpt-4.1"
    assert refund.started_at == datetime.fromtimestamp(MS / 1000, UTC)
    assert refund.turns[0].text.endswith("mail <email>")
    [call] = refund.turns[1].tool_calls
    assert call.name == "execute_sql" and call.sql == "SELECT sum(refund_amount) FROM refunds"
    assert call.error == 'column "refund_amount" not found'
    assert refund.turns[1].feedback == "down" and refund.turns[1].feedback_comment == "useless"
    orders = stored["c-2"]
    assert [t.regenerated for t in orders.turns] == [False, True, False]
    assert orders.turns[2].feedback == "up"
    assert refund.user != orders.user and refund.user.startswith("u_")
    kinds = sorted((s.conversation_id, s.kind) for s in stored_signals(layout))
    assert ("c-1", "tool_error") in kinds and ("c-1", "negative_feedback") in kinds
    assert ("c-2", "correction") in kinds  # the regenerated answer
    store = b"".join(p.read_bytes() for p in (root / ".eval").rglob("*.parquet"))
    for personal in (b"ana@acme.com", b"bo@acme.com", b"Name of", b"usr-ana", b"usr-bo"):
        assert personal not in store


def test_a_nao_database_on_postgresql_is_read_by_a_role_that_may_only_select(tmp_path):
    """nao-core 0.3.29's PostgreSQL schema (its own migrations), filled as in SQLite, read
    through its URL by a role granted SELECT alone; the password is never shown."""
    if (reason := postgres_missing()) is not None:
        pytest.skip(reason)
    import psycopg

    migrations = nao_migrations().with_name("migrations-postgres")
    with postgres_server() as server:
        with psycopg.connect(server.url, autocommit=True) as admin:
            admin.execute("CREATE DATABASE nao")
        base = f"postgresql://{server.user}:{server.password}@{server.host}:{server.port}"
        with psycopg.connect(f"{base}/nao", autocommit=True) as db:
            for migration in sorted(migrations.glob("*.sql")):
                for statement in migration.read_text(encoding="utf-8").split(
                    "--> statement-breakpoint"
                ):
                    if statement.strip():
                        db.execute(statement)
            db.execute("SET session_replication_role = replica")  # no foreign keys, as above
            _fill(
                lambda sql, parameters=(): db.execute(sql.replace("?", "%s"), parameters),
                lambda ms: datetime.fromtimestamp(ms / 1000, UTC).replace(tzinfo=None),
            )
            db.execute("CREATE ROLE reader LOGIN PASSWORD 'reader-secret-7'")
            db.execute("GRANT SELECT ON ALL TABLES IN SCHEMA public TO reader")
        url = f"postgresql://reader:reader-secret-7@{server.host}:{server.port}/nao"
        root = write_project(tmp_path / "project")
        done = run_cli("usage", "import", url, cwd=root)  # a URL is nao's database
        assert done.returncode == 0, done.stderr
        assert_read_as_nao_wrote_it(root, done.stdout)
        again = run_cli("usage", "import", url, "--source", "nao", cwd=root)
        assert "0 new, 0 updated, 2 unchanged" in again.stdout

        wrong = run_cli("usage", "import", url.replace("secret-7", "secret-8"), cwd=root)
        assert wrong.returncode == 2
        assert f"postgresql://reader:***@{server.host}:{server.port}/nao" in wrong.stderr
        assert "cannot connect" in wrong.stderr
        said = done.stdout + done.stderr + again.stdout + wrong.stdout + wrong.stderr
        assert "reader-secret" not in said
        store = b"".join(p.read_bytes() for p in (root / ".eval").rglob("*") if p.is_file())
        assert b"reader-secret" not in store


def test_a_file_that_is_no_nao_database_is_named(tmp_path):
    root = write_project(tmp_path / "project")
    other = tmp_path / "other.sqlite"
    sqlite3.connect(other).execute("CREATE TABLE t (x)").connection.commit()
    done = run_cli("usage", "import", str(other), "--source", "nao", cwd=root)
    assert done.returncode == 2
    assert f"{other}: no chat, chat_message, message_part table: not a nao backend's" in done.stderr
