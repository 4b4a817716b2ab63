"""Access tokens (short-lived JWT, HS256) and opaque secrets (refresh tokens, client secrets).

Access tokens are verified with the one algorithm we issue, so `alg=none` or an RS/HS confusion is
refused by construction. Opaque secrets are random, shown once, and stored only as SHA-256 digests:
their entropy makes a slow hash unnecessary and lets a lookup be one index probe.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal

import jwt

from tenet.kernel.errors import InvalidToken, TokenExpired

ALGORITHM = "HS256"
ISSUER = "tenet"
PrincipalKind = Literal["user", "client"]


@dataclass(frozen=True)
class AccessClaims:
    subject: uuid.UUID
    kind: PrincipalKind
    expires_at: datetime
    scopes: tuple[str, ...] = ()


class AccessTokens:
    def __init__(self, signing_key: str, ttl: timedelta) -> None:
        self._key = signing_key
        self.ttl = ttl

    def issue(self, *, subject: uuid.UUID, kind: PrincipalKind, now: datetime,
              scopes: tuple[str, ...] = ()) -> str:
        claims = {
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
        return jwt.encode(claims, self._key, algorithm=ALGORITHM)

    def verify(self, token: str, *, now: datetime) -> AccessClaims:
        try:
            claims = jwt.decode(
                token, self._key, algorithms=[ALGORITHM], issuer=ISSUER,
                options={"require": ["exp", "iat", "sub", "iss"], "verify_exp": False, "verify_iat": False},
            )
        except jwt.PyJWTError:
            raise InvalidToken() from None
        # Expiry against the injected clock, not the wall clock, so tests can move time.
        if claims["exp"] <= now.timestamp():
            raise TokenExpired()
        if claims.get("typ") != "access" or claims.get("pk") not in ("user", "client"):
            raise InvalidToken()
        try:
            subject = uuid.UUID(claims["sub"])
        except (ValueError, TypeError):
            raise InvalidToken() from None
        return AccessClaims(
            subject=subject, kind=claims["pk"],
            expires_at=datetime.fromtimestamp(claims["exp"], tz=now.tzinfo),
            scopes=tuple(str(claims.get("scope", "")).split()),
        )


def new_secret(prefix: str) -> str:
    """A random secret with a recognisable prefix (so a leaked one can be found by scanners)."""
    return f"{prefix}_{secrets.token_urlsafe(32)}"


def new_client_id() -> str:
    return f"tc_{secrets.token_hex(12)}"


def digest(secret: str) -> str:
    return "sha256:" + hashlib.sha256(secret.encode()).hexdigest()
