"""Throwaway PostgreSQL and MariaDB servers for tests: Debian's binaries, a temp folder, a free port.

The servers refuse to run as root (`initdb` does; `mariadbd` wants `--user`), so under root
they run as `nobody`. Each server has an owner account (`evaluser`: PostgreSQL's superuser,
MariaDB's user with every privilege, FILE included) that sets it up, and the warehouse
fixtures give tests a read-only role made as the README tells users to (`read_only_role`);
the sandbox tests use the owner with `allow_privileged_role` to prove that the statement
check alone also stops hostile SQL.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

POSTGRES_BIN = Path("/usr/lib/postgresql/15/bin")
MARIADBD = shutil.which("mariadbd") or "/usr/sbin/mariadbd"
MARIADB_INSTALL_DB = shutil.which("mariadb-install-db") or "/usr/bin/mariadb-install-db"
_SERVICE_USER = "nobody"
#: A read the sandbox allows that keeps the server busy for minutes (CPU only, no temp file):
#: what the time-limit and lost-server tests run, sleeps being refused.
SLOW_QUERY = {
    "postgres": "SELECT sum(a * b) AS s FROM generate_series(1, 100000) a, generate_series(1, 100000) b",
    "mysql": "SELECT sum(a.seq * b.seq) AS s FROM seq_1_to_100000 a, seq_1_to_100000 b",
}
_START_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Server:
    """A running database server the tests may connect to."""

    kind: str  # "postgres" | "mysql"
    host: str
    port: int
    user: str
    password: str
    dbname: str
    folder: Path
    #: The account that owns the server, when this one is a read-only role on it.
    admin: Server | None = None
    #: The server's main process (PostgreSQL's postmaster, mariadbd).
    pid: int = 0

    @property
    def owner(self) -> Server:
        """The account with every privilege (setting up, inspecting, ending sessions)."""
        return self.admin or self

    @property
    def url(self) -> str:
        scheme = "postgresql" if self.kind == "postgres" else "mysql"
        return f"{scheme}://{self.user}:{self.password}@{self.host}:{self.port}/{self.dbname}"


def postgres_missing() -> str | None:
    """Why a PostgreSQL server cannot be started here, or None."""
    if not (POSTGRES_BIN / "initdb").exists():
        return f"PostgreSQL 15 is not installed ({POSTGRES_BIN}); apt-get install postgresql-15"
    return None


def mariadb_missing() -> str | None:
    """Why a MariaDB server cannot be started here, or None."""
    if not (Path(MARIADBD).exists() and Path(MARIADB_INSTALL_DB).exists()):
        return "MariaDB is not installed (mariadbd); apt-get install mariadb-server"
    return None


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _as_service_user() -> dict:
    """subprocess arguments that drop root to the service user (nothing when not root)."""
    return {"user": _SERVICE_USER, "group": "nogroup"} if os.geteuid() == 0 else {}


@contextlib.contextmanager
def _service_folder(prefix: str) -> Iterator[Path]:
    """A temp folder the service user owns, removed afterwards.

    Not pytest's tmp_path: under root it sits in a 0700 folder the service user cannot enter.
    """
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        if os.geteuid() == 0:
            shutil.chown(folder, _SERVICE_USER, "nogroup")
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _run(command: list[str], **kwargs) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr or done.stdout}")


def _wait_for_port(port: int, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + _START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited at start:\n{log.read_text(errors='replace')}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.1)
    raise RuntimeError(f"the server did not listen within {_START_TIMEOUT_S} s")


def _stop(process: subprocess.Popen) -> None:
    process.terminate()
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


@contextlib.contextmanager
def postgres_server() -> Iterator[Server]:
    """A PostgreSQL 15 with password (scram) authentication on 127.0.0.1, stopped on exit."""
    with _service_folder("eval-postgres-") as folder:
        yield from _run_postgres(folder)


@pytest.fixture(scope="module")
def dagster_postgres() -> Iterator[Server]:
    """An empty PostgreSQL for a Dagster instance's storage (deploy/dagster.yaml), per module."""
    if (reason := postgres_missing()) is not None:
        pytest.skip(reason)
    with postgres_server() as server:
        yield server


def _run_postgres(folder: Path) -> Iterator[Server]:
    password = "pg-" + secrets.token_hex(12)
    pwfile = folder / "pwfile"
    pwfile.write_text(password + "\n")
    if os.geteuid() == 0:
        shutil.chown(pwfile, _SERVICE_USER, "nogroup")
    data = folder / "data"
    _run(
        [
            str(POSTGRES_BIN / "initdb"),
            "-D",
            str(data),
            "-U",
            "evaluser",
            "-A",
            "scram-sha-256",
            "--pwfile",
            str(pwfile),
            "-E",
            "UTF8",
            "--no-sync",
        ],
        **_as_service_user(),
    )
    port = free_port()
    log = folder / "postgres.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [
                str(POSTGRES_BIN / "postgres"),
                "-D",
                str(data),
                "-p",
                str(port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                f"unix_socket_directories={folder}",
                "-c",
                "fsync=off",
                "-c",
                "TimeZone=UTC",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            **_as_service_user(),
        )
    try:
        _wait_for_port(port, process, log)
        server = Server(
            "postgres", "127.0.0.1", port, "evaluser", password, "postgres", folder, pid=process.pid
        )
        _wait_until_accepting(server)
        yield server
    finally:
        _stop(process)


@contextlib.contextmanager
def mariadb_server() -> Iterator[Server]:
    """A MariaDB on its own datadir, socket and port, with a password user `evaluser`."""
    with _service_folder("eval-mariadb-") as folder:
        yield from _run_mariadb(folder)


def _run_mariadb(folder: Path) -> Iterator[Server]:
    data, sock = folder / "data", folder / "mysqld.sock"
    _run(
        [
            MARIADB_INSTALL_DB,
            "--no-defaults",
            f"--datadir={data}",
            "--skip-test-db",
            "--auth-root-authentication-method=normal",
        ],
        **_as_service_user(),
    )
    port = free_port()
    log = folder / "mariadb.log"
    process = subprocess.Popen(
        [
            MARIADBD,
            "--no-defaults",
            f"--datadir={data}",
            f"--socket={sock}",
            f"--port={port}",
            "--bind-address=127.0.0.1",
            f"--pid-file={folder / 'mysqld.pid'}",
            f"--log-error={log}",
            "--secure-file-priv=",
            "--skip-log-bin",
            "--default-time-zone=+00:00",
            "--innodb-flush-log-at-trx-commit=0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        **_as_service_user(),
    )
    try:
        _wait_for_port(port, process, log)
        import pymysql

        password = "my-" + secrets.token_hex(12)
        root = pymysql.connect(unix_socket=str(sock), user="root", autocommit=True)
        with root.cursor() as cursor:
            cursor.execute("CREATE DATABASE shop")
            cursor.execute("CREATE USER 'evaluser'@'%%' IDENTIFIED BY %s", (password,))
            cursor.execute("GRANT ALL PRIVILEGES ON *.* TO 'evaluser'@'%' WITH GRANT OPTION")
        root.close()
        yield Server(
            "mysql", "127.0.0.1", port, "evaluser", password, "shop", folder, pid=process.pid
        )
    finally:
        _stop(process)


READ_ONLY_USER = "eval_reader"


def mysql_connection(server: Server, *, database: bool = True):  # -> pymysql.Connection
    """An autocommit PyMySQL session on `server` as its user, in its database or none."""
    import pymysql

    return pymysql.connect(
        host=server.host,
        port=server.port,
        user=server.user,
        password=server.password,
        database=server.dbname if database else None,
        autocommit=True,
    )


@contextlib.contextmanager
def global_sql_mode(server: Server, mode: str) -> Iterator[None]:
    """MariaDB's global `sql_mode` set to `mode` by the owner, as a server configured with
    `--sql-mode` would have it: every session opened meanwhile starts in it. Restored on exit."""
    connection = mysql_connection(server.owner, database=False)
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT @@GLOBAL.sql_mode")
            (before,) = cursor.fetchone()
            cursor.execute("SET GLOBAL sql_mode = %s", (mode,))
        try:
            yield
        finally:
            with connection.cursor() as cursor:
                cursor.execute("SET GLOBAL sql_mode = %s", (before,))
    finally:
        connection.close()


def read_only_role(server: Server) -> Server:
    """`server` seen through a new read-only role, made with the README's statements."""
    password = "ro-" + secrets.token_hex(12)
    if server.kind == "postgres":
        import psycopg

        with psycopg.connect(server.url, autocommit=True) as connection:
            for statement in (
                f"CREATE ROLE {READ_ONLY_USER} LOGIN PASSWORD '{password}'",
                f"GRANT CONNECT ON DATABASE {server.dbname} TO {READ_ONLY_USER}",
                f"GRANT USAGE ON SCHEMA public TO {READ_ONLY_USER}",
                f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {READ_ONLY_USER}",
                f"REVOKE TEMPORARY ON DATABASE {server.dbname} FROM PUBLIC",
            ):
                connection.execute(statement)
    else:
        connection = mysql_connection(server, database=False)
        with connection.cursor() as cursor:
            cursor.execute(f"CREATE USER '{READ_ONLY_USER}'@'%%' IDENTIFIED BY %s", (password,))
            cursor.execute(
                f"GRANT SELECT, SHOW VIEW ON {server.dbname}.* TO '{READ_ONLY_USER}'@'%'"
            )
        connection.close()
    return dataclasses.replace(server, user=READ_ONLY_USER, password=password, admin=server)


@contextlib.contextmanager
def frozen(server: Server) -> Iterator[None]:
    """`kill -STOP` the server and every process it started (PostgreSQL's backends), as a
    hung host would be: its sockets stay open and its kernel still acknowledges, but nothing
    answers. `SIGCONT` on exit."""
    import signal

    pids = [server.pid, *_children(server.pid)]
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    found.append(int(entry.name))
    return found


def _wait_until_accepting(server: Server) -> None:
    import psycopg

    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        try:
            psycopg.connect(server.url, connect_timeout=2).close()
            return
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
