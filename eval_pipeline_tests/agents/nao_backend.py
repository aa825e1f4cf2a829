"""A stand-in nao backend on 127.0.0.1 speaking the API `nao test` uses: better-auth's email sign-in (a session cookie) and `/api/test/run`.

Replies to `/api/test/run` are scripted per test: a callable `(body, index) -> BackendReply`
(`index` counts the run requests). Every sign-in and run request is recorded, so tests
assert what was sent; `expire_sessions()` forgets every session, as a restarted backend does.
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

EMAIL, PASSWORD = "analyst@example.com", "correct-horse-battery"
COOKIE_NAME = "better-auth.session_token"


@dataclass
class BackendReply:
    """One answer of `/api/test/run`: a JSON body (or raw bytes), a status, a delay."""

    body: Any
    status: int = 200
    delay_s: float = 0.0


@dataclass
class RunRequest:
    body: dict[str, Any]
    cookie: str | None


@dataclass
class FakeNaoBackend:
    script: Callable[[dict[str, Any], int], BackendReply]
    accounts: dict[str, str] = field(default_factory=lambda: {EMAIL: PASSWORD})
    sign_ins: list[dict[str, Any]] = field(default_factory=list)
    runs: list[RunRequest] = field(default_factory=list)
    sessions: set[str] = field(default_factory=set)
    url: str = ""
    #: True: every run is refused with 401, whatever the session (a backend that lost its users).
    refuse_runs: bool = False
    #: Characters of a made-up cookie attribute the sign-in's `Set-Cookie` carries after the
    #: session token (a backend sending a header past what a client reads).
    cookie_padding: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def expire_sessions(self) -> None:
        with self._lock:
            self.sessions.clear()


def nao_reply(
    text: str,
    *,
    sql: str = "SELECT SUM(amount) AS total_revenue FROM orders",
    rows: list[dict[str, Any]] | None = None,
    verification_rows: list[dict[str, Any]] | None = None,
    expected_rows: list[dict[str, Any]] | None = None,
) -> BackendReply:
    """What nao-core 0.3.29's `/api/test/run` sends: one `execute_sql` call with its rows, the
    usage and cost of the run, and (with reference SQL) its verification."""
    rows = rows if rows is not None else [{"total_revenue": 132.75}]
    columns = list(rows[0]) if rows else []
    expected = expected_rows if expected_rows is not None else [{"total_revenue": 132.75}]
    return BackendReply(
        {
            "text": text,
            "toolCalls": [
                {
                    "toolName": "execute_sql",
                    "toolCallId": "call_1",
                    "args": {"sql_query": sql, "database_id": "shop"},
                    "result": {
                        "columns": columns,
                        "data": rows,
                        "row_count": len(rows),
                        "dialect": "duckdb",
                        "id": "query_1",
                    },
                }
            ],
            "usage": {
                "inputTotalTokens": 1200,
                "inputNoCacheTokens": 1000,
                "inputCacheReadTokens": 200,
                "outputTotalTokens": 80,
                "totalTokens": 1280,
            },
            "cost": {"inputNoCache": 0.002, "output": 0.00064, "totalCost": 0.00264},
            "finishReason": "stop",
            "durationMs": 2710,
            "verification": {
                "data": verification_rows if verification_rows is not None else rows,
                "expectedData": expected,
                "expectedColumns": list(expected[0]) if expected else [],
                "sql": "SELECT total_revenue FROM query_1",
                "error": None,
            },
        }
    )


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    backend: FakeNaoBackend

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"null")
        if self.path == "/api/auth/sign-in/email":
            self._sign_in(body)
        elif self.path == "/api/test/run":
            self._run(body)
        else:
            self._send(404, {"message": "Not Found"})

    def _sign_in(self, body: dict[str, Any]) -> None:
        backend = self.backend
        with backend._lock:
            backend.sign_ins.append(body)
            if backend.accounts.get(body.get("email")) != body.get("password"):
                self._send(
                    401,
                    {"code": "INVALID_EMAIL_OR_PASSWORD", "message": "Invalid email or password"},
                )
                return
            token = secrets.token_urlsafe(16)
            backend.sessions.add(token)
        self._send(
            200,
            {"redirect": False, "token": token, "user": {"email": body["email"]}},
            cookie=f"{COOKIE_NAME}={token}.sig; Max-Age=604800; Path=/; HttpOnly; SameSite=Lax"
            + (f"; Padding={'p' * backend.cookie_padding}" if backend.cookie_padding else ""),
        )

    def _run(self, body: dict[str, Any]) -> None:
        backend = self.backend
        cookie = self.headers.get("Cookie")
        token = (cookie or "").partition(f"{COOKIE_NAME}=")[2].split(";")[0].removesuffix(".sig")
        with backend._lock:
            index = len(backend.runs)
            backend.runs.append(RunRequest(body, cookie))
            signed_in = token in backend.sessions and not backend.refuse_runs
        if not signed_in:
            self._send(401, {"code": "UNAUTHORIZED", "message": "Unauthorized"})
            return
        reply = backend.script(body, index)
        if reply.delay_s:
            time.sleep(reply.delay_s)
        self._send(reply.status, reply.body)

    def _send(self, status: int, body: Any, *, cookie: str | None = None) -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        with suppress(OSError):  # the client may have given up (a timeout test)
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            if cookie:
                self.send_header("Set-Cookie", cookie)
            self.end_headers()
            self.wfile.write(raw)


@contextmanager
def fake_nao_backend(
    script: Callable[[dict[str, Any], int], BackendReply] | None = None,
) -> Iterator[FakeNaoBackend]:
    """A stand-in backend on a free port of 127.0.0.1 for the `with` block."""
    backend = FakeNaoBackend(script or (lambda _body, _i: nao_reply("Total revenue is 132.75.")))
    handler = type("Handler", (_Handler,), {"backend": backend})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    backend.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield backend
    finally:
        server.shutdown()
        server.server_close()
