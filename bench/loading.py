"""Generated data, loaded through Tenet's public API (so it is exactly what the service would hold)."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass

import httpx

PASSWORD = "bench-password-0123"  # >= 10 characters, not the email, enough distinct characters


@dataclass(frozen=True)
class User:
    id: uuid.UUID
    email: str
    password: str


async def register_users(client: httpx.AsyncClient, count: int, *, concurrency: int = 8,
                         prefix: str = "user") -> list[User]:
    """Register `count` accounts via POST /api/v1/auth/register, `concurrency` at a time."""
    gate = asyncio.Semaphore(concurrency)
    run = uuid.uuid4().hex[:8]  # unique emails even against a database that already has bench users

    async def one(index: int) -> User:
        email = f"{prefix}-{run}-{index:06d}@bench.example"
        async with gate:
            response = await client.post("/api/v1/auth/register", json={
                "email": email, "password": PASSWORD, "display_name": f"Bench {prefix.title()} {index}",
            })
        if response.status_code != 201:
            raise SystemExit(f"registering {email} answered {response.status_code}: {response.text[:500]}")
        return User(id=uuid.UUID(response.json()["id"]), email=email, password=PASSWORD)

    return list(await asyncio.gather(*(one(i) for i in range(count))))


async def sign_in(client: httpx.AsyncClient, user: User) -> str:
    """An access token for `user` (OAuth2 password grant, form-encoded)."""
    response = await client.post("/api/v1/auth/token", data={
        "grant_type": "password", "username": user.email, "password": user.password,
    })
    if response.status_code != 200:
        raise SystemExit(f"signing in {user.email} answered {response.status_code}: {response.text[:500]}")
    return response.json()["access_token"]
