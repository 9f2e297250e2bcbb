"""The real Codex CLI for the host tests: installed once from the npm registry into the cache folder the
Claude Code test uses, and a loopback fake of the OpenAI Responses API. A plain module, imported by
test_codex.py."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from . import npm

CODEX_VERSION = "0.171.0"
MODEL = "gpt-fake-codex"
FAKE_KEY_VARIABLE = "CCLG_FAKE_OPENAI_KEY"  # the environment variable holding the fake provider's dummy key


def install_codex() -> Path:
    """The path of the pinned ``codex`` executable, installed on first use; skips when impossible."""
    return npm.install("@openai/codex", CODEX_VERSION, "codex", {"CODEX_HOME": "{home}/.codex"})


def provider_config(url: str) -> str:
    """The user's config.toml before ``cclg install codex`` merges into it: the fake model at ``url``,
    no retries, and no plugin sync (which would go to the network)."""
    return f"""\
model_provider = "fake"
model = "{MODEL}"
approval_policy = "never"
sandbox_mode = "read-only"

[model_providers.fake]
name = "fake loopback model"
base_url = "{url}"
wire_api = "responses"
env_key = "{FAKE_KEY_VARIABLE}"
request_max_retries = 0
stream_max_retries = 0

[features]
plugins = false
"""


# A responder gets a request body and returns the output items of the answer: ``{"type": "message",
# "text": ...}`` or ``{"type": "function_call", "name": ..., "arguments": {...}, "call_id": ...}``
# (plus any other fields, such as ``namespace``, copied into the item).
Responder = Callable[[dict[str, Any]], list[dict[str, Any]]]


class FakeResponses:
    """A fake OpenAI Responses API on 127.0.0.1: records every request and answers each
    ``POST .../responses`` with a server-sent event stream of the items ``responder`` returns."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []  # {"method", "path", "body", "at": time.monotonic()}
        self.responder: Responder = lambda body: [{"type": "message", "text": "ok"}]
        self._lock = threading.Lock()
        self._count = 0
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                fake._record(self.command, self.path, None)
                self._json(404, {"error": {"type": "not_found", "message": "fake"}})

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
                if self.path.split("?", 1)[0].endswith("/responses"):
                    self._stream(body, fake.responder(body))
                else:
                    self._json(404, {"error": {"type": "not_found", "message": "fake"}})

            def _json(self, status: int, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, body: dict[str, Any], outputs: list[dict[str, Any]]) -> None:
                data = "".join(
                    f"event: {event['type']}\ndata: {json.dumps(event)}\n\n" for event in fake._events(body, outputs)
                ).encode()
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
        return f"http://{host}:{port}/v1"

    def _record(self, method: str, path: str, body: dict[str, Any] | None) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body, "at": time.monotonic()})

    def _events(self, body: dict[str, Any], outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        with self._lock:
            self._count += 1
            number = self._count
        response_id = f"resp_fake{number:04d}"
        usage = {
            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110,
        }  # fmt: skip
        response = {"id": response_id, "object": "response", "model": body.get("model", "fake"), "output": []}
        events: list[dict[str, Any]] = [
            {"type": "response.created", "response": {**response, "status": "in_progress"}},
            {"type": "response.in_progress", "response": {**response, "status": "in_progress"}},
        ]
        done_items = []
        for index, output in enumerate(outputs):
            item_id = f"item_fake{number:04d}_{index}"
            if output["type"] == "message":
                text = output["text"]
                part = {"type": "output_text", "text": text, "annotations": []}
                item = {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": [part]}
                events += [
                    {"type": "response.output_item.added", "output_index": index,
                     "item": {**item, "status": "in_progress", "content": []}},
                    {"type": "response.content_part.added", "item_id": item_id, "output_index": index,
                     "content_index": 0, "part": {**part, "text": ""}},
                    {"type": "response.output_text.delta", "item_id": item_id, "output_index": index,
                     "content_index": 0, "delta": text},
                    {"type": "response.output_text.done", "item_id": item_id, "output_index": index,
                     "content_index": 0, "text": text},
                    {"type": "response.content_part.done", "item_id": item_id, "output_index": index,
                     "content_index": 0, "part": part},
                ]  # fmt: skip
            else:
                extra = {key: value for key, value in output.items() if key not in ("type", "arguments")}
                item = {"type": "function_call", "id": item_id, "status": "completed",
                        "arguments": json.dumps(output["arguments"]), **extra}  # fmt: skip
                events.append({"type": "response.output_item.added", "output_index": index,
                               "item": {**item, "status": "in_progress", "arguments": ""}})  # fmt: skip
            events.append({"type": "response.output_item.done", "output_index": index, "item": item})
            done_items.append(item)
        events.append(
            {"type": "response.completed", "response": {**response, "status": "completed", "output": done_items,
                                                         "usage": usage}}
        )  # fmt: skip
        for sequence, event in enumerate(events):
            event["sequence_number"] = sequence
        return events

    def responses(self) -> list[dict[str, Any]]:
        """The bodies of the ``/responses`` requests, in order."""
        with self._lock:
            return [
                r["body"] for r in self.requests
                if r["body"] is not None and r["path"].split("?", 1)[0].endswith("/responses")
            ]  # fmt: skip

    def __enter__(self) -> FakeResponses:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
