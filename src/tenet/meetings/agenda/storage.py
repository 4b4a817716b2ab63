"""Where attachment files live (spec §文件存储抽象): local disk (v1.0 default) or an S3-compatible bucket, chosen by
MEETING_ATTACHMENT_STORAGE. The database keeps the key (`storage_path`) relative to the root / bucket, derived from
the attachment's id only (`agenda-item/YYYY/MM/<id>`), so moving to another root or to S3 changes no row.

Uploads always arrive in a local temp file under `<root>/tmp/uploads` (the same file system as the local store, so
`rename` is atomic and never EXDEV); `commit` moves it into place. Blocking file and network calls run in threads.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TypeVar

from tenet.kernel.settings import KernelSettings, section
from tenet.meetings.settings import MeetingSettings

CHUNK = 1024 * 1024
T = TypeVar("T")


async def _thread(call: Callable[..., T], *args: Any) -> T:
    return await asyncio.to_thread(call, *args)


def key_for(kind: str, attachment_id: object, at: datetime) -> str:
    """`agenda-item/2026/03/<uuid>` or `meeting/2026/03/<uuid>` (MA-INV-26: no client input)."""
    return f"{kind}/{at:%Y}/{at:%m}/{attachment_id}"


class Storage(Protocol):
    async def commit(self, temp: Path, key: str) -> None: ...

    def read(self, key: str, start: int, end: int) -> AsyncIterator[bytes]: ...

    async def exists(self, key: str) -> bool: ...

    async def delete(self, key: str) -> None: ...

    async def keys_older_than(self, moment: datetime) -> list[str]: ...


class LocalDiskStorage:
    def __init__(self, root: Path) -> None:
        self.root = root

    def path(self, key: str) -> Path:
        # Keys are built from ids; refuse anything else (a row written by hand must not reach outside the root).
        if ".." in key.split("/") or key.startswith("/"):
            raise ValueError(f"not a storage key: {key!r}")
        return self.root / key

    async def commit(self, temp: Path, key: str) -> None:
        final = self.path(key)

        def move() -> None:
            final.parent.mkdir(parents=True, exist_ok=True)
            os.replace(temp, final)
            directory = os.open(final.parent, os.O_RDONLY)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)

        await _thread(move)

    async def read(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        handle: BinaryIO = await _thread(open, self.path(key), "rb")
        try:
            await _thread(handle.seek, start)
            remaining = end - start + 1
            while remaining > 0:
                chunk = await _thread(handle.read, min(CHUNK, remaining))
                if not chunk:
                    break
                remaining -= len(chunk)
                yield chunk
        finally:
            await _thread(handle.close)

    async def exists(self, key: str) -> bool:
        return await _thread(self.path(key).is_file)

    async def delete(self, key: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            await _thread(self.path(key).unlink)

    async def keys_older_than(self, moment: datetime) -> list[str]:
        cutoff = moment.timestamp()

        def scan() -> list[str]:
            found = []
            for prefix in ("agenda-item", "meeting"):
                for path in (self.root / prefix).glob("*/*/*"):
                    if path.is_file() and path.stat().st_mtime < cutoff:
                        found.append(path.relative_to(self.root).as_posix())
            return found

        return await _thread(scan)


class S3Storage:
    """An S3-compatible bucket (AWS, MinIO, Ceph, moto). Credentials come from the standard AWS variables."""

    def __init__(self, bucket: str, *, endpoint_url: str | None = None, region: str | None = None,
                 client: Any = None) -> None:
        if client is None:
            import boto3  # an optional dependency: `pip install tenet[s3]`

            client = boto3.client("s3", endpoint_url=endpoint_url, region_name=region)
        self.client = client
        self.bucket = bucket

    async def commit(self, temp: Path, key: str) -> None:
        try:
            await _thread(self.client.upload_file, str(temp), self.bucket, key)
        finally:
            with contextlib.suppress(FileNotFoundError):
                await _thread(temp.unlink)

    async def read(self, key: str, start: int, end: int) -> AsyncIterator[bytes]:
        answer = await _thread(lambda: self.client.get_object(Bucket=self.bucket, Key=key,
                                                              Range=f"bytes={start}-{end}"))
        body = answer["Body"]
        try:
            while True:
                chunk = await _thread(body.read, CHUNK)
                if not chunk:
                    break
                yield chunk
        finally:
            await _thread(body.close)

    async def exists(self, key: str) -> bool:
        from botocore.exceptions import ClientError

        try:
            await _thread(lambda: self.client.head_object(Bucket=self.bucket, Key=key))
        except ClientError:
            return False
        return True

    async def delete(self, key: str) -> None:
        await _thread(lambda: self.client.delete_object(Bucket=self.bucket, Key=key))

    async def keys_older_than(self, moment: datetime) -> list[str]:
        def scan() -> list[str]:
            found = []
            paginator = self.client.get_paginator("list_objects_v2")
            for prefix in ("agenda-item/", "meeting/"):
                for page in paginator.paginate(Bucket=self.bucket, Prefix=prefix):
                    for entry in page.get("Contents", ()):
                        if entry["LastModified"].astimezone(UTC) < moment:
                            found.append(entry["Key"])
            return found

        return await _thread(scan)


def storage_root(settings: Any) -> Path:
    own = section(settings, MeetingSettings)
    root = own.meeting_attachment_storage_root
    if root is None:
        root = section(settings, KernelSettings).data_dir / "meeting-attachments"
    return Path(root).resolve()


def temp_dir(settings: Any) -> Path:
    """`<root>/tmp/uploads`: local whatever the store, on the same disk as the local store."""
    return storage_root(settings) / "tmp" / "uploads"


def build(settings: Any) -> Storage:
    own = section(settings, MeetingSettings)
    if own.meeting_attachment_storage == "s3":
        if not own.meeting_attachment_s3_bucket:
            raise ValueError("MEETING_ATTACHMENT_STORAGE=s3 needs MEETING_ATTACHMENT_S3_BUCKET")
        return S3Storage(own.meeting_attachment_s3_bucket, endpoint_url=own.meeting_attachment_s3_endpoint_url,
                         region=own.meeting_attachment_s3_region)
    return LocalDiskStorage(storage_root(settings))


def of(state: Any) -> Storage:
    """The process's storage (one per app, built on first use from its settings); tests may set
    `state.meeting_attachment_storage` to another one."""
    found = getattr(state, "meeting_attachment_storage", None)
    if found is None:
        found = build(state.settings)
        state.meeting_attachment_storage = found
    return found
