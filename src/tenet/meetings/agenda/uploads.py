"""Receiving an upload (spec §资料上传 multipart 流程, §上传中间件配置): the multipart body is parsed as it arrives
(python-multipart's streaming parser fed from `request.stream()`) and the single part `file` is written to a temp
file under `<root>/tmp/uploads`, never held in memory (a 1 MiB buffer at most) and with no database connection held.

Checked while the bytes arrive, in the spec's order: the part's Content-Type against the whitelist (415
ATTACHMENT_MIME_NOT_ALLOWED, before a byte is written), the first 4 KB against that type (415
ATTACHMENT_MIME_MISMATCH), the byte count against MEETING_ATTACHMENT_MAX_BYTES (413 ATTACHMENT_TOO_LARGE at the
first byte over, without reading the rest). Any refusal, a client that goes away, or a cancelled request closes
and unlinks the temp file; a process that dies leaves it to the sweeper job (meetings:sweep_upload_leftovers).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

from tenet.kernel.errors import UnsupportedMediaType
from tenet.kernel.text import number_at_most
from tenet.meetings.agenda import errors, mime

if TYPE_CHECKING:
    from python_multipart.multipart import MultipartCallbacks

BUFFER = 1024 * 1024  # the file's bytes handed to the writing thread together
# Multipart framing around the file (boundaries, part headers, a category field): what a body may carry beyond
# the file itself before its declared length alone says it is too large.
OVERHEAD = 64 * 1024
_FIELD_LIMIT = 64


@dataclass
class Received:
    path: Path
    filename: str
    mime_type: str
    size: int
    sha256: str
    fields: dict[str, str]


@dataclass
class _Part:
    headers: dict[bytes, bytes] = field(default_factory=dict)
    name: str = ""
    filename: str | None = None
    is_file: bool = False
    data: bytearray = field(default_factory=bytearray)


_EXTENDED_FILENAME = re.compile(rb"filename\*\s*=\s*([A-Za-z0-9_-]+)'[^']*'([^;\s]*)", re.IGNORECASE)


def _extended(match: re.Match[bytes]) -> str:
    charset = match.group(1).decode("ascii").lower()
    try:
        return unquote(match.group(2).decode("ascii"), encoding=charset if charset in ("utf-8", "iso-8859-1")
                       else "utf-8", errors="replace")
    except UnicodeDecodeError:
        return ""


def _decode(value: bytes) -> str:
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError:
        return value.decode("latin-1")


class _Receiver:
    """Collects the parser's callbacks as events; the async loop acts on them between chunks (file writes run in a
    thread, so the event loop only parses)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []
        self.part = _Part()
        self.complete = False
        self._name = b""
        self._value = b""

    def callbacks(self) -> MultipartCallbacks:
        return {"on_part_begin": self.on_part_begin, "on_part_data": self.on_part_data,
                "on_part_end": self.on_part_end, "on_header_field": self.on_header_field,
                "on_header_value": self.on_header_value, "on_header_end": self.on_header_end,
                "on_headers_finished": self.on_headers_finished, "on_end": self.on_end}

    def on_part_begin(self) -> None:
        self.part = _Part()

    def on_header_field(self, data: bytes, start: int, end: int) -> None:
        self._name += data[start:end]

    def on_header_value(self, data: bytes, start: int, end: int) -> None:
        self._value += data[start:end]

    def on_header_end(self) -> None:
        self.part.headers[self._name.lower()] = self._value
        self._name, self._value = b"", b""

    def on_headers_finished(self) -> None:
        disposition = self.part.headers.get(b"content-disposition", b"")
        _, options = parse_options_header(disposition)
        self.part.name = _decode(options.get(b"name", b""))
        extended = _EXTENDED_FILENAME.search(disposition)
        if extended is not None or b"filename" in options:
            self.part.is_file = True
            # RFC 5987 `filename*=UTF-8''...` wins over the plain parameter (which browsers send as raw UTF-8).
            self.part.filename = (_extended(extended) if extended is not None
                                  else _decode(options.get(b"filename") or b""))
        self.events.append(("headers", self.part))

    def on_part_data(self, data: bytes, start: int, end: int) -> None:
        # A view, not a copy: the chunk is immutable and the events are handled before the next one arrives.
        self.events.append(("data", memoryview(data)[start:end]))

    def on_part_end(self) -> None:
        self.events.append(("end", self.part))

    def on_end(self) -> None:
        # The closing boundary arrived: a body cut short never gets here (its file would be truncated).
        self.complete = True


class _TempFile:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        self.digest = hashlib.sha256()

    async def open(self) -> None:
        def create() -> int:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)

        self.fd = await asyncio.to_thread(create)

    async def write(self, pieces: list[memoryview]) -> None:
        """Hash and write `pieces` in order, in a thread (hashlib and os.write release the GIL): the body's bytes
        are never copied on their way from the request's chunks to the file."""
        def run() -> None:
            for piece in pieces:
                self.digest.update(piece)
                view = piece
                while view:
                    written = os.write(self.fd, view)  # type: ignore[arg-type]
                    view = view[written:]

        await asyncio.to_thread(run)

    async def finish(self) -> None:
        await asyncio.to_thread(os.fsync, self.fd)  # type: ignore[arg-type]
        self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def discard(self) -> None:
        """Synchronous on purpose: it must also run when the request task is being cancelled."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()


def check_envelope(request: Request, max_bytes: int) -> bytes:
    """Before reading the body: multipart/form-data with a boundary, and a declared length within the limit."""
    kind, options = parse_options_header(request.headers.get("content-type", ""))
    if kind != b"multipart/form-data":
        raise UnsupportedMediaType("Uploads are multipart/form-data with one part named file")
    boundary = options.get(b"boundary")
    if not boundary:
        raise errors.AttachmentUploadMalformed("The multipart body has no boundary")
    length = request.headers.get("content-length")
    # Only ASCII digits are a length (str.isdigit() also takes "²", which int() refuses).
    limit = max_bytes + OVERHEAD
    if length is not None and length.isascii() and length.isdigit() and number_at_most(length, limit + 1) > limit:
        raise errors.AttachmentTooLarge(max_bytes=max_bytes)
    return boundary


class _Body:
    """What one upload's parts have told so far: the file part (its type, size, first bytes, a write buffer)
    and the short named fields. Fed the receiver's events in order; refuses as soon as a rule breaks."""

    def __init__(self, temp: _TempFile, *, max_bytes: int, fields: tuple[str, ...]) -> None:
        self.temp, self.max_bytes, self.fields = temp, max_bytes, fields
        self.current: _Part | None = None
        self.file_part: _Part | None = None
        self.kind = ""
        self.size = 0
        self.head = bytearray()
        self.checked = False  # the first HEAD_BYTES were compared with the declared type
        self.pending: list[memoryview] = []  # the file's bytes not written yet (views of the request's chunks)
        self.pending_size = 0
        self.values: dict[str, str] = {}

    async def headers(self, part: _Part) -> None:
        self.current = part
        if part.is_file and part.name == "file":
            if self.file_part is not None:
                raise errors.AttachmentUploadMalformed("Send one file per request")
            self.file_part = part
            declared = mime.declared_type(part.headers.get(b"content-type", b"").decode("latin-1"),
                                          mime.clean_filename(part.filename))
            if declared is None:
                raise errors.AttachmentMimeNotAllowed(allowed=list(mime.ALLOWED))
            self.kind = declared
            await self.temp.open()
        elif part.is_file or part.name not in self.fields or part.name in self.values:
            raise errors.AttachmentUploadMalformed(f"Unexpected part {part.name[:40]!r}")

    async def data(self, payload: memoryview) -> None:
        assert self.current is not None
        if self.current is not self.file_part:
            self.current.data.extend(payload)
            if len(self.current.data) > _FIELD_LIMIT:
                raise errors.AttachmentUploadMalformed(f"The part {self.current.name!r} is too long")
            return
        self.size += len(payload)
        if self.size > self.max_bytes:
            raise errors.AttachmentTooLarge(max_bytes=self.max_bytes)
        if not self.checked:
            self.head.extend(payload[: mime.HEAD_BYTES - len(self.head)])
            if len(self.head) >= mime.HEAD_BYTES:
                self.checked = True
                if not mime.matches(self.kind, bytes(self.head), complete=False):
                    raise errors.AttachmentMimeMismatch(declared=self.kind)
        self.pending.append(payload)
        self.pending_size += len(payload)
        if self.pending_size >= BUFFER:
            pieces, self.pending, self.pending_size = self.pending, [], 0
            await self.temp.write(pieces)

    def end(self, part: _Part) -> None:
        if part is not self.file_part:
            self.values[part.name] = _decode(bytes(part.data)).strip()

    async def finish(self, complete: bool) -> Received:
        if self.file_part is None:
            raise errors.AttachmentUploadMalformed("No part named file")
        if not complete:
            raise errors.AttachmentUploadMalformed("The body ends before its closing boundary")
        if not self.checked and not mime.matches(self.kind, bytes(self.head), complete=True):
            raise errors.AttachmentMimeMismatch(declared=self.kind)
        if self.pending:
            await self.temp.write(self.pending)
        await self.temp.finish()
        return Received(path=self.temp.path, filename=mime.clean_filename(self.file_part.filename),
                        mime_type=self.kind, size=self.size, sha256=self.temp.digest.hexdigest(), fields=self.values)


async def receive(request: Request, *, temp_dir: Path, max_bytes: int, fields: tuple[str, ...] = ()) -> Received:
    """Stream the body into a temp file: exactly one part `file` (plus the named short `fields`)."""
    boundary = check_envelope(request, max_bytes)
    receiver = _Receiver()
    try:
        parser = MultipartParser(boundary, receiver.callbacks())
    except FormParserError:  # a boundary the parser cannot use (over 256 characters)
        raise errors.AttachmentUploadMalformed("The multipart boundary is not usable") from None
    temp = _TempFile(temp_dir / f"{uuid.uuid4()}.part")
    body = _Body(temp, max_bytes=max_bytes, fields=fields)
    done = False
    try:
        async for chunk in request.stream():
            try:
                parser.write(chunk)
            except FormParserError:
                raise errors.AttachmentUploadMalformed("The multipart body is malformed") from None
            for event, payload in receiver.events:
                if event == "headers":
                    await body.headers(payload)
                elif event == "data":
                    await body.data(payload)
                elif event == "end":
                    body.end(payload)
            receiver.events.clear()
        try:
            parser.finalize()
        except FormParserError:
            raise errors.AttachmentUploadMalformed("The multipart body is malformed") from None
        received = await body.finish(receiver.complete)
        done = True
        return received
    except ClientDisconnect:
        raise errors.AttachmentUploadMalformed("The upload was interrupted") from None
    finally:
        if not done:
            temp.discard()
