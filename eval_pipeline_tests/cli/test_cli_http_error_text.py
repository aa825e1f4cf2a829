"""What an HTTP endpoint sends in its headers never reaches a stored error, and an error's text is bounded, through `eval-pipeline test`."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from eval_pipeline_tests.agents.nao_backend import fake_nao_backend
from eval_pipeline_tests.cli.console import no_traceback
from eval_pipeline_tests.cli.replay_suite import DAY
from eval_pipeline_tests.cli.test_cli_nao_backend import NAO_ARGS, as_json, write_project

pytestmark = pytest.mark.slow

#: The longest error a run keeps: the problem, the URL, the endpoint's words (300
#: characters at most) and what to do.
MAX_ERROR = 1_000


def _files_holding(root: Path, text: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and text.encode() in p.read_bytes()]


def test_a_sign_in_with_a_100_kb_set_cookie_leaves_no_token_in_any_file(tmp_path):
    """nao's backend answers the sign-in with a 100 KB `Set-Cookie` (past the 64 KB a
    header may take): every run is an error saying so, in a bounded line that quotes none
    of the header, so the session token is in no file of the project."""
    with fake_nao_backend() as backend:
        backend.cookie_padding = 100_000
        project = write_project(
            tmp_path / "shop", llm_url="http://127.0.0.1:9/v1", backend_url=backend.url
        )
        done = as_json(project, DAY, *NAO_ARGS)
        tokens = set(backend.sessions)
    no_traceback(done)
    assert done.returncode == 3, done.stdout + done.stderr  # error runs: a broken evaluation
    errors = [r["error"] for r in json.loads(done.stdout)["results"]]
    assert len(errors) == 3 and all(errors), errors
    for error in errors:
        assert "more than 65536 bytes" in error and "/api/auth/sign-in/email" in error, error
        assert len(error) < MAX_ERROR and "\n" not in error, error
        assert "ppppppppp" not in error and "session_token" not in error, error
    assert tokens  # the backend did hand out sessions
    for token in tokens:
        assert _files_holding(project, token) == []
        assert token not in done.stdout + done.stderr
    assert _files_holding(project, "ppppppppp") == []


@contextmanager
def _broken_http_server(reply: bytes) -> Iterator[str]:
    """A server on 127.0.0.1 that answers every request with `reply`, as bytes on the wire."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            with connection:
                connection.settimeout(5)
                try:
                    connection.recv(1 << 20)
                    connection.sendall(reply)
                except OSError:
                    pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(timeout=5)
        listener.close()


def test_a_header_the_parser_refuses_is_named_not_quoted(tmp_path):
    """A sign-in reply whose `Set-Cookie` line breaks HTTP: the error names what broke,
    without the bytes of the line, which hold the session token."""
    token = "tok-0123456789abcdef-SESSION"
    reply = (
        b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
        b"Set Cookie: better-auth.session_token=" + token.encode() + b"\r\n\r\n{}"
    )
    with _broken_http_server(reply) as url:
        project = write_project(tmp_path / "shop", llm_url="http://127.0.0.1:9/v1", backend_url=url)
        done = as_json(project, DAY, *NAO_ARGS)
    no_traceback(done)
    errors = [r["error"] for r in json.loads(done.stdout)["results"]]
    assert len(errors) == 3 and all(errors), errors
    for error in errors:
        assert "Invalid header token" in error and "\n" not in error, error
    assert token[:12] not in done.stdout + done.stderr
    assert _files_holding(project, token[:12]) == []
