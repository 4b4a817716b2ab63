"""Answering a download (spec §下载流程): streamed from storage with no database connection held,
`Content-Disposition: attachment; filename="<ascii fallback>"; filename*=UTF-8''<percent-encoded>` (RFC 6266 with
RFC 5987's encoding) and single byte ranges (RFC 9110: 206 with Content-Range, 416 when unsatisfiable; several
ranges or a malformed header get the whole file)."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import AsyncIterator
from pathlib import PurePosixPath
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from tenet.kernel.text import number_at_most
from tenet.meetings.agenda import errors
from tenet.meetings.agenda.storage import Storage

_RANGE = re.compile(r"^bytes=([0-9]*)-([0-9]*)\Z")
_UNSAFE = re.compile(r'["\\\x00-\x1f\x7f;]')
_ATTR_CHARS = "!#$&+-.^_`|~"


def content_disposition(filename: str) -> str:
    """`会议纪要 v2.pdf` -> `attachment; filename="v2.pdf"; filename*=UTF-8''%E4%BC%9A...%20v2.pdf`."""
    ascii_name = unicodedata.normalize("NFKD", filename).encode("ascii", "ignore").decode("ascii")
    ascii_name = " ".join(_UNSAFE.sub("_", ascii_name).split())
    suffix = PurePosixPath(ascii_name).suffix
    if not ascii_name or ascii_name == suffix or ascii_name.startswith("."):
        ascii_name = "download" + (suffix or PurePosixPath(filename).suffix.encode("ascii", "ignore").decode())
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(filename, safe=_ATTR_CHARS)}"


def byte_range(header: str | None, size: int) -> tuple[int, int] | None:
    """The one range asked for (inclusive bounds), None for the whole file; RangeNotSatisfiable when outside."""
    if header is None:
        return None
    match = _RANGE.match(header.strip())
    if match is None:
        return None  # several ranges or a malformed header: the whole file
    # A position past the end counts as the end (its digits are never converted past the file's size).
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:
        suffix = number_at_most(last, size)
        if suffix == 0 or size == 0:
            raise _unsatisfiable(size)
        return max(0, size - suffix), size - 1
    start = number_at_most(first, size)
    end = number_at_most(last, size) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        raise _unsatisfiable(size)
    return start, min(end, size - 1)


def _unsatisfiable(size: int) -> errors.RangeNotSatisfiable:
    return errors.RangeNotSatisfiable(headers={"Content-Range": f"bytes */{size}"}, size=str(size))


async def answer(request: Request, storage: Storage, *, key: str, filename: str, mime_type: str, size: int,
                 sha256: str) -> Response:
    tag = f'"{sha256}"'
    headers = {"ETag": tag, "Accept-Ranges": "bytes", "Cache-Control": "private, no-cache",
               "X-Content-Type-Options": "nosniff", "Content-Disposition": content_disposition(filename)}
    if request.headers.get("if-none-match") == tag:
        return Response(status_code=304, headers=headers)
    wanted = request.headers.get("range")
    if_range = request.headers.get("if-range")
    if if_range is not None and if_range.strip() != tag:
        wanted = None
    span = byte_range(wanted, size)
    if not await storage.exists(key):
        raise errors.AttachmentNotFound("The file of this attachment is missing")
    if span is None:
        start, end, status = 0, size - 1, 200
    else:
        (start, end), status = span, 206
        headers["Content-Range"] = f"bytes {start}-{end}/{size}"
    headers["Content-Length"] = str(max(0, end - start + 1))
    body = storage.read(key, start, end) if size > 0 else _empty()
    return StreamingResponse(body, status_code=status, headers=headers, media_type=mime_type)


async def _empty() -> AsyncIterator[bytes]:
    if False:  # pragma: no cover  (an async generator that yields nothing)
        yield b""
