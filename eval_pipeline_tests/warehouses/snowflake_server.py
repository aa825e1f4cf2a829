"""A Snowflake emulator for tests: fakesnow 0.12 in server mode, in a virtual environment of its own, on 127.0.0.1.

fakesnow speaks Snowflake's REST protocol over DuckDB, so the real `snowflake-connector-python`
of our environment talks to it as to an account. It pins `sqlglot~=30.22` and `duckdb~=2.0`
and imports a module `snowflake-connector-python` 5.x no longer has, so it runs in a venv of
its own (`~/.cache/eval_pipeline_tests/fakesnow-0.12.1`, made once under a file lock).

fakesnow accepts any password and knows no grants, statement timeout or cancellation. Run
as a script (`python snowflake_server.py CONFIG PORT`, in that venv) this file serves
fakesnow behind a thin layer that answers those as Snowflake documents them, so the client
side is tested end to end — what the layer does is the test's stand-in for the service,
not a proof of it (docs/warehouses.md says what only a real account proves):

* a login with another password than the user's is refused (390100, "Incorrect username
  or password was specified.");
* `SHOW GRANTS TO ROLE r` lists the grants the test gave the role; `CURRENT_ROLE()`,
  `CURRENT_SECONDARY_ROLES()` and `CURRENT_WAREHOUSE()` are the user's;
* `ALTER SESSION SET STATEMENT_TIMEOUT_IN_SECONDS = n` makes the session's next statements
  stop after n s (000630), and the connector's abort request stops the statement it names
  (000604): both interrupt DuckDB, so the statement stops in the emulator itself.

The CONFIG file is JSON: {"users": {name: {"password", "role"}}, "grants": {role: [[privilege,
granted_on, name, grant_option], ...]}, "warehouse": name}.
"""

from __future__ import annotations

import contextlib
import fcntl
import gzip
import json
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

FAKESNOW = "fakesnow[server]==0.12.1"
#: The connector fakesnow imports in its own venv: 5.x lacks a module it needs.
FAKESNOW_CONNECTOR = "snowflake-connector-python>=3.12,<5"
CACHE = Path.home() / ".cache" / "eval_pipeline_tests" / "fakesnow-0.12.1"
_READY = "ready"
#: The owner of the emulated account (loads the tables) and a read-only role's user.
OWNER, OWNER_ROLE = "OWNER", "SYSADMIN"
READER, READER_ROLE = "READER", "EVAL_READER"
#: A user whose role reads, and inherits a role that can write.
ANALYST, ANALYST_ROLE = "ANALYST", "ANALYST"
WAREHOUSE, DATABASE, SCHEMA = "EVAL_WH", "SHOP", "PUBLIC"
#: What `snowflake_read_only_recipe` creates: what a read-only role holds.
READER_GRANTS = [
    ["USAGE", "WAREHOUSE", WAREHOUSE, "false"],
    ["USAGE", "DATABASE", DATABASE, "false"],
    ["USAGE", "SCHEMA", f"{DATABASE}.{SCHEMA}", "false"],
    ["SELECT", "TABLE", f"{DATABASE}.{SCHEMA}.ORDERS", "false"],
    ["SELECT", "TABLE", f"{DATABASE}.{SCHEMA}.CUSTOMERS", "false"],
]
ANALYST_GRANTS = [*READER_GRANTS, ["USAGE", "ROLE", "LOADER", "false"]]
LOADER_GRANTS = [["INSERT", "TABLE", f"{DATABASE}.{SCHEMA}.ORDERS", "false"]]


class FakesnowUnavailable(Exception):
    """fakesnow could not be installed here (no registry, no wheel for this platform)."""


def fakesnow_python(cache: Path = CACHE) -> Path:
    """The Python of a virtual environment holding fakesnow, made on first use.

    Raises:
        FakesnowUnavailable: pip could not install it (its output says why).
    """
    cache.mkdir(parents=True, exist_ok=True)
    python = cache / "venv" / "bin" / "python"
    with open(cache / "lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one worker builds it; the others wait and reuse it
        if (cache / _READY).exists() and python.exists():
            return python
        steps = (
            [sys.executable, "-m", "venv", "--clear", str(cache / "venv")],
            [str(python), "-m", "pip", "install", "-q", FAKESNOW, FAKESNOW_CONNECTOR],
        )
        for step in steps:
            done = subprocess.run(step, capture_output=True, text=True, timeout=900)
            if done.returncode != 0:
                raise FakesnowUnavailable(
                    f"`{' '.join(step[:5])} …` failed: {(done.stderr or done.stdout)[-800:]}"
                )
        (cache / _READY).write_text(FAKESNOW)
    return python


@dataclass(frozen=True)
class SnowflakeServer:
    """A running emulator and the account it emulates."""

    port: int
    log: Path
    config: dict = field(repr=False)

    def url(self, user: str = READER, password: str | None = None, **options: str) -> str:
        """The `snowflake://` URL of `user` (its own password unless another is given)."""
        password = self.config["users"][user]["password"] if password is None else password
        query = {"warehouse": WAREHOUSE, **options, **self.address}
        params = "&".join(f"{key}={value}" for key, value in query.items())
        return f"snowflake://{user}:{password}@emulated/{DATABASE}/{SCHEMA}?{params}"

    @property
    def address(self) -> dict[str, str]:
        return {"host": "127.0.0.1", "port": str(self.port), "protocol": "http"}

    def connect(self, user: str = OWNER):
        """A plain connector session (no checks of ours), for setting up and inspecting."""
        import snowflake.connector

        return snowflake.connector.connect(
            user=user,
            password=self.config["users"][user]["password"],
            account="emulated",
            database=DATABASE,
            schema=SCHEMA,
            warehouse=WAREHOUSE,
            host="127.0.0.1",
            port=self.port,
            protocol="http",
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def snowflake_server(grants: dict[str, list[list[str]]] | None = None) -> Iterator[SnowflakeServer]:
    """The emulator on a free port of 127.0.0.1, stopped on exit: its users are the owner
    (SYSADMIN, a system role), the reader (`READER_GRANTS`, what the read-only recipe gives)
    and an analyst whose role inherits one that can insert; `grants` adds roles' grants."""
    python = fakesnow_python()
    with tempfile.TemporaryDirectory(prefix="eval-fakesnow-") as folder:
        config = {
            "users": {
                OWNER: {"password": "owner-Secret-4821", "role": OWNER_ROLE},
                READER: {"password": "reader-Secret-7310", "role": READER_ROLE},
                ANALYST: {"password": "analyst-Secret-5527", "role": ANALYST_ROLE},
            },
            "grants": {
                READER_ROLE: READER_GRANTS,
                ANALYST_ROLE: ANALYST_GRANTS,
                "LOADER": LOADER_GRANTS,
                **(grants or {}),
            },
            "warehouse": WAREHOUSE,
        }
        path = Path(folder) / "config.json"
        path.write_text(json.dumps(config))
        port = free_port()
        log = Path(folder) / "fakesnow.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                [str(python), __file__, str(path), str(port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=folder,
            )
        try:
            _wait_for_port(port, process, log)
            yield SnowflakeServer(port, log, config)
        finally:
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"fakesnow exited at start:\n{log.read_text(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.2)
    raise RuntimeError(f"fakesnow did not listen within {timeout_s} s")


# What follows runs in fakesnow's venv only (`python snowflake_server.py CONFIG PORT`).

_TIMEOUT = re.compile(
    r"^\s*ALTER\s+SESSION\s+SET\s+STATEMENT_TIMEOUT_IN_SECONDS\s*=\s*(\d+)\s*;?\s*$", re.I
)
_SHOW_GRANTS = re.compile(r'^\s*SHOW\s+GRANTS\s+TO\s+ROLE\s+"?([^"]+)"?\s*;?\s*$', re.I)
_GRANT_COLUMNS = (
    "created_on, privilege, granted_on, name, granted_to, grantee_name, grant_option, granted_by"
)


def _serve(config_path: str, port: int) -> None:  # pragma: no cover - runs in fakesnow's venv
    import importlib

    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    fake = importlib.import_module("fakesnow.server")  # `fakesnow.server` is also a function
    _keep_null_timestamps(importlib.import_module("fakesnow.arrow"))
    config = json.loads(Path(config_path).read_text())
    users: dict[str, dict] = {k.upper(): v for k, v in config["users"].items()}
    grants: dict[str, list] = {k.upper(): v for k, v in config["grants"].items()}
    sessions: dict[str, dict] = {}  # token → {"user", "timeout"}
    running: dict[str, dict] = {}  # request id → {"token", "stopped"}
    lock = threading.Lock()

    def body_of(raw: bytes, request: Request) -> dict:
        if request.headers.get("Content-Encoding") == "gzip":
            raw = gzip.decompress(raw)
        return json.loads(raw)

    def replayed(request: Request, body: dict) -> Request:
        data = json.dumps(body).encode()
        headers = [(k, v) for k, v in request.scope["headers"] if k.lower() != b"content-encoding"]
        headers = [(k, v) for k, v in headers if k.lower() != b"content-length"]
        scope = {
            **request.scope,
            "headers": [*headers, (b"content-length", str(len(data)).encode())],
        }

        async def receive() -> dict:
            return {"type": "http.request", "body": data, "more_body": False}

        return Request(scope, receive)

    def failure(code: str, message: str, state: str = "57014") -> JSONResponse:
        return JSONResponse(
            {
                "data": {"errorCode": code, "sqlState": state},
                "code": code,
                "message": message,
                "success": False,
            }
        )

    async def login(request: Request) -> JSONResponse:
        body = body_of(await request.body(), request)
        data = body["data"]
        user = users.get(str(data.get("LOGIN_NAME", "")).upper())
        if user is None or data.get("PASSWORD") != user["password"]:
            return failure("390100", "Incorrect username or password was specified.", "08004")
        response = await fake.login_request(replayed(request, body))
        token = json.loads(response.body)["data"]["token"]
        sessions[token] = {"user": str(data["LOGIN_NAME"]).upper(), "timeout": 0}
        return response

    def session_of(request: Request) -> tuple[str, dict] | None:
        auth = request.headers.get("Authorization") or ""
        token = auth[17:-1]
        return (token, sessions[token]) if token in sessions else None

    def interrupt(request_id: str, why: str) -> None:
        with lock:
            query = running.get(request_id)
            if query is None or query["stopped"]:
                return
            query["stopped"] = why
        connection = fake.sessions.get(query["token"])
        if connection is not None:
            connection._duck_conn.interrupt()
            print(f"interrupted request {request_id} ({why})", flush=True)  # for the tests

    async def query(request: Request) -> JSONResponse:
        found = session_of(request)
        if found is None:
            return await fake.query_request(request)
        token, session = found
        body = body_of(await request.body(), request)
        sql = body.get("sqlText", "")
        user = users[session["user"]]
        if match := _TIMEOUT.match(sql):
            session["timeout"] = int(match.group(1))
            body["sqlText"] = "SELECT 'Statement executed successfully.' AS \"status\""
        elif match := _SHOW_GRANTS.match(sql):
            rows = grants.get(match.group(1).upper(), [])
            values = ", ".join(
                "("
                + ", ".join(
                    _literal(v)
                    for v in [
                        "2024-01-01",
                        p,
                        on,
                        name,
                        "ROLE",
                        match.group(1).upper(),
                        option,
                        "SYSADMIN",
                    ]
                )
                + ")"
                for p, on, name, option in rows
            )
            body["sqlText"] = (
                f"SELECT * FROM (VALUES {values}) AS g ({_GRANT_COLUMNS})"
                if rows
                else f"SELECT * FROM (VALUES ({', '.join(['NULL'] * 8)})) AS g ({_GRANT_COLUMNS}) "
                "WHERE FALSE"
            )
        else:
            secondary = json.dumps({"roles": user.get("secondary", ""), "value": ""})
            for call, value in (
                ("CURRENT_ROLE()", user["role"]),
                ("CURRENT_SECONDARY_ROLES()", secondary),
                ("CURRENT_WAREHOUSE()", config["warehouse"]),
                ("CURRENT_USER()", session["user"]),
            ):
                sql = re.sub(re.escape(call), _literal(value), sql, flags=re.I)
            body["sqlText"] = sql
        request_id = request.query_params.get("requestId", "")
        with lock:
            running[request_id] = {"token": token, "stopped": None}
        timer = None
        if session["timeout"]:
            timer = threading.Timer(session["timeout"], interrupt, (request_id, "timeout"))
            timer.start()
        try:
            response = await fake.query_request(replayed(request, body))
        finally:
            if timer is not None:
                timer.cancel()
            with lock:
                stopped = running.pop(request_id, {}).get("stopped")
        if stopped == "timeout":
            return failure(
                "000630",
                f"Statement reached its statement or warehouse timeout of {session['timeout']} "
                "second(s) and was canceled.",
            )
        if stopped:
            return failure("000604", "SQL execution canceled")
        return response

    async def abort(request: Request) -> JSONResponse:
        body = body_of(await request.body(), request)
        interrupt(str(body.get("requestId", "")), "cancel")
        return JSONResponse({"success": True, "data": None, "code": None, "message": None})

    routes = [
        Route("/session/v1/login-request", login, methods=["POST"]),
        Route("/queries/v1/query-request", query, methods=["POST"]),
        Route("/queries/v1/abort-request", abort, methods=["POST"]),
        *(r for r in fake.routes if r.path not in _REPLACED),
    ]
    uvicorn.run(Starlette(routes=routes), host="127.0.0.1", port=port, log_level="warning")


def _keep_null_timestamps(arrow) -> None:  # pragma: no cover - runs in fakesnow's venv
    """fakesnow 0.12.1 sends a NULL timestamp as the epoch (its struct loses the nulls):
    Snowflake sends NULL, so the emulator is made to."""
    import pyarrow as pa
    import pyarrow.compute as pc

    to_struct = arrow.timestamp_to_sf_struct

    def with_nulls(ts):
        if isinstance(ts, pa.ChunkedArray):
            ts = ts.combine_chunks()
        struct = to_struct(pc.fill_null(ts, pa.scalar(0, ts.type)))
        return pa.StructArray.from_arrays(
            [struct.field(i) for i in range(struct.type.num_fields)],
            fields=list(struct.type),
            mask=ts.is_null(),
        )

    arrow.timestamp_to_sf_struct = with_nulls


_REPLACED = frozenset(
    {"/session/v1/login-request", "/queries/v1/query-request", "/queries/v1/abort-request"}
)


def _literal(value: object) -> str:
    return "'" + str(value).replace("\\", "\\\\").replace("'", "''") + "'"


if __name__ == "__main__":
    _serve(sys.argv[1], int(sys.argv[2]))
