"""Reading a legacy dev.db: opened read-only, its shape checked against `schema` before anything is written,
rows streamed in primary-key order (a file of any size is read in chunks, never loaded whole), values parsed
into Python with a reason for anything that is not what the legacy schema promises."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tenet.meetings.legacy.schema import OPTIONAL, REQUIRED

CHUNK = 500
_NUMBER = re.compile(r"^-?\d+(\.\d+)?\Z")


class NotALegacyFile(ValueError):
    """The file is not a SQLite database with the legacy tables: nothing is imported."""


class BadValue(ValueError):
    """A column holds something the legacy schema does not allow; the message is the row's refusal reason."""


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class LegacyFile:
    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise NotALegacyFile(f"{path}: no such file")
        self.path = path
        self._connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        self._connection.row_factory = sqlite3.Row
        try:
            self.columns = self._check_shape()
        except sqlite3.DatabaseError as exc:
            self._connection.close()
            raise NotALegacyFile(f"{path}: not a SQLite database ({exc})") from None
        except NotALegacyFile:
            self._connection.close()
            raise

    def _check_shape(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        for table, required in REQUIRED.items():
            columns = {row[1] for row in self._connection.execute(f'PRAGMA table_info("{table}")')}
            if not columns:
                raise NotALegacyFile(f"{self.path}: no table {table!r} (docs/legacy-meeting-attendance.md)")
            missing = [c for c in required if c not in columns]
            if missing:
                raise NotALegacyFile(f"{self.path}: table {table!r} lacks column(s) {', '.join(missing)}")
            found[table] = columns
        return found

    def count(self, table: str) -> int:
        statement = f'SELECT count(*) FROM "{table}"'  # noqa: S608 (a table of schema.REQUIRED)
        return int(self._connection.execute(statement).fetchone()[0])

    def keys(self, table: str) -> set[str]:
        statement = f'SELECT "id" FROM "{table}"'  # noqa: S608 (a table of schema.REQUIRED)
        return {str(key) for (key,) in self._connection.execute(statement)}

    def rows(self, table: str) -> Iterator[dict[str, Any]]:
        """Every row as {column: value}, optional columns absent from the file as None, in id order."""
        wanted = [c for c in (*REQUIRED[table], *OPTIONAL[table]) if c in self.columns[table]]
        absent = [c for c in OPTIONAL[table] if c not in self.columns[table]]
        columns = ", ".join(f'"{c}"' for c in wanted)
        cursor = self._connection.execute(f'SELECT {columns} FROM "{table}" ORDER BY "id"')  # noqa: S608 (schema names)
        while chunk := cursor.fetchmany(CHUNK):
            for row in chunk:
                yield {**dict(zip(wanted, tuple(row), strict=True)), **dict.fromkeys(absent)}

    def close(self) -> None:
        self._connection.close()


def instant(value: Any, column: str, *, required: bool = False) -> datetime | None:
    """Prisma's SQLite DateTime: integer milliseconds since the epoch; ISO-8601 text (a value without an offset
    is UTC, as Prisma writes) is accepted too. Anything else is a BadValue naming the column."""
    if value is None or value == "":
        if required:
            raise BadValue(f"{column} is missing")
        return None
    try:
        if isinstance(value, int | float) or (isinstance(value, str) and _NUMBER.match(value.strip())):
            moment = datetime.fromtimestamp(float(value) / 1000, tz=UTC)
        else:
            moment = datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
            moment = moment if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (ValueError, OverflowError, OSError):
        raise BadValue(f"{column} is not a timestamp: {str(value)[:40]!r}") from None
    if not datetime(1971, 1, 1, tzinfo=UTC) <= moment <= datetime(2200, 1, 1, tzinfo=UTC):
        raise BadValue(f"{column} is out of range: {str(value)[:40]!r}")
    return moment.astimezone(UTC)


def text_or_none(value: Any) -> str | None:
    if value is None:
        return None
    cleaned = str(value).strip()
    return cleaned or None


def whole_number(value: Any, column: str, default: int) -> int:
    if value is None or value == "":
        return default
    try:
        return int(value)
    except (TypeError, ValueError):
        raise BadValue(f"{column} is not a whole number: {str(value)[:40]!r}") from None
