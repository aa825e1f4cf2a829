"""Real HTTP servers on 127.0.0.1 speaking OpenAI, Anthropic and the agent protocol, scripted per test.

A server answers each request with a `Step` (see `steps`), taken from its script: a list of
steps consumed in order, or a callable `(request, index) -> Step`. Every request is recorded
(`server.requests`) so tests can assert what was sent. The step builders are re-exported
here, so a test needs one import:

    from eval_pipeline_tests.agents.servers import ScriptedServer, sql_then_answer
    server.script(*sql_then_answer("SELECT SUM(amount) FROM orders", "Revenue is 42."))
"""

from __future__ import annotations

import asyncio
import itertools
import json
import multiprocessing
import multiprocessing.connection
import socket
import ssl
import struct
import threading
import time
import zlib
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager, suppress
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from eval_pipeline.agents import (
    ChatMessage,
    ChatModel,
    Completion,
    ProviderPool,
    RetryPolicy,
    ToolSpec,
)
from eval_pipeline.suite import (
    AgentConfig,
    ModelConfig,
    ModelCosts,
    ProviderConfig,
    SuiteConfig,
    Templated,
    TestDefaults,
)
from eval_pipeline_tests.agents.steps import (
    Call,
    RecordedRequest,
    Script,
    Step,
    Tokens,
    agent_reply,
    answer,
    by_turn,
    call,
    drip,
    error,
    execute_sql,
    exhausted,
    hang,
    json_body,
    large_body,
    missing_fields,
    not_json,
    rate_limited,
    repeat,
    reset,
    sql_then_answer,
    tool_calls,
)

__all__ = [
    "FAST_RETRY",
    "Call",
    "RecordedRequest",
    "Script",
    "ScriptedServer",
    "Step",
    "Tokens",
    "agent_reply",
    "answer",
    "by_turn",
    "call",
    "complete",
    "drip",
    "error",
    "execute_sql",
    "hang",
    "json_body",
    "large_body",
    "missing_fields",
    "not_json",
    "open_chat_model",
    "rate_limited",
    "repeat",
    "reset",
    "running",
    "sql_then_answer",
    "suite_config",
    "tool_calls",
]

WireProtocol = Literal["openai", "anthropic", "agent"]

#: Retries that take milliseconds, for tests against these servers; a 429 counts as an
#: attempt at once (no patience for the endpoint's pace: `test_rate_limits.py` has that).
FAST_RETRY = RetryPolicy(
    max_attempts=3, base_delay_s=0.01, max_delay_s=0.05, rate_limit_patience_s=0
)

_PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages", "agent": "/eval"}


# ---- the server --------------------------------------------------------------------------


class ScriptedServer:
    """A threaded HTTP server on 127.0.0.1 speaking one wire protocol, scripted per test.

    Args:
        protocol: ``openai``, ``anthropic`` or ``agent``.
        script: the initial script (see `script`).
        latency_s: added before every response, to simulate a slow endpoint.
        tls: a server-side TLS context: the server speaks https (see `self_signed`).
        keep_requests: keep every request for `requests` and `last`; a benchmark's server
            answers thousands and keeps none, so that it does not slow down as they pile up.
    """

    def __init__(
        self,
        protocol: WireProtocol,
        *,
        script: Script = (),
        latency_s: float = 0.0,
        tls: ssl.SSLContext | None = None,
        keep_requests: bool = True,
    ) -> None:
        self.protocol = protocol
        self.tls = tls
        self.path = _PATHS[protocol]
        self.latency_s = latency_s
        self._script: Script = script
        self._keep_requests = keep_requests
        self._received = 0
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._index_base = 0  # requests before the current script was set
        self._ids = itertools.count(1)
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.in_flight = 0
        self.peak_in_flight = 0  # most requests being answered at once: proof of concurrency
        #: Seconds each `drip` response lasted until the client hung up, by the server's clock.
        self.drip_durations: list[float] = []

    # -- lifecycle

    def start(self) -> ScriptedServer:
        handler = type("Handler", (_Handler,), {"server_state": self})
        httpd = _Server(("127.0.0.1", 0), handler)
        if self.tls is not None:
            httpd.socket = self.tls.wrap_socket(httpd.socket, server_side=True)
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- addresses and config

    @property
    def url(self) -> str:
        """The server root, e.g. ``http://127.0.0.1:54321``."""
        assert self._httpd is not None, "start the server first"
        host, port = self._httpd.server_address[:2]
        return f"{'https' if self.tls else 'http'}://{host}:{port}"

    @property
    def base_url(self) -> str:
        """What goes in `base_url` (providers) or `url` (agents) in eval_config.yaml."""
        return {"openai": f"{self.url}/v1", "anthropic": self.url, "agent": f"{self.url}/eval"}[
            self.protocol
        ]

    def provider(
        self,
        name: str | None = None,
        *,
        api_key: str | None = None,
        models: Sequence[ModelConfig] = (),
        costs: Mapping[str, ModelCosts] | None = None,
        timeout_s: float = 5.0,
        max_tokens: int | None = None,
    ) -> ProviderConfig:
        """A provider entry pointing at this server.

        Args:
            name: the provider name (default: the protocol's name).
            api_key: the key template, e.g. ``"{{ env('TEST_KEY') }}"``.
            models: configured models.
            costs: shorthand for models with configured costs, by model id.
            timeout_s: the client timeout.
            max_tokens: the provider's `max_tokens` setting.
        """
        assert self.protocol != "agent"
        configured = list(models) + [ModelConfig(m, c) for m, c in (costs or {}).items()]
        return ProviderConfig(
            name=name or self.protocol,
            protocol=self.protocol,
            api_key=Templated(api_key) if api_key else None,
            base_url=self.base_url,
            models=tuple(configured),
            timeout_s=timeout_s,
            max_tokens=max_tokens,
        )

    def agent(
        self,
        name: str = "my-agent",
        *,
        headers: Mapping[str, str] | None = None,
        timeout_s: float = 5.0,
    ) -> AgentConfig:
        """An `agents:` entry pointing at this server; header values are templates."""
        return AgentConfig(
            name=name,
            url=self.base_url,
            headers={k: Templated(v) for k, v in (headers or {}).items()},
            timeout_s=timeout_s,
        )

    # -- scripting and recording

    def script(self, *steps: Step) -> None:
        """Replace the script with `steps`, consumed in order from the next request on."""
        self.set_script(list(steps))

    def set_script(self, script: Script) -> None:
        """Replace the script with a list of steps or a callable `(request, index) -> Step`."""
        with self._lock:
            self._script = script
            self._index_base = self._received

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        with self._lock:
            return list(self._requests)

    @property
    def last(self) -> RecordedRequest:
        """The last request received."""
        requests = self.requests
        assert requests, "the server received no request"
        return requests[-1]

    def _next_step(self, request: RecordedRequest) -> Step:
        with self._lock:
            if self._keep_requests:
                self._requests.append(request)
            index = self._received - self._index_base
            self._received += 1
            script = self._script
        if request.path != self.path:
            return Step("json", status=404, error_message=f"no endpoint at {request.path}")
        if callable(script):
            return script(request, index)
        if index >= len(script):
            return exhausted(f"request {index + 1} but only {len(script)} step(s)")
        return script[index]

    def _render(self, step: Step, request: RecordedRequest) -> Any:
        if step.error_message is not None:
            return _error_body(self.protocol, step.status, step.error_message)
        if step.kind == "json":
            return step.body
        model = request.json.get("model", "scripted") if isinstance(request.json, dict) else ""
        return _RENDERERS[self.protocol](step, model, next(self._ids))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a benchmark connects dozens of clients at once
    allow_reuse_address = True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as httpx's pools expect
    # Headers and body go out in two writes; with Nagle's algorithm the body then waits for
    # the client's delayed ACK, adding ~40 ms to every response.
    disable_nagle_algorithm = True
    server_state: ScriptedServer
    timeout = 30  # a stuck client must not pin a thread forever

    def setup(self) -> None:
        super().setup()
        with self.server_state._lock:
            self.server_state._connections.add(self.connection)

    def finish(self) -> None:
        with self.server_state._lock:
            self.server_state._connections.discard(self.connection)
        with suppress(OSError):
            super().finish()

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output clean

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        state = self.server_state
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            parsed = json.loads(raw) if raw else None
        except ValueError:
            parsed = None
        request = RecordedRequest(
            method=self.command,
            path=self.path,
            headers={k.lower(): v for k, v in self.headers.items()},
            body=raw,
            json=parsed,
        )
        step = state._next_step(request)
        with state._lock:
            state.in_flight += 1
            state.peak_in_flight = max(state.peak_in_flight, state.in_flight)
        try:
            interrupted = state._stopping.wait(state.latency_s + step.delay_s)
        finally:
            with state._lock:
                state.in_flight -= 1
        if interrupted:
            return self._reset()
        if step.kind == "hang":
            state._stopping.wait(step.hang_s)
            self.close_connection = True
            return
        if step.kind == "reset":
            return self._reset()
        if step.kind == "drip":
            return self._drip(step.hang_s)
        if step.kind == "large":
            return self._large(step.size, gzip=step.gzip)
        if step.kind == "raw":
            payload, content_type = str(step.body).encode(), "text/html"
        else:
            payload = json.dumps(state._render(step, request)).encode()
            content_type = "application/json"
        try:
            self.send_response(step.status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(payload)))
            for key, value in step.headers:
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(payload)
        except OSError:
            self.close_connection = True  # the client gave up (timeout); nothing to answer

    def _drip(self, every_s: float) -> None:
        state = self.server_state
        started = time.monotonic()
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(b'{"text": "')
            self.wfile.flush()
            while not state._stopping.wait(every_s):
                self.wfile.write(b"x")
                self.wfile.flush()
        except OSError:
            pass  # the client hung up: that is the point
        with state._lock:
            state.drip_durations.append(time.monotonic() - started)

    def _large(self, size: int, *, gzip: bool) -> None:
        # {"text": "xxx…"} of `size` bytes, written a chunk at a time (never whole in memory).
        head, tail = b'{"text": "', b'"}'
        filler = max(0, size - len(head) - len(tail))
        chunk = b"x" * 65_536
        compressor = zlib.compressobj(6, zlib.DEFLATED, 31) if gzip else None
        self.close_connection = True
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if compressor is not None:
                self.send_header("Content-Encoding", "gzip")
            self.end_headers()  # no length: the body ends when the connection closes

            def write(data: bytes) -> None:
                out = compressor.compress(data) if compressor is not None else data
                if out:
                    self.wfile.write(out)

            write(head)
            while filler > 0:
                write(chunk[: min(filler, len(chunk))])
                filler -= len(chunk)
            write(tail)
            if compressor is not None:
                self.wfile.write(compressor.flush())
        except OSError:
            pass  # the client stopped reading

    def _reset(self) -> None:
        # SO_LINGER 0 makes close() send RST instead of FIN: a real "connection reset".
        self.close_connection = True
        with suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        # The socket closes once the read side made from it is closed too; the writer is
        # left open because the base handler flushes it after every request.
        self.rfile.close()
        self.connection.close()


def _serve_in_child(
    make_script: Callable[[], Script], latency_s: float, pipe: multiprocessing.connection.Connection
) -> None:
    with ScriptedServer(
        "openai", script=make_script(), latency_s=latency_s, keep_requests=False
    ) as server:
        pipe.send(server.base_url)
        pipe.recv()


class ServerProcess:
    """An OpenAI-compatible `ScriptedServer` in a child process, for benchmarks: a provider is
    another machine, so its threads must not share the GIL of the process being measured.
    It keeps none of the requests it answers: a server whose memory grew by every request
    of a benchmark (gigabytes over a few runs) answered slower with each repeat.

        with ServerProcess(three_completions, latency_s=0.5) as base_url: ...

    `make_script` builds the script in the child (a module-level function, to be pickled).
    """

    def __init__(self, make_script: Callable[[], Script], *, latency_s: float = 0.0) -> None:
        self._pipe, child = multiprocessing.Pipe()
        self._process = multiprocessing.Process(
            target=_serve_in_child, args=(make_script, latency_s, child), daemon=True
        )

    def __enter__(self) -> str:
        self._process.start()
        return self._pipe.recv()

    def __exit__(self, *exc: object) -> None:
        self._pipe.send("stop")
        self._process.join(timeout=10)


# ---- wire formats ------------------------------------------------------------------------


def _arguments_text(call: Call) -> str:
    return call.arguments if isinstance(call.arguments, str) else json.dumps(dict(call.arguments))


def _openai_reply(step: Step, model: str, n: int) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.calls:
        message["tool_calls"] = [
            {
                "id": f"call_{n}_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": _arguments_text(c)},
            }
            for i, c in enumerate(step.calls)
        ]
    t = step.tokens
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "length" if step.cut else "tool_calls" if step.calls else "stop",
            }
        ],
        "usage": {
            "prompt_tokens": t.input,
            "completion_tokens": t.output,
            "total_tokens": t.input + t.output,
            "prompt_tokens_details": {"cached_tokens": t.cached},
        },
    }


def _anthropic_reply(step: Step, model: str, n: int) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if step.text:
        content.append({"type": "text", "text": step.text})
    for i, c in enumerate(step.calls):
        # Anthropic always sends an object; a raw string here stands for a broken input.
        arguments = c.arguments if isinstance(c.arguments, str) else dict(c.arguments)
        content.append(
            {"type": "tool_use", "id": f"toolu_{n}_{i}", "name": c.name, "input": arguments}
        )
    t = step.tokens
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "max_tokens" if step.cut else "tool_use" if step.calls else "end_turn",
        "stop_sequence": None,
        "usage": {
            # Anthropic counts cache reads apart from `input_tokens`.
            "input_tokens": t.input - t.cached,
            "cache_read_input_tokens": t.cached,
            "cache_creation_input_tokens": 0,
            "output_tokens": t.output,
        },
    }


def _agent_reply(step: Step, _model: str, _n: int) -> dict[str, Any]:
    return {
        "text": step.text,
        "tool_calls": [
            {"name": c.name, "arguments": c.arguments, "result": None} for c in step.calls
        ],
        "usage": {"input_tokens": step.tokens.input, "output_tokens": step.tokens.output},
    }


_RENDERERS: dict[str, Callable[[Step, str, int], dict[str, Any]]] = {
    "openai": _openai_reply,
    "anthropic": _anthropic_reply,
    "agent": _agent_reply,
}


def _error_body(protocol: WireProtocol, status: int, message: str) -> dict[str, Any]:
    if protocol == "openai":
        return {"error": {"message": message, "type": f"http_{status}", "code": None}}
    if protocol == "anthropic":
        return {"type": "error", "error": {"type": f"http_{status}", "message": message}}
    return {"error": message}


def suite_config(*entries: ProviderConfig | AgentConfig, threads: int = 4) -> SuiteConfig:
    """A configuration holding the given providers and agents (e.g. `server.provider()`)."""
    return SuiteConfig(
        root=Path.cwd(),
        test=TestDefaults(threads=threads),
        providers=tuple(e for e in entries if isinstance(e, ProviderConfig)),
        agents=tuple(e for e in entries if isinstance(e, AgentConfig)),
    )


@asynccontextmanager
async def open_chat_model(
    server: ScriptedServer,
    model: str = "gpt-4.1",
    *,
    policy: RetryPolicy = FAST_RETRY,
    environ: Mapping[str, str] | None = None,
    threads: int = 4,
    **provider: Any,
) -> AsyncIterator[ChatModel]:
    """The chat model `<provider>:<model>` of a pool whose only provider is `server`.

    `threads` sizes the pool's connections; `provider` keywords go to
    `ScriptedServer.provider` (name, api_key, costs, timeout_s, max_tokens).
    """
    config = suite_config(server.provider(**provider), threads=threads)
    async with ProviderPool(config, policy=policy, environ=environ or {}) as pool:
        yield pool.chat_model(f"{config.providers[0].name}:{model}")


def complete(
    server: ScriptedServer,
    messages: Sequence[ChatMessage],
    tools: Sequence[ToolSpec] = (),
    *,
    max_tokens: int = 1000,
    **kwargs: Any,
) -> Completion:
    """One completion against `server`, synchronously (see `open_chat_model` for `kwargs`)."""

    async def go() -> Completion:
        async with open_chat_model(server, **kwargs) as model:
            return await model.complete(messages, tools=tools, max_tokens=max_tokens)

    return asyncio.run(go())


@contextmanager
def running(protocol: WireProtocol, **kwargs: Any) -> Iterator[ScriptedServer]:
    """A started server for the `with` block."""
    with ScriptedServer(protocol, **kwargs) as server:
        yield server


# ---- reading a recorded request ----------------------------------------------------------


def exchanges(request: RecordedRequest, protocol: str) -> list[tuple[str, str, Any, str]]:
    """(call id, tool, arguments, result text) of every tool call the request's transcript
    holds, each result taken from where the protocol puts it: OpenAI `tool` messages right
    after the assistant message, Anthropic `tool_result` blocks in the next user turn."""
    found = []
    messages = request.messages
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        if protocol == "openai":
            calls = [
                (c["id"], c["function"]["name"], c["function"]["arguments"])
                for c in message.get("tool_calls") or []
            ]
            results = []
            for following in messages[i + 1 :]:
                if following["role"] != "tool":
                    break
                results.append((following["tool_call_id"], following["content"]))
        else:
            calls = [
                (b["id"], b["name"], b["input"])
                for b in message["content"]
                if b["type"] == "tool_use"
            ]
            turn = messages[i + 1]["content"] if i + 1 < len(messages) else []
            results = [(b["tool_use_id"], b["content"]) for b in turn if b["type"] == "tool_result"]
        assert [r[0] for r in results] == [c[0] for c in calls], "results must answer the calls"
        found += [(c[0], c[1], c[2], r[1]) for c, r in zip(calls, results, strict=True)]
    return found


def system_text(request: RecordedRequest, protocol: str) -> str:
    """The system prompt the request sent, where the protocol puts it."""
    if protocol == "openai":
        first = request.messages[0]
        assert first["role"] == "system"
        return first["content"]
    return request.json["system"]


def offered_tools(request: RecordedRequest, protocol: str) -> list[str]:
    """The names of the tools the request offered the model."""
    tools = request.json.get("tools", [])
    return [t["function"]["name"] if protocol == "openai" else t["name"] for t in tools]


def self_signed(folder: Path) -> tuple[ssl.SSLContext, Path]:
    """A TLS context for a server on 127.0.0.1 with a certificate of its own, and the file of
    that certificate, which a client trusts through `SSL_CERT_FILE`."""
    from datetime import UTC, datetime, timedelta
    from ipaddress import IPv4Address

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(IPv4Address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "server.pem", folder / "server.key"
    cert_file.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert_file, key_file)
    return context, cert_file
