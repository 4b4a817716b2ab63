"""What a call came to, as a short string a test compares: the error code of a refusal, or what it answered.

`code(response)` is the problem+json `code` of an HTTP answer ("" when it has none); `outcome(command)` awaits
a domain command and answers its DomainError's code, or `answer(result)` ("ok" unless the test says what a
success is worth telling apart: "new" and "already" for a check-in).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import httpx

from tenet.kernel.errors import DomainError


def code(response: httpx.Response) -> str:
    """The stable error code of a problem+json answer, "" when the body carries none."""
    return response.json().get("code", "")


def ok(result: Any) -> str:
    return "ok"


async def outcome(command: Awaitable[Any], answer: Callable[[Any], Any] = ok) -> Any:
    """The code of the DomainError `command` raised, or `answer(result)` when it succeeded."""
    try:
        result = await command
    except DomainError as exc:
        return str(exc.code)
    return answer(result)
