"""Scripted model servers on 127.0.0.1 for driving the real agent clients offline.

`FakeAnthropic` speaks the Messages API as Claude Code calls it (`POST /v1/messages`, streamed as
server-sent events, tool_use blocks included); `FakeGemini` speaks the Gemini API as Gemini CLI calls
it (`:streamGenerateContent?alt=sse` and `:generateContent`, functionCall parts included); `FakeOpenAI`
speaks the Responses API as Codex calls it (`POST /v1/responses`, streamed as server-sent events,
function and custom tool calls included). Each plays a script: one reply per request of the agent's
own loop (a request that offers tools), each reply a list of blocks or a function of the request body
that returns one (to use an id a tool returned, or to wait for a tool to be offered). Any other
request is one of the client's side calls (titles, summaries, checks) and gets a short text.
Every request body is kept in `requests` for the test's assertions.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["FakeAnthropic", "FakeGemini", "FakeOpenAI", "custom_tool", "text", "tool"]

Block = dict[str, Any]
Step = list[Block] | Callable[[dict[str, Any]], list[Block]]


def text(t: str) -> Block:
    return {"type": "text", "text": t}


def tool(name: str, /, **args: Any) -> Block:
    return {"type": "tool_use", "name": name, "input": args}


def custom_tool(name: str, text: str, /) -> Block:
    """A call of a freeform tool, whose input is text (Codex's apply_patch)."""
    return {"type": "custom_tool", "name": name, "input": text}


class _Server:
    """The HTTP plumbing both fakes share: a thread, a port, the recorded requests, the script."""

    def __init__(self, script: list[Step] | None = None, final: str = "Done."):
        self.script: list[Step] = list(script or [])
        self.final = final  # what the agent loop gets once the script is used up: end the turn
        self.requests: list[dict[str, Any]] = []  # every request: path, body, whether it was the loop's
        self.errors: list[str] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # quiet: the test reads self.requests
                pass

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_GET(self) -> None:
                fake._json(self, 200, fake.on_get(self.path))

            def do_POST(self) -> None:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                try:
                    fake.on_post(self, self.path, body)
                except Exception as e:  # noqa: BLE001 (a broken script shows in the test, not as a hung client)
                    fake.errors.append(f"{type(e).__name__}: {e}")
                    fake._json(self, 500, {"error": {"type": "api_error", "message": str(e)}})

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def next_step(self, body: dict[str, Any]) -> list[Block]:
        with self._lock:
            step = self.script.pop(0) if self.script else [text(self.final)]
        return step(body) if callable(step) else step

    def loop_requests(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests if r["loop"]]

    def on_get(self, path: str) -> dict[str, Any]:
        return {}

    def on_post(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        raise NotImplementedError

    @staticmethod
    def _json(h: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        h.send_response(status)
        h.send_header("Content-Type", "application/json")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)

    @staticmethod
    def _sse(h: BaseHTTPRequestHandler, events: list[tuple[str | None, Any]]) -> None:
        chunks = []
        for name, data in events:
            chunks.append((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n")
        payload = "".join(chunks).encode()
        h.send_response(200)
        h.send_header("Content-Type", "text/event-stream")
        h.send_header("Cache-Control", "no-cache")
        h.send_header("Content-Length", str(len(payload)))
        h.end_headers()
        h.wfile.write(payload)


class FakeAnthropic(_Server):
    """`ANTHROPIC_BASE_URL=fake.url`: Claude Code's Messages API."""

    model = "claude-sonnet-4-5"

    def on_get(self, path: str) -> dict[str, Any]:
        if path.startswith("/v1/models"):
            return {"data": [{"type": "model", "id": self.model, "display_name": "fake"}], "has_more": False}
        return {}

    def on_post(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if "/count_tokens" in path:
            self.requests.append({"path": path, "body": body, "loop": False})
            self._json(h, 200, {"input_tokens": 1000})
            return
        loop = bool(body.get("tools"))
        self.requests.append({"path": path, "body": body, "loop": loop})
        blocks = self.next_step(body) if loop else [text("Scripted session")]
        msg_id = f"msg_{uuid.uuid4().hex[:20]}"
        content = []
        for b in blocks:
            if b["type"] == "tool_use":
                content.append(
                    {"type": "tool_use", "id": f"toolu_{uuid.uuid4().hex[:20]}", "name": b["name"], "input": b["input"]}
                )
            else:
                content.append(b)
        stop = "tool_use" if any(b["type"] == "tool_use" for b in content) else "end_turn"
        usage = {"input_tokens": 10, "output_tokens": 5, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not body.get("stream"):
            self._json(
                h,
                200,
                {
                    "id": msg_id,
                    "type": "message",
                    "role": "assistant",
                    "model": body.get("model"),
                    "content": content,
                    "stop_reason": stop,
                    "stop_sequence": None,
                    "usage": usage,
                },
            )
            return
        events: list[tuple[str | None, Any]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": msg_id,
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model") or self.model,
                        "content": [],
                        "stop_reason": None,
                        "stop_sequence": None,
                        "usage": usage,
                    },
                },
            )
        ]
        for i, b in enumerate(content):
            if b["type"] == "tool_use":
                start = {**b, "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
            else:
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": b["text"]}
            events += [
                ("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                ("content_block_stop", {"type": "content_block_stop", "index": i}),
            ]
        events += [
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop, "stop_sequence": None},
                    "usage": {"output_tokens": 5},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        self._sse(h, events)


def anthropic_text(body: dict[str, Any]) -> str:
    """All the text a Messages request carries (system prompt, messages, tool results), for asserts."""
    return json.dumps({"system": body.get("system"), "messages": body.get("messages")}, ensure_ascii=False)


def tool_results(body: dict[str, Any]) -> list[str]:
    """The tool_result contents of a Messages request's last user turn, as text."""
    out = []
    for m in body.get("messages") or []:
        if m.get("role") != "user" or not isinstance(m.get("content"), list):
            continue
        for c in m["content"]:
            if c.get("type") == "tool_result":
                inner = c.get("content")
                out.append(inner if isinstance(inner, str) else json.dumps(inner))
    return out


class FakeGemini(_Server):
    """`GOOGLE_GEMINI_BASE_URL=fake.url`: Gemini CLI's generateContent API."""

    def on_post(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        if ":countTokens" in path:
            self.requests.append({"path": path, "body": body, "loop": False})
            self._json(h, 200, {"totalTokens": 1000})
            return
        loop = bool(body.get("tools")) and any(t.get("functionDeclarations") for t in body["tools"])
        self.requests.append({"path": path, "body": body, "loop": loop})
        if loop:
            parts = []
            for b in self.next_step(body):
                if b["type"] == "tool_use":
                    parts.append({"functionCall": {"name": b["name"], "args": b["input"]}})
                else:
                    parts.append({"text": b["text"]})
        else:
            config = body.get("generationConfig") or {}
            schema = config.get("responseJsonSchema") or config.get("responseSchema")
            if schema or config.get("responseMimeType") == "application/json":
                # Its side calls that want JSON (routing, next speaker) get the least answer their schema takes.
                parts = [{"text": json.dumps(least_value(schema or {"type": "object"}))}]
            else:
                parts = [{"text": "Scripted session"}]
        response = {
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
            "modelVersion": "gemini-2.5-flash",
        }
        if ":streamGenerateContent" in path:
            self._sse(h, [(None, response)])
        else:
            self._json(h, 200, response)


def least_value(schema: dict[str, Any]) -> Any:
    """A small value that satisfies a JSON schema (Gemini's uppercase type names too)."""
    kind = str(schema.get("type", "object")).lower()
    if schema.get("enum"):
        return schema["enum"][0]
    if kind == "object":
        props = schema.get("properties") or {}
        return {k: least_value(props[k]) for k in (schema.get("required") or props) if k in props}
    return {"string": "scripted", "integer": 1, "number": 1, "boolean": False, "array": []}.get(kind)


def gemini_text(body: dict[str, Any]) -> str:
    return json.dumps({"system": body.get("systemInstruction"), "contents": body.get("contents")}, ensure_ascii=False)


class FakeOpenAI(_Server):
    """A custom model provider's `base_url = fake.url + "/v1"` in Codex's config.toml: the Responses API.

    Codex streams every turn (`POST /v1/responses`, `stream: true`) and reads the events
    openai/codex codex-rs/codex-api/src/sse/responses.rs `process_sse` handles: `response.created`,
    one `response.output_item.done` per item (a `message`, a `function_call` with its arguments as
    a JSON string and, for an MCP server's tool, the server's `namespace`, or a `custom_tool_call`
    with text `input`), then `response.completed` with the response id and usage; a stream that
    ends without it is an error. A tool_use block named "NAMESPACE/TOOL" is a call of TOOL in
    NAMESPACE (Codex names an MCP server's namespace `mcp__SERVER`).
    """

    model = "gpt-5.5"

    def on_get(self, path: str) -> dict[str, Any]:
        if "/models" in path:
            return {"object": "list", "data": [{"id": self.model, "object": "model", "owned_by": "fake"}]}
        return {}

    def on_post(self, h: BaseHTTPRequestHandler, path: str, body: dict[str, Any]) -> None:
        loop = path.rstrip("/").endswith("/responses") and bool(body.get("tools"))
        self.requests.append({"path": path, "body": body, "loop": loop})
        items = []
        for b in self.next_step(body) if loop else [text("Scripted session")]:
            call_id = f"call_{uuid.uuid4().hex[:20]}"
            if b["type"] == "tool_use":
                namespace, _, name = b["name"].rpartition("/")
                item = {"type": "function_call", "name": name, "arguments": json.dumps(b["input"]), "call_id": call_id}
                items.append({**item, "namespace": namespace} if namespace else item)
            elif b["type"] == "custom_tool":
                items.append({"type": "custom_tool_call", "name": b["name"], "input": b["input"], "call_id": call_id})
            else:
                items.append(
                    {
                        "type": "message",
                        "role": "assistant",
                        "status": "completed",
                        "content": [{"type": "output_text", "text": b["text"], "annotations": []}],
                    }
                )
        response_id = f"resp_{uuid.uuid4().hex[:20]}"
        events: list[tuple[str | None, Any]] = [
            ("response.created", {"type": "response.created", "response": {"id": response_id, "status": "in_progress"}})
        ]
        for i, item in enumerate(items):
            item = {"id": f"item_{uuid.uuid4().hex[:20]}", **item}
            events.append(
                ("response.output_item.done", {"type": "response.output_item.done", "output_index": i, "item": item})
            )
        usage = {
            "input_tokens": 10,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 15,
        }
        events.append(
            (
                "response.completed",
                {"type": "response.completed", "response": {"id": response_id, "status": "completed", "usage": usage}},
            )
        )
        self._sse(h, events)


def openai_text(body: dict[str, Any]) -> str:
    """All the text a Responses request carries (instructions and input items), for asserts."""
    return json.dumps({"instructions": body.get("instructions"), "input": body.get("input")}, ensure_ascii=False)
