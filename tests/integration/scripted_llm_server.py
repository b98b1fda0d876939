"""An OpenAI-compatible server whose every answer is scripted: a hostile tester's model, run as its own process.

    python tests/integration/scripted_llm_server.py PORT

`POST /script` {"steps": [step, …], "default": step} sets how the next completion requests are answered, one
step each, then `default` for every later one. A step is {"do": WHAT, "text": …} with WHAT one of:
  stream         a proper event stream (the default)
  whole          one JSON body, whatever `stream` asked (a server that ignores `stream: true`)
  refuse_stream  400 to a stream request, a JSON body otherwise
  hang           headers never come: the request waits until the client gives up
  not_json       200 with an HTML page
  no_choices     200 with JSON that has no `choices`
  status         `code` (400, 401, 404, 429, 500, …) with an OpenAI-style error body
A step's text may hold `{n}`: the number of the request (1, 2, …), so every answer differs. `"record": false` in
the script keeps no requests (a long benchmark); `"delay_s"` in a step: wait that long before answering (a slow
model, so a test can kill a worker mid-tick). `"answer_notes": "TEXT"` in a step: a request (not one asking for
JSON) whose last message shows the persona's unread notes (`[note N from …`) is answered with a thought that sends
TEXT (its `{note}` the note's id) to each of them with `messages.send` — a model that answers whoever wrote at once;
any other request gets the step's `text` (a free thought, a reflex's answer). `GET /requests` lists the completion
requests seen so far (path, stream, json, messages/prompt, `at` and `done_at`: when it came and when it was answered,
Unix seconds); `GET /v1/models` answers for readiness. `"vary": true` in a step: its text gets a sentence of
words drawn from the request's number, so no two thoughts repeat (the stagnation reflex sees new thoughts). The usage
every answer reports is that of a server with a prefix cache: `prompt_tokens` the request's characters / 4 and
`prompt_tokens_details.cached_tokens` those of the longest opening it shares with one of the last four requests
(llama.cpp's slots, an API's prompt cache); a request's `cache_prompt` is recorded. Standard library only.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_TEXT = "I am thinking about the sea."
NOTE_LINE = re.compile(
    r"^\[note (\d+) from ", re.MULTILINE
)  # the notes block's lines (nodes/steps/s04_prepare_context)
JSON_TEXT = '{"emotions": [], "drives": [], "rating": 0, "score": 0, "summary": "calm", "insights": []}'


WORDS = (
    "tide gull harbour lantern rope salt fog keel anchor pier net cloud rain stone moss bell window ember "
    "thread loom kettle orchard ladder compass chalk river meadow hinge feather quarry violin ember glass"
).split()
CACHE_SLOTS = 4  # the prompts a simulated prefix cache keeps


def varied(n: int) -> str:
    """A sentence of its own for request `n` (deterministic, never the same twice in a run)."""
    import random

    rng = random.Random(n)
    return " ".join(rng.sample(WORDS, 9)) + f" — and what it means, thought {n}."


def prompt_text(body: dict) -> str:
    if body.get("messages"):
        return "".join(f"<{m.get('role')}>{m.get('content')}" for m in body["messages"])
    return str(body.get("prompt") or "")


def shared_opening(a: str, b: str) -> int:
    """How many characters `a` and `b` share from their start."""
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


class Script:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[dict] = []
        self.default: dict = {"do": "stream"}
        self.requests: list[dict] = []
        self.record = True
        self.count = 0
        self.cached: list[str] = []  # the simulated prefix cache's last prompts

    def usage(self, prompt: str) -> dict:
        with self.lock:
            cached = max((shared_opening(prompt, seen) for seen in self.cached), default=0)
            self.cached = ([prompt] + self.cached)[:CACHE_SLOTS]
        return {"prompt_tokens": max(1, len(prompt) // 4), "prompt_tokens_details": {"cached_tokens": cached // 4}}

    def set(self, data: dict) -> None:
        with self.lock:
            self.steps = list(data.get("steps") or [])
            self.default = data.get("default") or {"do": "stream"}
            self.requests = []
            self.record = data.get("record", True) is not False

    def next(self, seen: dict) -> dict:
        with self.lock:
            self.count += 1
            if self.record:
                self.requests.append(seen)
            step = self.steps.pop(0) if self.steps else self.default
            if step.get("vary") and not seen.get("json"):
                return {**step, "text": varied(self.count)}
            return {**step, "text": step["text"].replace("{n}", str(self.count))} if step.get("text") else step

    def answered(self, seen: dict) -> None:
        with self.lock:
            seen["done_at"] = time.time()


def notes_answer(seen: dict, template: str) -> str | None:
    """A thought sending `template` to every note the request's last message shows (None: it shows none)."""
    last = (seen.get("messages") or [{}])[-1].get("content") if seen.get("messages") else seen.get("prompt")
    ids = NOTE_LINE.findall(last or "")
    if not ids:
        return None
    sends = [{"type": "messages.send", "args": {"text": template.replace("{note}", i), "note": int(i)}} for i in ids]
    return "Someone wrote to me; I answer at once.\n# Commands:\n" + json.dumps(sends) + "\n# End commands\n"


SCRIPT = Script()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, code: int, body: bytes, content_type: str = "application/json", headers: dict | None = None):
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, data, headers: dict | None = None) -> None:
        self._send(code, json.dumps(data).encode(), headers=headers)

    def do_GET(self) -> None:
        if self.path.endswith("/models"):
            self._json(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})
        elif self.path == "/requests":
            with SCRIPT.lock:
                self._json(200, list(SCRIPT.requests))
        else:
            self._json(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/script":
            SCRIPT.set(body)
            self._json(200, {"ok": True})
            return
        chat = self.path.endswith("/chat/completions")
        if not chat and not self.path.endswith("/completions"):
            self._json(404, {"error": {"message": f"no endpoint {self.path}"}})
            return
        wants_json = "response_format" in body or "json_schema" in body
        seen = {
            "path": self.path,
            "stream": bool(body.get("stream")),
            "json": wants_json,
            "messages": body.get("messages"),
            "prompt": body.get("prompt"),
            "authorization": self.headers.get("Authorization"),
            "at": time.time(),
            "cache_prompt": body.get("cache_prompt"),
        }
        usage = seen["usage"] = SCRIPT.usage(prompt_text(body))
        step = SCRIPT.next(seen)
        answer = notes_answer(seen, step["answer_notes"]) if step.get("answer_notes") and not wants_json else None
        text = answer or step.get("text") or (JSON_TEXT if wants_json else DEFAULT_TEXT)
        what = step.get("do", "stream")
        if step.get("delay_s"):
            time.sleep(float(step["delay_s"]))
        SCRIPT.answered(seen)
        if what == "hang":
            time.sleep(3600)
            return
        if what == "status":
            code = int(step.get("code", 500))
            headers = {"Retry-After": str(step["retry_after"])} if "retry_after" in step else None
            self._json(code, {"error": {"message": f"scripted {code}", "type": "scripted", "code": code}}, headers)
        elif what == "not_json":
            self._send(200, b"<html><body>502 Bad Gateway</body></html>", "text/html")
        elif what == "no_choices":
            self._json(200, {"object": "chat.completion", "model": "scripted"})
        elif what == "refuse_stream" and body.get("stream"):
            self._json(400, {"error": {"message": "stream is not supported"}})
        elif what == "stream" and body.get("stream"):
            self._stream(text, chat, usage)
        else:  # whole, refuse_stream without stream, stream without stream
            self._json(200, self._whole(text, chat, usage))

    @staticmethod
    def _whole(text: str, chat: bool, usage: dict) -> dict:
        choice = {
            "index": 0,
            "finish_reason": "stop",
            **({"message": {"role": "assistant", "content": text}} if chat else {"text": text}),
        }
        return {
            "id": "scripted",
            "object": "chat.completion" if chat else "text_completion",
            "model": "scripted",
            "choices": [choice],
            "usage": {**usage, "completion_tokens": 7, "total_tokens": usage["prompt_tokens"] + 7},
        }

    def _stream(self, text: str, chat: bool, usage: dict) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        words = text.split(" ")
        for i, word in enumerate(words):
            piece = word if i == 0 else " " + word
            choice = {"index": 0, **({"delta": {"content": piece}} if chat else {"text": piece})}
            self.wfile.write(f"data: {json.dumps({'choices': [choice]})}\n\n".encode())
        last = {"choices": [], "usage": {**usage, "completion_tokens": len(words)}}
        self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())
        self.wfile.flush()
        self.close_connection = True


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    server.daemon_threads = True
    server.serve_forever()


if __name__ == "__main__":
    main()
