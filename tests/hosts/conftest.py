"""Fixtures for the host tests: the real Claude Code CLI, installed once from the npm registry into a
cache folder outside the repository, and a loopback fake of the Anthropic Messages API."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest

from . import npm
from .loopback import LoopbackModel, Reply

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


class FakeAnthropic(LoopbackModel):
    """A fake Anthropic Messages API on 127.0.0.1: records every request and answers each
    ``/v1/messages`` call with the content blocks ``responder`` returns (streamed as SSE when asked)."""

    not_found: ClassVar[dict[str, Any]] = {"type": "error", "error": {"type": "not_found_error", "message": "fake"}}

    def __init__(self) -> None:
        super().__init__()
        self.responder: Responder = lambda body: [{"type": "text", "text": "ok"}]

    def answer(self, reply: Reply, route: str, body: dict[str, Any]) -> None:
        if route.endswith("/v1/messages/count_tokens"):
            reply.json(200, {"input_tokens": 100})
        elif route.endswith("/v1/messages"):
            blocks = self.responder(body)
            if body.get("stream"):
                reply.events(self._events(body, blocks))
            else:
                reply.json(200, self._message(body, blocks))
        else:
            reply.json(404, self.not_found)

    def _events(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
        message = self._message(body, blocks)
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": {**message, "content": [],
             "stop_reason": None, "usage": {"input_tokens": 100, "output_tokens": 1}}}),
        ]  # fmt: skip
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                start: dict[str, Any] = {"type": "text", "text": ""}
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
        return events

    def _message(self, body: dict[str, Any], blocks: list[dict[str, Any]]) -> dict[str, Any]:
        number = self.next_number()
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
        return [r["body"] for r in self.posted("/v1/messages")]


@pytest.fixture
def fake_anthropic() -> Iterator[FakeAnthropic]:
    with FakeAnthropic() as fake:
        yield fake
