"""argon2id password hashing. Hashing is deliberately slow, so it runs in a worker thread and never
blocks the event loop."""

from __future__ import annotations

import asyncio

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

MIN_PASSWORD_LENGTH = 10
MAX_PASSWORD_LENGTH = 1024


class Passwords:
    def __init__(self, *, time_cost: int = 3, memory_kib: int = 65536) -> None:
        self._hasher = PasswordHasher(time_cost=time_cost, memory_cost=memory_kib, parallelism=1)
        # Verified against when the account does not exist, so "no such user" costs as much time as
        # "wrong password" and sign-in does not reveal which emails have accounts.
        self._decoy = self._hasher.hash("decoy password that never matches")

    async def hash(self, password: str) -> str:
        return await asyncio.to_thread(self._hasher.hash, password)

    async def verify(self, password_hash: str | None, password: str) -> bool:
        return await asyncio.to_thread(self._verify, password_hash, password)

    def _verify(self, password_hash: str | None, password: str) -> bool:
        try:
            return self._hasher.verify(password_hash or self._decoy, password) and password_hash is not None
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return False

    def needs_rehash(self, password_hash: str) -> bool:
        return self._hasher.check_needs_rehash(password_hash)


def password_problems(password: str, *, email: str) -> str | None:
    """Why a new password is refused, or None. Length over composition rules (NIST SP 800-63B)."""
    if len(password) < MIN_PASSWORD_LENGTH:
        return f"use at least {MIN_PASSWORD_LENGTH} characters"
    if len(password) > MAX_PASSWORD_LENGTH:
        return f"use at most {MAX_PASSWORD_LENGTH} characters"
    if password.strip().lower() == email.strip().lower():
        return "the password may not be the email address"
    if len(set(password)) < 3:
        return "the password repeats too few characters"
    return None
