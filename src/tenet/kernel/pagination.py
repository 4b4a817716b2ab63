"""Keyset pagination: `?limit=&cursor=` -> `{items, next_cursor}` (API.md "Lists").

The cursor is an opaque, URL-safe encoding of the sort key of the last row served, so pages stay
stable while rows are inserted, and a page costs one index range scan however deep it is.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Annotated, Any, Generic, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field
from sqlalchemy import Select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from tenet.kernel.errors import InvalidCursor

T = TypeVar("T")
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


class Page(BaseModel, Generic[T]):
    items: list[T]
    next_cursor: str | None = Field(None, description="Pass as `cursor` to get the next page; null on the last page")


class PageParams(BaseModel):
    limit: int = DEFAULT_LIMIT
    cursor: str | None = None


def page_params(
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
        if kind == "t":
            return datetime.fromisoformat(raw)
        if kind == "u":
            return uuid.UUID(raw)
    return value


def encode_cursor(key: Sequence[Any]) -> str:
    raw = json.dumps([_encode_value(v) for v in key], separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


def decode_cursor(cursor: str, width: int) -> list[Any]:
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        values = json.loads(base64.urlsafe_b64decode(padded.encode()))
        if not isinstance(values, list) or len(values) != width:
            raise ValueError
        return [_decode_value(v) for v in values]
    except (ValueError, TypeError, KeyError):
        raise InvalidCursor() from None


async def keyset_page(
    session: AsyncSession,
    statement: Select,
    *,
    order_by: Sequence[InstrumentedAttribute],
    params: PageParams,
    descending: bool = False,
) -> tuple[list[Any], str | None]:
    """Run `statement` (selecting one entity) ordered by `order_by` (all ascending or all descending;
    the last column must be unique) from the cursor on. Answers the rows and the next cursor."""
    columns = list(order_by)
    if params.cursor:
        after = decode_cursor(params.cursor, len(columns))
        # A cursor from another list (or a forged one) must be a 400, not a database type error.
        for column, value in zip(columns, after, strict=True):
            if not isinstance(value, column.type.python_type):
                raise InvalidCursor()
        key = tuple_(*columns)
        statement = statement.where(key < tuple_(*after) if descending else key > tuple_(*after))
    statement = statement.order_by(*(c.desc() if descending else c.asc() for c in columns))
    rows = list((await session.scalars(statement.limit(params.limit + 1))).all())
    if len(rows) <= params.limit:
        return rows, None
    rows = rows[: params.limit]
    last = rows[-1]
    return rows, encode_cursor([getattr(last, c.key) for c in columns])
