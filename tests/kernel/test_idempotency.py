"""`Idempotency-Key` on POST (API.md Conventions)."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import httpx
import pytest
from fastapi import APIRouter
from sqlalchemy import text

from tenet.app import create_app
from tenet.deps import NowDep, SessionDep
from tenet.kernel.errors import BadRequest
from tenet.kernel.http import API_PREFIX, TenetRoute

REGISTER = "/api/v1/auth/register"


def registration(email: str = "idem@example.com", name: str = "Idem") -> dict:
    return {"email": email, "password": "a long enough password", "display_name": name}


async def count_users(db, email: str) -> int:
    async with db.read_only() as session:
        return (await session.execute(
            text("SELECT count(*) FROM iam.user_account WHERE email_normalized = lower(:e)"), {"e": email}
        )).scalar_one()


class TestReplay:
    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_same_key_same_body_replays_the_first_answer(self, client, db):
        first = await client.post(REGISTER, json=registration(), headers={"Idempotency-Key": "k-1"})
        second = await client.post(REGISTER, json=registration(), headers={"Idempotency-Key": "k-1"})
        assert first.status_code == second.status_code == 201
        assert second.json() == first.json()
        assert second.headers["idempotent-replayed"] == "true"
        assert "idempotent-replayed" not in first.headers
        assert second.headers["content-type"] == first.headers["content-type"]
        assert await count_users(db, "idem@example.com") == 1

    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_same_key_other_body_is_422(self, client):
        await client.post(REGISTER, json=registration(), headers={"Idempotency-Key": "k-2"})
        reused = await client.post(REGISTER, json=registration(name="Other"), headers={"Idempotency-Key": "k-2"})
        assert reused.status_code == 422
        assert reused.json()["code"] == "IDEMPOTENCY_KEY_REUSED"

    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_same_key_other_path_is_422(self, client, users):
        admin = await users.admin()
        await client.post("/api/v1/iam/users", json=registration("a1@example.com"),
                          headers={**admin.headers, "Idempotency-Key": "k-3"})
        other = await client.post("/api/v1/iam/api-clients", json={"name": "x", "scopes": ["reservations:ingest"]},
                                  headers={**admin.headers, "Idempotency-Key": "k-3"})
        assert other.json()["code"] == "IDEMPOTENCY_KEY_REUSED"

    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_keys_are_scoped_to_the_principal(self, client, users, db):
        alice, bob = await users.admin(), await users.admin()
        a = await client.post("/api/v1/iam/users", json=registration("fromalice@example.com"),
                              headers={**alice.headers, "Idempotency-Key": "shared"})
        b = await client.post("/api/v1/iam/users", json=registration("frombob@example.com"),
                              headers={**bob.headers, "Idempotency-Key": "shared"})
        assert a.status_code == b.status_code == 201
        assert "idempotent-replayed" not in b.headers

    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_client_errors_are_stored_and_replayed(self, client):
        weak = {**registration(), "password": "short pw 1"[:9]}
        first = await client.post(REGISTER, json=weak, headers={"Idempotency-Key": "k-4"})
        again = await client.post(REGISTER, json=weak, headers={"Idempotency-Key": "k-4"})
        assert first.status_code == again.status_code == 422
        assert again.headers["idempotent-replayed"] == "true"


class TestNotStored:
    async def test_a_409_is_not_stored_so_a_retry_runs_again(self, client, users, db):
        admin = await users.admin()
        taken = await users.make(email="taken@example.com")
        first = await client.post(REGISTER, json=registration("taken@example.com"), headers={"Idempotency-Key": "k-5"})
        assert first.status_code == 409
        deleted = await client.delete(f"/api/v1/iam/users/{taken.id}", headers=admin.headers)
        assert deleted.status_code == 204
        retry = await client.post(REGISTER, json=registration("taken@example.com"), headers={"Idempotency-Key": "k-5"})
        assert retry.status_code == 201
        assert "idempotent-replayed" not in retry.headers

    async def test_a_429_is_not_stored(self, db, clock, tmp_path):
        from tests.conftest import test_settings

        app = create_app(test_settings(data_dir=tmp_path, registration_limit="1/hour"), database=db, clock=clock,
                         run_background_tasks=False)
        transport = httpx.ASGITransport(app=app, client=("198.51.100.1", 1))
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as limited:
            await limited.post(REGISTER, json=registration("one@example.com"))
            refused = await limited.post(REGISTER, json=registration("two@example.com"),
                                         headers={"Idempotency-Key": "k-6"})
            assert refused.status_code == 429
            clock.advance(timedelta(hours=1))
            later = await limited.post(REGISTER, json=registration("two@example.com"),
                                       headers={"Idempotency-Key": "k-6"})
        assert later.status_code == 201


    async def test_an_answer_marked_no_store_is_not_kept(self, client, users, db):
        """A new API client's secret is shown once: it is not kept for replay, so a retry runs again."""
        admin = await users.admin()
        body = {"name": "Extractor", "scopes": ["reservations:ingest"]}
        headers = {**admin.headers, "Idempotency-Key": "c"}
        first = await client.post("/api/v1/iam/api-clients", json=body, headers=headers)
        second = await client.post("/api/v1/iam/api-clients", json=body, headers=headers)
        assert first.status_code == second.status_code == 201
        assert "idempotent-replayed" not in second.headers
        assert first.json()["client_secret"] != second.json()["client_secret"]
        async with db.read_only() as session:
            kept = (await session.execute(text("SELECT count(*) FROM kernel.idempotency_key"))).scalar_one()
        assert kept == 0


class TestLifetime:
    async def test_a_key_expires_after_24_hours(self, client, clock):
        await client.post(REGISTER, json=registration("day1@example.com"), headers={"Idempotency-Key": "k-7"})
        clock.advance(timedelta(hours=24, seconds=1))
        fresh = await client.post(REGISTER, json=registration("day2@example.com"), headers={"Idempotency-Key": "k-7"})
        assert fresh.status_code == 201
        assert "idempotent-replayed" not in fresh.headers

    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_within_24_hours_the_key_still_replays(self, client, clock):
        await client.post(REGISTER, json=registration("h23@example.com"), headers={"Idempotency-Key": "k-8"})
        clock.advance(timedelta(hours=23, minutes=59))
        again = await client.post(REGISTER, json=registration("h23@example.com"), headers={"Idempotency-Key": "k-8"})
        assert again.headers.get("idempotent-replayed") == "true"

    async def test_an_abandoned_claim_is_taken_over_after_its_lease(self, client, db, clock):
        async with db.unit_of_work() as session:
            await session.execute(text(
                "INSERT INTO kernel.idempotency_key (principal, key, fingerprint, state, lock_token, locked_until,"
                " created_at, expires_at) VALUES ('anonymous:203.0.113.7', 'k-9', 'whatever', 'in_flight',"
                " gen_random_uuid(), :until, :now, :expires)"),
                {"until": clock.now() - timedelta(seconds=1), "now": clock.now() - timedelta(minutes=2),
                 "expires": clock.now() + timedelta(hours=23)})
        response = await client.post(REGISTER, json=registration("lease@example.com"),
                                     headers={"Idempotency-Key": "k-9"})
        assert response.status_code == 201

    @pytest.mark.invariant("KERNEL-INV-02")
    async def test_a_live_claim_answers_409_with_retry_after(self, client, db, clock):
        async with db.unit_of_work() as session:
            await session.execute(text(
                "INSERT INTO kernel.idempotency_key (principal, key, fingerprint, state, lock_token, locked_until,"
                " created_at, expires_at) VALUES ('anonymous:203.0.113.7', 'k-10', 'other', 'in_flight',"
                " gen_random_uuid(), :until, :now, :expires)"),
                {"until": clock.now() + timedelta(seconds=30), "now": clock.now(),
                 "expires": clock.now() + timedelta(hours=24)})
        response = await client.post(REGISTER, json=registration("busy@example.com"),
                                     headers={"Idempotency-Key": "k-10"})
        # A different fingerprint wins over "in flight": the key is being used for another request.
        assert response.json()["code"] == "IDEMPOTENCY_KEY_REUSED"


@pytest.mark.parametrize("key", ["", "x" * 256, "has space", "tab\there"])
async def test_malformed_keys_are_400(client, key):
    response = await client.post(REGISTER, json=registration(), headers={"Idempotency-Key": key})
    assert response.status_code == 400
    assert response.json()["code"] == "IDEMPOTENCY_KEY_INVALID"


async def test_token_answers_are_never_stored(client, users, db):
    user = await users.make()
    form = {"grant_type": "password", "username": user.email, "password": "a-long-test-password"}
    first = await client.post("/api/v1/auth/token", data=form, headers={"Idempotency-Key": "tok"})
    second = await client.post("/api/v1/auth/token", data=form, headers={"Idempotency-Key": "tok"})
    assert first.status_code == second.status_code == 200
    assert first.json()["refresh_token"] != second.json()["refresh_token"]
    async with db.read_only() as session:
        stored = (await session.execute(text("SELECT count(*) FROM kernel.idempotency_key"))).scalar_one()
    assert stored == 0


@pytest.mark.invariant("KERNEL-INV-02")
async def test_ten_concurrent_identical_posts_run_the_handler_once(committed_db, clock, tmp_path):
    """Real parallel connections: exactly one request claims the key; the handler runs once."""
    from tests.conftest import test_settings

    app = create_app(test_settings(data_dir=tmp_path), database=committed_db, clock=clock, run_background_tasks=False)
    transport = httpx.ASGITransport(app=app, client=("192.0.2.10", 1))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
        responses = await asyncio.gather(*(
            client.post(REGISTER, json=registration("race@example.com"), headers={"Idempotency-Key": "same"})
            for _ in range(10)
        ))
    codes = [(r.status_code, r.headers.get("idempotent-replayed"), r.json().get("code")) for r in responses]
    originals = [c for c in codes if c[0] == 201 and c[1] is None]
    assert len(originals) == 1, codes
    assert all(c[0] == 201 or c[2] == "IDEMPOTENCY_REQUEST_IN_PROGRESS" for c in codes), codes
    assert all(r.headers.get("retry-after") for r in responses if r.status_code == 409)
    async with committed_db.read_only() as session:
        created = (await session.execute(text(
            "SELECT count(*) FROM kernel.audit_log WHERE action = 'iam.user.created'"))).scalar_one()
    assert created == 1
    assert await count_users(committed_db, "race@example.com") == 1


async def test_a_nul_in_the_body_is_a_stored_422_with_or_without_a_key(committed_db, clock, tmp_path):
    """Review item 8 (a NUL in a JSON string behind an Idempotency-Key answered 500): on a real, committing
    database the refusal is a 422 with or without the key, and with it the refusal is stored (the request's
    fingerprint is a digest and the stored answer is bytes, so no text column ever holds the NUL) and replayed."""
    from tests.conftest import test_settings
    from tests.support.users import UserFactory

    app = create_app(test_settings(data_dir=tmp_path), database=committed_db, clock=clock, run_background_tasks=False)
    owner = await UserFactory(app, committed_db, clock).make()
    body = b'{"name": "a\\u0000b"}'
    headers = {**owner.headers, "content-type": "application/json"}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        bare = await client.post("/api/v1/workspaces", content=body, headers=headers)
        first = await client.post("/api/v1/workspaces", content=body, headers={**headers, "Idempotency-Key": "nul"})
        again = await client.post("/api/v1/workspaces", content=body, headers={**headers, "Idempotency-Key": "nul"})
    assert bare.status_code == first.status_code == again.status_code == 422, first.text
    assert bare.json()["code"] == first.json()["code"] == "VALIDATION_FAILED"
    assert again.headers["idempotent-replayed"] == "true" and again.json() == first.json()


refusing = APIRouter(prefix=f"{API_PREFIX}/idem-test", route_class=TenetRoute)


@refusing.post("/write-then-refuse", status_code=201)
async def write_then_refuse(session: SessionDep, now: NowDep) -> dict[str, str]:
    await session.execute(text("INSERT INTO reservation.hotel (hotel_id, created_at, updated_at) "
                               "VALUES ('HALF', :now, :now)"), {"now": now})
    raise BadRequest("refused after a write")


async def test_a_refusal_behind_a_key_rolls_back_what_the_handler_wrote(committed_db, clock, tmp_path):
    """The refusal is rendered and stored by the idempotency layer, and the route's unit of work ends before
    that: rolled back, as without the key. It was rendered inside the unit of work, which then committed the
    handler's writes (and answered 500 where a flush had failed: PendingRollbackError, found by the widened
    fuzz pass registering an existing hotel)."""
    from tests.conftest import test_settings
    from tests.support.users import UserFactory

    app = create_app(test_settings(data_dir=tmp_path), database=committed_db, clock=clock, run_background_tasks=False)
    app.include_router(refusing)
    admin = await UserFactory(app, committed_db, clock).admin()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        for key in (None, "refused", "refused"):
            headers = {**admin.headers, **({"Idempotency-Key": key} if key else {})}
            refused = await client.post(f"{API_PREFIX}/idem-test/write-then-refuse", headers=headers)
            assert (refused.status_code, refused.json()["code"]) == (400, "BAD_REQUEST")
        first = await client.post("/api/v1/reservations/hotels", json={"hotel_id": "H7"}, headers=admin.headers)
        assert first.status_code == 201, first.text
        for _ in range(2):
            again = await client.post("/api/v1/reservations/hotels", json={"hotel_id": "H7"},
                                      headers={**admin.headers, "Idempotency-Key": "hotel-again"})
            assert (again.status_code, again.json()["code"]) == (409, "HOTEL_ALREADY_EXISTS"), again.text
    assert refused.headers["idempotent-replayed"] == "true"
    async with committed_db.read_only() as session:
        hotels = (await session.execute(text("SELECT hotel_id FROM reservation.hotel ORDER BY 1"))).scalars().all()
    assert hotels == ["H7"]
