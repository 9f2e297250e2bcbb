"""A fake model API on 127.0.0.1 for the host tests, the part the Anthropic and the OpenAI fakes share:
the server and its thread, the record of every request, reading a POSTed JSON body, answering with JSON
or a server-sent event stream, and a 404 for every other method or path. A plain module."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, ClassVar, Self


class Reply:
    """How ``LoopbackModel.answer`` answers one request."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self._handler = handler

    def json(self, status: int, payload: dict[str, Any]) -> None:
        self._send(status, "application/json", json.dumps(payload).encode())

    def events(self, events: Iterable[tuple[str, dict[str, Any]]]) -> None:
        """A server-sent event stream of (event name, data) pairs."""
        data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
        self._send(200, "text/event-stream", data, {"Cache-Control": "no-cache"})

    def _send(self, status: int, kind: str, data: bytes, headers: dict[str, str] | None = None) -> None:
        handler = self._handler
        handler.send_response(status)
        for name, value in {"Content-Type": kind, **(headers or {}), "Content-Length": str(len(data))}.items():
            handler.send_header(name, value)
        handler.end_headers()
        handler.wfile.write(data)


class LoopbackModel:
    """Records every request (``{"method", "path", "body", "at": time.monotonic()}``) and hands each POST
    to ``answer``; a subclass says which paths it serves, and what its 404 says (``not_found``)."""

    url_suffix: ClassVar[str] = ""
    not_found: ClassVar[dict[str, Any]] = {}

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._count = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._record(self.command, self.path, None)
                Reply(self).json(404, fake.not_found)

            do_HEAD = do_GET
            do_DELETE = do_GET

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"unparsed": raw.decode("utf-8", "replace")}
                fake._record("POST", self.path, body)
                fake.answer(Reply(self), self.path.split("?", 1)[0], body)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    def answer(self, reply: Reply, route: str, body: dict[str, Any]) -> None:
        reply.json(404, self.not_found)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.url_suffix}"

    def posted(self, route_suffix: str) -> list[dict[str, Any]]:
        """The POST requests whose path (query left out) ends with ``route_suffix``, in order."""
        with self._lock:
            return [
                r for r in self.requests
                if r["body"] is not None and r["path"].split("?", 1)[0].endswith(route_suffix)
            ]  # fmt: skip

    def next_number(self) -> int:
        """1, 2, 3 ... across threads: for the ids of the answers."""
        with self._lock:
            self._count += 1
            return self._count

    def _record(self, method: str, path: str, body: dict[str, Any] | None) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body, "at": time.monotonic()})

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
