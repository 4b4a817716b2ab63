"""Access tokens (short-lived JWT, HS256) and opaque secrets (refresh tokens, client secrets).

Access tokens are verified with the one algorithm we issue, so `alg=none` or an RS/HS confusion is
refused by construction, and every claim is checked for its type and range: a token signed with the real
key but carrying a malformed claim (`exp` as a string, `exp` = 1e20) is 401 INVALID_TOKEN like any other
bad token, never a 500.

A user's token also names the account's token epoch (`ep`) and its sign-in's refresh-token family
(`fam`): the principal query refuses it once the account's epoch moved on (disable) or the family was
revoked (sign-out, refresh-token reuse), so such tokens die at once and stay dead after a re-enable.

Verified claims are cached by the whole token (bounded, first in first out): a token's signature is
checked once per process, its expiry on every use, and the account it names is still loaded on every
request, so disabling an account takes effect at once.

Opaque secrets are random, shown once, and stored only as SHA-256 digests: their entropy makes a slow hash
unnecessary and lets a lookup be one index probe.
"""

from __future__ import annotations

import hashlib
import math
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import jwt

from tenet.kernel.errors import InvalidToken, TokenExpired

ALGORITHM = "HS256"
ISSUER = "tenet"
PrincipalKind = Literal["user", "client"]
# NumericDate bounds we accept: after 2000-01-01 and before 2200-01-01 (anything else is not ours).
_EARLIEST, _LATEST = 946_684_800, 7_258_118_400
CACHE_SIZE = 4096


@dataclass(frozen=True)
class AccessClaims:
    subject: uuid.UUID
    kind: PrincipalKind
    expires_at: datetime
    scopes: tuple[str, ...] = ()
    epoch: int = 0
    family: uuid.UUID | None = None


def _numeric_date(claims: dict[str, Any], name: str) -> float:
    value = claims.get(name)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) \
            or not _EARLIEST <= value <= _LATEST:
        raise InvalidToken()
    return float(value)


def _uuid(value: Any) -> uuid.UUID:
    if not isinstance(value, str):
        raise InvalidToken()
    try:
        return uuid.UUID(value)
    except ValueError:
        raise InvalidToken() from None


def _parse(claims: dict[str, Any]) -> AccessClaims:
    """The claims as we issue them, or InvalidToken: every member checked for its type and range."""
    if claims.get("typ") != "access" or claims.get("pk") not in ("user", "client"):
        raise InvalidToken()
    expires = _numeric_date(claims, "exp")
    _numeric_date(claims, "iat")
    scope = claims.get("scope", "")
    epoch = claims.get("ep", 0)
    if not isinstance(scope, str) or isinstance(epoch, bool) or not isinstance(epoch, int) \
            or not 0 <= epoch < 2**31:
        raise InvalidToken()
    family = claims.get("fam")
    return AccessClaims(
        subject=_uuid(claims.get("sub")), kind=claims["pk"], expires_at=datetime.fromtimestamp(expires, tz=UTC),
        scopes=tuple(scope.split()), epoch=epoch, family=None if family is None else _uuid(family),
    )


class AccessTokens:
    def __init__(self, signing_key: str, ttl: timedelta, *, cache_size: int = CACHE_SIZE) -> None:
        self._key = signing_key
        self.ttl = ttl
        self._cache: dict[str, AccessClaims] = {}
        self._cache_size = cache_size

    def issue(self, *, subject: uuid.UUID, kind: PrincipalKind, now: datetime, scopes: tuple[str, ...] = (),
              epoch: int = 0, family: uuid.UUID | None = None) -> str:
        claims: dict[str, Any] = {
            "iss": ISSUER,
            "sub": str(subject),
            "typ": "access",
            "pk": kind,
            "iat": int(now.timestamp()),
            "exp": int((now + self.ttl).timestamp()),
            "jti": uuid.uuid4().hex,
        }
        if scopes:
            claims["scope"] = " ".join(scopes)
        if kind == "user":
            claims["ep"] = epoch
            if family is not None:
                claims["fam"] = str(family)
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, token: str, *, now: datetime) -> AccessClaims:
        claims = self._cache.get(token)
        if claims is None:
            claims = self._verify_signature(token)
            if len(self._cache) >= self._cache_size:
                self._cache.pop(next(iter(self._cache)))
            self._cache[token] = claims
        # Expiry against the injected clock, not the wall clock, so tests can move time; on every use.
        if claims.expires_at <= now:
            raise TokenExpired()
        return claims

    def _verify_signature(self, token: str) -> AccessClaims:
        try:
            raw = jwt.decode(
                token, self._key, algorithms=[ALGORITHM], issuer=ISSUER,
                options={"require": ["exp", "iat", "sub", "iss"], "verify_exp": False, "verify_iat": False,
                         "verify_nbf": False},
            )
        except (jwt.PyJWTError, ValueError, TypeError, OverflowError):
            raise InvalidToken() from None
        if not isinstance(raw, dict):
            raise InvalidToken()
        return _parse(raw)


def new_secret(prefix: str) -> str:
    """A random secret with a recognisable prefix (so a leaked one can be found by scanners)."""
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def new_client_id() -> str:
    return f"tc_{secrets.token_hex(12)}"


def digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()
