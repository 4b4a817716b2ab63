"""Keyset pagination: `?limit=&cursor=` -> `{items, next_cursor}` (API.md "Lists").

The cursor is an opaque, URL-safe encoding of the sort key of the last row served, so pages stay
stable while rows are inserted, and a page costs one index range scan however deep it is.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field
from sqlalchemy import Select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from tenet.kernel.errors import InvalidCursor
from tenet.kernel.text import storable

T = TypeVar("T")
R = TypeVar("R", bound=Mapping[str, Any])
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(None, description="Pass as `cursor` to get the next page; null on the last page")


@dataclass(frozen=True)
class PageParams:
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


async def page_params(
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="Page size")] = DEFAULT_LIMIT,
    cursor: Annotated[str | None, Query(max_length=512, description="`next_cursor` of the previous page")] = None,
) -> PageParams:
    return PageParams(limit=limit, cursor=cursor)


def _encode_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"t": value.isoformat()}
    if isinstance(value, uuid.UUID):
        return {"u": str(value)}
    return value


def _decode_value(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        ((kind, raw),) = value.items()
        if not isinstance(raw, str):
            raise ValueError
        if kind == "t":
            return datetime.fromisoformat(raw)
        if kind == "u":
            return uuid.UUID(raw)
    return value


_BIGINT = range(-(2**63), 2**63)


def _fits(value: Any, kind: type) -> bool:
    """Whether a decoded cursor value can be compared with a sort column of `kind` in PostgreSQL. `True` is an
    `int` to Python but a boolean to PostgreSQL; text holds no NUL and no lone surrogate; integer keys are
    bigint at most."""
    if kind is int:
        return type(value) is int and value in _BIGINT
    if kind is str:
        return type(value) is str and storable(value)
    return isinstance(value, kind)


def encode_cursor(key: Sequence[Any]) -> str:
    raw = json.dumps([_encode_value(v) for v in key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(cursor: str, kinds: Sequence[type]) -> list[Any]:
    """The sort key a cursor holds, each value of its column's kind; InvalidCursor (400) for anything this
    list did not issue (another list's cursor, a forged one), before any value reaches the database."""
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(values, list) or len(values) != len(kinds):
            raise ValueError
        decoded = [_decode_value(v) for v in values]
    except (ValueError, TypeError, KeyError):
        raise InvalidCursor() from None
    if not all(_fits(value, kind) for value, kind in zip(decoded, kinds, strict=True)):
        raise InvalidCursor()
    return decoded


async def keyset_page(
    session: AsyncSession,
    statement: Select[Any],
    *,
    order_by: Sequence[InstrumentedAttribute[Any]],
    params: PageParams,
    descending: bool = False,
) -> tuple[list[Any], str | None]:
    """Run `statement` (selecting one entity) ordered by `order_by` (all ascending or all descending;
    the last column must be unique) from the cursor on. Answers the rows and the next cursor."""
    columns = list(order_by)
    if params.cursor:
        after = decode_cursor(params.cursor, [column.type.python_type for column in columns])
        key = tuple_(*columns)
        statement = statement.where(key < tuple_(*after) if descending else key > tuple_(*after))
    statement = statement.order_by(*(c.desc() if descending else c.asc() for c in columns))
    rows = list((await session.scalars(statement.limit(params.limit + 1))).all())
    if len(rows) <= params.limit:
        return rows, None
    rows = rows[: params.limit]
    last = rows[-1]
    return rows, encode_cursor([getattr(last, c.key) for c in columns])


@dataclass(frozen=True)
class SqlKeyset:
    """Keyset pagination for read-path SQL (tenet.kernel.reads): the same cursors as `keyset_page`.

        KEYSET = SqlKeyset(("m.joined_at", "m.id"), (datetime, uuid.UUID))
        where, params = KEYSET.after(page)          # "(m.joined_at, m.id) > (%(after_0)s, %(after_1)s)" or "TRUE"
        sql = f"... WHERE ... AND {where} ORDER BY {KEYSET.order_by} LIMIT %(limit)s"
        items, next_cursor = KEYSET.page(rows, page, key=lambda r: (r["joined_at"], r["membership_id"]))

    Fetch `page.limit + 1` rows (`KEYSET.fetch_limit(page)`): the extra row says whether there is a next page.
    The last column must be unique.
    """

    columns: tuple[str, ...]
    types: tuple[type, ...]
    descending: bool = False

    @property
    def order_by(self) -> str:
        direction = " DESC" if self.descending else ""
        return ", ".join(f"{column}{direction}" for column in self.columns)

    def after(self, page: PageParams) -> tuple[str, dict[str, object]]:
        if not page.cursor:
            return "TRUE", {}
        values = decode_cursor(page.cursor, self.types)
        names = [f"after_{index}" for index in range(len(values))]
        comparison = "<" if self.descending else ">"
        clause = f"({', '.join(self.columns)}) {comparison} ({', '.join(f'%({n})s' for n in names)})"
        return clause, dict(zip(names, values, strict=True))

    @staticmethod
    def fetch_limit(page: PageParams) -> int:
        return page.limit + 1

    @staticmethod
    def page(rows: Sequence[R], page: PageParams, key: Callable[[R], Sequence[object]]) -> tuple[list[R], str | None]:
        if len(rows) <= page.limit:
            return list(rows), None
        kept = list(rows[: page.limit])
        return kept, encode_cursor(list(key(kept[-1])))
