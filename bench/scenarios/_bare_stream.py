"""The bare endpoint of the upload_stream scenario (not a scenario: the underscore keeps it out of the list): a raw
ASGI callable on uvicorn that writes a POST body straight to a file (`BENCH_BARE_DIR`), the least any upload can
cost, and serves a file back with or without one byte range, the least any download can cost."""

from __future__ import annotations

import os
import re
import uuid
from pathlib import Path
from typing import Any

import anyio

DIRECTORY = Path(os.environ.get("BENCH_BARE_DIR", "/tmp"))
CHUNK = 1024 * 1024


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    if scope["method"] == "POST":
        target = DIRECTORY / f"{uuid.uuid4()}.bin"
        size = 0
        async with await anyio.open_file(target, "wb") as handle:
            while True:
                message = await receive()
                body = message.get("body", b"")
                if body:
                    size += len(body)
                    await handle.write(body)
                if not message.get("more_body"):
                    break
        answer = f'{{"size": "{size}", "name": "{target.name}"}}'.encode()
        await send({"type": "http.response.start", "status": 201, "headers": [(b"content-type", b"application/json")]})
        await send({"type": "http.response.body", "body": answer})
        return
    if scope["path"] == "/readyz":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})
        return
    path = DIRECTORY / Path(scope["path"]).name
    size = path.stat().st_size
    start, end, status = 0, size - 1, 200
    headers = dict(scope["headers"])
    match = re.match(rb"bytes=(\d+)-(\d*)$", headers.get(b"range", b""))
    if match:
        start, status = int(match.group(1)), 206
        end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/pdf"), (b"content-length", str(end - start + 1).encode())]})
    async with await anyio.open_file(path, "rb") as handle:
        await handle.seek(start)
        remaining = end - start + 1
        while remaining > 0:
            chunk = await handle.read(min(CHUNK, remaining))
            remaining -= len(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": remaining > 0})
