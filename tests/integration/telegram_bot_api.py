"""A stand-in Telegram Bot API server for the Telegram channel's tests (the real one cannot be reached from here):
a small Starlette app, started as its own process by the test, speaking the methods the channel uses the way the
Bot API does — getMe, getUpdates (offset confirms, long polling with `timeout`), sendMessage, sendVoice and sendDocument
(multipart uploads), getFile and the file download under /file/bot<token>/<path> — with the Bot API's answer shapes
({"ok": true, "result": …}, errors with error_code/description, 429 with parameters.retry_after).

The test drives it through /_test/…: `message` queues an update from a person (text, a voice note or a document,
the file's bytes base64), `sent` lists what the bot sent (voice notes with their bytes' length and a hash),
`flood` makes the next Bot API call answer 429.

    python tests/integration/telegram_bot_api.py --port 8081 --token 123:abc
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

UNKNOWN_CHAT = 404  # sendMessage to it answers 400 "chat not found", as for a chat the bot never saw
BOT_USER = {"id": 4242, "is_bot": True, "first_name": "Anima", "username": "anima_bot"}


class BotApi:
    def __init__(self, token: str):
        self.token = token
        self.updates: list[dict[str, Any]] = []
        self.update_ids = itertools.count(1000)
        self.message_ids: dict[int, itertools.count[int]] = {}
        self.files: dict[str, tuple[bytes, str, str]] = {}  # file_id -> (bytes, file_path, mime)
        self.file_numbers = itertools.count(1)
        self.sent: list[dict[str, Any]] = []
        self.arrived = asyncio.Event()
        self.flood_next = 0

    def next_message_id(self, chat_id: int) -> int:
        return next(self.message_ids.setdefault(chat_id, itertools.count(1)))

    def store_file(self, data: bytes, folder: str, suffix: str, mime: str) -> dict[str, Any]:
        number = next(self.file_numbers)
        file_id = f"FILE{number:04d}"
        self.files[file_id] = (data, f"{folder}/file_{number}.{suffix}", mime)
        return {"file_id": file_id, "file_unique_id": f"U{number:04d}", "file_size": len(data)}

    # the Bot API

    async def method(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return JSONResponse({"ok": False, "error_code": 401, "description": "Unauthorized"}, status_code=401)
        if self.flood_next:
            self.flood_next -= 1
            return JSONResponse(
                {
                    "ok": False,
                    "error_code": 429,
                    "description": "Too Many Requests: retry after 3",
                    "parameters": {"retry_after": 3},
                },
                status_code=429,
            )
        params, files = await read_params(request)
        name = request.path_params["method"]
        handler = getattr(self, f"api_{name}", None)
        if handler is None:
            return JSONResponse({"ok": False, "error_code": 404, "description": "Not Found"}, status_code=404)
        try:
            result = await handler(params, files)
        except LookupError as exc:
            return JSONResponse({"ok": False, "error_code": 400, "description": f"Bad Request: {exc}"}, status_code=400)
        return JSONResponse({"ok": True, "result": result})

    async def api_getMe(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        return BOT_USER

    async def api_getUpdates(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        offset = int(params.get("offset") or 0)
        limit = int(params.get("limit") or 100)
        if offset:
            self.updates = [u for u in self.updates if u["update_id"] >= offset]  # earlier ones are confirmed
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        while not self.updates and time.monotonic() < deadline:
            self.arrived.clear()
            try:
                await asyncio.wait_for(self.arrived.wait(), timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                break
        return self.updates[:limit]

    async def api_sendMessage(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        chat_id = int(params["chat_id"])
        if chat_id == UNKNOWN_CHAT:
            raise LookupError("chat not found")
        message = self.bot_message(chat_id, params)
        message["text"] = str(params["text"])
        self.sent.append({"method": "sendMessage", **message})
        return message

    async def api_sendVoice(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        chat_id = int(params["chat_id"])
        data = files.get("voice")
        if data is None:
            raise LookupError("voice must be uploaded")
        message = self.bot_message(chat_id, params)
        message["voice"] = {
            **self.store_file(data, "voice", "oga", "audio/ogg"),
            "duration": 1,
            "mime_type": "audio/ogg",
        }
        self.sent.append(
            {
                "method": "sendVoice",
                **message,
                "voice_bytes": len(data),
                "voice_sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        return message

    async def api_sendDocument(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        chat_id = int(params["chat_id"])
        data = files.get("document")
        if data is None:
            raise LookupError("document must be uploaded")
        message = self.bot_message(chat_id, params)
        message["document"] = {
            **self.store_file(data, "documents", "bin", "application/octet-stream"),
            "file_name": "document",
        }
        self.sent.append(
            {
                "method": "sendDocument",
                **message,
                "document_bytes": len(data),
                "document_sha256": hashlib.sha256(data).hexdigest(),
            }
        )
        return message

    async def api_getFile(self, params: dict[str, Any], files: dict[str, bytes]) -> Any:
        file_id = str(params["file_id"])
        if file_id not in self.files:
            raise LookupError("invalid file_id")
        data, path, _ = self.files[file_id]
        return {"file_id": file_id, "file_unique_id": f"U{file_id}", "file_size": len(data), "file_path": path}

    def bot_message(self, chat_id: int, params: dict[str, Any]) -> dict[str, Any]:
        message: dict[str, Any] = {
            "message_id": self.next_message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": BOT_USER,
        }
        reply = params.get("reply_parameters")
        if reply:
            message["reply_to_message_id"] = int((json.loads(reply) if isinstance(reply, str) else reply)["message_id"])
        return message

    async def download(self, request: Request) -> Response:
        if request.path_params["token"] != self.token:
            return Response(status_code=401)
        path = request.path_params["path"]
        for data, file_path, mime in self.files.values():
            if file_path == path:
                return Response(data, media_type=mime)
        return Response(status_code=404)

    # the test's controls

    async def queue_message(self, request: Request) -> Response:
        body = await request.json()
        chat_id, user = int(body["chat_id"]), body["user"]
        message: dict[str, Any] = {
            "message_id": self.next_message_id(chat_id),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private"},
            "from": {"is_bot": False, **user},
        }
        if "text" in body:
            message["text"] = body["text"]
        if "reply_to" in body:
            message["reply_to_message"] = {
                "message_id": int(body["reply_to"]),
                "date": int(time.time()),
                "chat": {"id": chat_id, "type": "private"},
                "text": "…",
            }
        if "voice" in body:
            data = base64.b64decode(body["voice"])
            message["voice"] = {
                **self.store_file(data, "voice", "oga", "audio/ogg"),
                "duration": 2,
                "mime_type": "audio/ogg",
            }
        if "document" in body:
            data = base64.b64decode(body["document"])
            mime = body.get("mime", "text/plain")
            message["document"] = {
                **self.store_file(data, "documents", "txt", mime),
                "file_name": body.get("file_name", "document.txt"),
                "mime_type": mime,
            }
            if "caption" in body:
                message["caption"] = body["caption"]
        update = {"update_id": next(self.update_ids), "message": message}
        self.updates.append(update)
        self.arrived.set()
        return JSONResponse(update)

    async def list_sent(self, request: Request) -> Response:
        return JSONResponse(self.sent)

    async def flood(self, request: Request) -> Response:
        self.flood_next = 1
        return JSONResponse({"ok": True})


async def read_params(request: Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """The Bot API takes query strings, form posts, multipart uploads and JSON alike."""
    params: dict[str, Any] = dict(request.query_params)
    files: dict[str, bytes] = {}
    kind = request.headers.get("content-type", "")
    if kind.startswith("application/json"):
        params.update(await request.json())
    elif kind.startswith(("multipart/form-data", "application/x-www-form-urlencoded")):
        form = await request.form()
        for key, value in form.multi_items():
            if isinstance(value, str):
                params[key] = value
            else:
                files[key] = await value.read()
    for key, value in list(params.items()):
        if isinstance(value, str) and value.startswith("attach://"):  # PTB names an uploaded part this way
            files[key] = files.get(value.removeprefix("attach://"), b"")
    return params, files


def make_app(token: str) -> Starlette:
    api = BotApi(token)
    return Starlette(
        routes=[
            Route("/bot{token}/{method}", api.method, methods=["GET", "POST"]),
            Route("/file/bot{token}/{path:path}", api.download, methods=["GET"]),
            Route("/_test/message", api.queue_message, methods=["POST"]),
            Route("/_test/sent", api.list_sent, methods=["GET"]),
            Route("/_test/flood", api.flood, methods=["POST"]),
        ]
    )


@contextmanager
def serving(token: str) -> Iterator[str]:
    """This server in its own process on a free loopback port, for a test module: its base URL."""
    import socket
    import subprocess
    import sys

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = subprocess.Popen([sys.executable, __file__, "--port", str(port), "--token", token])
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"the stand-in Bot API exited with {process.returncode}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"the stand-in Bot API did not listen on {port} within 30s") from None
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--token", required=True)
    args = parser.parse_args()
    uvicorn.run(make_app(args.token), host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
