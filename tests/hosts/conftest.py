"""Fixtures for the host tests: the real Claude Code CLI, installed once from the npm registry into a
cache folder outside the repository, and a loopback fake of the Anthropic Messages API."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from . import npm

CLAUDE_CODE_VERSION = "2.1.197"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "hosts: runs a real agent CLI (installed from npm) against a loopback fake model"
    )


@pytest.fixture(scope="session")
def claude_bin() -> Path:
    quiet = {"DISABLE_AUTOUPDATER": "1", "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1"}
    return npm.install("@anthropic-ai/claude-code", CLAUDE_CODE_VERSION, "claude", quiet)


Responder = Callable[[dict[str, Any]], list[dict[str, Any]]]


class FakeAnthropic:
    """A fake Anthropic Messages API on 127.0.0.1: records every request and answers each
    ``/v1/messages`` call with the content blocks ``responder`` returns (streamed as SSE when asked)."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # {"method", "path", "body"}
        self.responder: Responder = lambda body: [{"type": "text", "text": "ok"}]
        self._lock = threading.Lock()
        self._count = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._record(self.command, self.path, None)
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake"}})

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
                route = self.path.split("?", 1)[0]
                if route.endswith("/v1/messages/count_tokens"):
                    self._json(200, {"input_tokens": 100})
                elif route.endswith("/v1/messages"):
                    blocks = fake.responder(body)
                    if body.get("stream"):
                        self._stream(body, blocks)
                    else:
                        self._json(200, fake._message(body, blocks))
                else:
                    self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "fake"}})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> None:
                message = fake._message(body, blocks)
                events: list[tuple[str, dict[str, Any]]] = [
                    ("message_start", {"type": "message_start", "message": {**message, "content": [],
                     "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
                ]  # fmt: skip
                for index, block in enumerate(blocks):
                    if block["type"] == "text":
                        start = {"type": "text", "text": ""}
                        delta = {"type": "text_delta", "text": block["text"]}
                    else:
                        start = {**block, "input": {}}
                        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
                    events += [
                        ("content_block_start",
                         {"type": "content_block_start", "index": index, "content_block": start}),
                        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}),
                        ("content_block_stop", {"type": "content_block_stop", "index": index}),
                    ]  # fmt: skip
                events += [
                    ("message_delta", {"type": "message_delta",
                     "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
                     "usage": {"output_tokens": 10}}),
                    ("message_stop", {"type": "message_stop"}),
                ]  # fmt: skip
                data = "".join(f"event: {name}\ndata: {json.dumps(payload)}\n\n" for name, payload in events).encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def _record(self, method: str, path: str, body: dict[str, Any] | None) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body})

    def _message(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
        with self._lock:
            self._count += 1
            number = self._count
        tool_use = any(block["type"] == "tool_use" for block in blocks)
        return {
            "id": f"msg_fake{number:04d}",
            "type": "message",
            "role": "assistant",
            "model": body.get("model", "claude-fake"),
            "content": blocks,
            "stop_reason": "tool_use" if tool_use else "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 100, "output_tokens": 10},
        }

    def messages(self) -> list[dict[str, Any]]:
        """The bodies of the ``/v1/messages`` requests, in order."""
        with self._lock:
            return [
                r["body"] for r in self.requests
                if r["body"] is not None and r["path"].split("?", 1)[0].endswith("/v1/messages")
            ]  # fmt: skip

    def __enter__(self) -> FakeAnthropic:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake
