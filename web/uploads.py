"""Uploads, size-limited and type-checked before anything reads them: a multipart form's `file` field, or the raw
request body. Too large → 413, the wrong type → 415, no file → 422, each naming the field `file`."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from typing import IO

from fastapi import Request
from starlette.datastructures import UploadFile

from web.errors import ServiceError

FIELD = "file"
CHUNK = 1 << 20


@dataclass
class Upload:
    filename: str
    content_type: str
    file: IO[bytes]  # positioned at the start
    size: int

    def read(self) -> bytes:
        self.file.seek(0)
        return self.file.read()


def _too_large(limit: int) -> ServiceError:
    return ServiceError(f"the upload is larger than {limit // (1024 * 1024)} MB", field=FIELD, status=413)


def _check_type(filename: str, content_type: str, types: tuple[str, ...], suffixes: tuple[str, ...]) -> None:
    media = content_type.split(";")[0].strip().lower()
    if media not in types and not filename.lower().endswith(suffixes):
        wanted = ", ".join(s for s in suffixes)
        raise ServiceError(
            f"{filename or 'the upload'} ({media or 'no type'}) is not a {wanted} file", field=FIELD, status=415
        )


async def receive_upload(request: Request, *, limit: int, types: tuple[str, ...], suffixes: tuple[str, ...]) -> Upload:
    """The uploaded file (a multipart form's `file`, or the whole body), spooled to disk past 1 MB."""
    length = request.headers.get("content-length")
    if length is None:
        raise ServiceError("the upload needs a Content-Length", field=FIELD, status=411)
    if not (length.isascii() and length.isdigit()) or int(length) > limit + 64 * 1024:  # room for the multipart framing
        raise _too_large(limit)
    if int(length) == 0:  # nothing sent: no file, whatever type it was said to be
        raise ServiceError("choose a file to upload", field=FIELD, status=422)
    body_type = request.headers.get("content-type", "")
    if body_type.startswith("multipart/form-data"):
        form = await request.form(max_files=1, max_fields=10)
        item = form.get(FIELD)
        if not isinstance(item, UploadFile):
            raise ServiceError("choose a file to upload", field=FIELD, status=422)
        size = item.size if item.size is not None else len(await item.read())
        if size > limit:
            raise _too_large(limit)
        _check_type(item.filename or "", item.content_type or "", types, suffixes)
        await item.seek(0)
        return Upload(item.filename or "", item.content_type or "", item.file, size)
    _check_type(request.headers.get("x-filename", ""), body_type, types, suffixes)
    spool = tempfile.SpooledTemporaryFile(max_size=CHUNK)  # noqa: SIM115 - the caller reads it, then it goes
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            spool.close()
            raise _too_large(limit)
        spool.write(chunk)
    spool.seek(0)
    return Upload(request.headers.get("x-filename", ""), body_type, spool, size)
