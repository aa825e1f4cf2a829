"""The HTTP plumbing: a stdlib threading server that hands each request to the routes."""

from __future__ import annotations

import sys
import threading
import webbrowser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from eval_pipeline.store import StateFolder
from eval_pipeline.viewer._routes import (
    SECURITY_HEADERS,
    Request,
    Response,
    ViewerApp,
    host_allowed,
    message_page,
)

MAX_BODY = 32_000  # a label form is a few KB at most
MAX_DRAINED = 1_000_000


#: Headers a check reads, so a request may send each at most once.
_SINGLE_HEADERS = ("host", "origin", "referer", "content-length")


class ViewerServer(ThreadingHTTPServer):
    """Serves one store; `quiet` keeps the request log off (tests)."""

    daemon_threads = True

    def __init__(
        self, address: tuple[str, int], layout: StateFolder, *, quiet: bool = False
    ) -> None:
        self.app = ViewerApp(layout)  # before binding: a store that cannot be read fails first
        self.bound_host = address[0]
        self.quiet = quiet
        super().__init__(address, _Handler)

    def server_close(self) -> None:
        super().server_close()
        self.app.reader.close()

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        shown = f"[{host}]" if ":" in str(host) else host
        return f"http://{shown}:{port}"


class _Handler(BaseHTTPRequestHandler):
    server: ViewerServer
    server_version = "eval-pipeline-viewer"
    sys_version = ""
    protocol_version = "HTTP/1.1"

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_HEAD(self) -> None:
        self._dispatch("HEAD")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        headers = {k.lower(): v for k, v in self.headers.items()}  # a repeated header: the last
        if any(len(self.headers.get_all(name, [])) > 1 for name in _SINGLE_HEADERS):
            # ...so a second Host (Origin, Referer, Content-Length) could slip past the checks
            # of the first: refused, as RFC 9112 asks for Host.
            self.close_connection = True
            self._send(message_page(400, "Bad request", "A header that must appear once repeats."))
            return
        if not host_allowed(headers.get("host", ""), self.server.bound_host):
            self._send(
                message_page(400, "Bad request", "This server only answers on its own address.")
            )
            return
        body = b""
        if method == "POST":
            try:
                length = int(headers.get("content-length", "0"))
            except ValueError:
                length = -1
            if not 0 <= length <= MAX_BODY:
                if 0 < length <= MAX_DRAINED:
                    self.rfile.read(length)  # read it, so the client sees the answer, not a reset
                self.close_connection = True
                self._send(message_page(400, "Bad request", "The form is missing or too large."))
                return
            body = self.rfile.read(length)
        response = self.server.app.handle(Request(method, self.path, headers, body))
        self._send(response, head_only=method == "HEAD")

    def _send(self, response: Response, *, head_only: bool = False) -> None:
        self.send_response(response.status)
        headers = {**SECURITY_HEADERS, **response.headers}
        headers["Content-Length"] = str(len(response.body))
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        if not head_only and response.body:
            self.wfile.write(response.body)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """http.server's own errors (malformed request, unknown method) as our page."""
        short = self.responses.get(code, ("Error", ""))[0]
        self.close_connection = True
        response = message_page(code, short, explain or message or short)
        response.headers["Connection"] = "close"
        self._send(response, head_only=getattr(self, "command", "") == "HEAD")

    def log_message(self, format: str, *args: object) -> None:
        if not self.server.quiet:
            super().log_message(format, *args)


def make_server(
    layout: StateFolder, *, host: str = "127.0.0.1", port: int = 8765, quiet: bool = False
) -> ViewerServer:
    """A server for the store, bound but not yet serving (port 0 picks a free port)."""
    return ViewerServer((host, port), layout, quiet=quiet)


def serve(
    layout: StateFolder,
    *,
    host: str = "127.0.0.1",
    port: int = 8765,
    open_browser: bool = True,
) -> None:
    """Serve the results viewer until Ctrl+C. It binds 127.0.0.1 unless told otherwise."""
    server = make_server(layout, host=host, port=port)
    print(f"Results viewer on {server.url}  (store {layout.root}; Ctrl+C to stop)", file=sys.stderr)
    if open_browser:
        threading.Timer(0.5, webbrowser.open, args=(server.url,)).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
