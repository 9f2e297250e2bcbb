"""The real Codex CLI for the host tests: installed once from the npm registry into the cache folder the
Claude Code test uses, and a loopback fake of the OpenAI Responses API. A plain module, imported by
test_codex.py."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

from . import npm
from .loopback import LoopbackModel, Reply

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


class FakeResponses(LoopbackModel):
    """A fake OpenAI Responses API on 127.0.0.1: records every request and answers each
    ``POST .../responses`` with a server-sent event stream of the items ``responder`` returns."""

    url_suffix: ClassVar[str] = "/v1"
    not_found: ClassVar[dict[str, Any]] = {"error": {"type": "not_found", "message": "fake"}}

    def __init__(self) -> None:
        super().__init__()
        self.responder: Responder = lambda body: [{"type": "message", "text": "ok"}]

    def answer(self, reply: Reply, route: str, body: dict[str, Any]) -> None:
        if route.endswith("/responses"):
            reply.events((event["type"], event) for event in self._events(body, self.responder(body)))
        else:
            reply.json(404, self.not_found)

    def _events(self, body: dict[str, Any], outputs: list[dict[str, Any]]) -> list[dict[str, Any]]:
        number = self.next_number()
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
        return [r["body"] for r in self.posted("/responses")]
