"""`GET /api/v1/social/cutover/users/{user}` (issue 20): a gateway (an API client with `social:cutover:read`) or
the user themselves learns which side the user reads from; the answer follows the switch at once."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from sqlalchemy import text
from tests.support.outcomes import code

from tenet.iam import service as iam_service
from tenet.iam.permissions import Scope
from tenet.kernel.audit import Actor
from tenet.social.legacy import cutover


@dataclass(frozen=True)
class Client:
    id: uuid.UUID
    kind: str
    scopes: tuple[str, ...]


async def _client(db, clock, scopes: list[Scope]) -> Client:
    async with db.unit_of_work() as session:
        made, _ = await iam_service.create_api_client(session, name="Gateway", scopes=scopes, hotel_ids=[],
                                                      now=clock.now(), actor=Actor.system())
    return Client(made.id, "client", tuple(s.value for s in scopes))


async def _switch(db, clock, percent: int) -> None:
    async with db.unit_of_work() as session:
        await cutover.set_percent(session, percent=percent, now=clock.now())


async def test_the_gateway_sees_the_switch_move_and_come_back(api, db, clock, users):
    gateway = await _client(db, clock, [Scope.SOCIAL_CUTOVER_READ])
    people = [await users.make() for _ in range(30)]
    moved = {p.id for p in people if cutover.bucket(p.id) < 10}

    async def on_tenet() -> set[uuid.UUID]:
        answers = [await api.ok(api.get(gateway, f"/cutover/users/{p.id}")) for p in people]
        return {uuid.UUID(a["user_id"]) for a in answers if a["reads_from"] == "tenet"}

    assert await on_tenet() == set()
    await _switch(db, clock, 10)
    assert await on_tenet() == moved
    answer = await api.ok(api.get(gateway, f"/cutover/users/{people[0].id}"))
    assert answer["read_percent"] == 10 and answer["bucket"] == cutover.bucket(people[0].id)
    await _switch(db, clock, 0)  # the rollback
    assert await on_tenet() == set()


async def test_a_legacy_user_id_answers_by_its_mapping(api, db, clock, users):
    gateway = await _client(db, clock, [Scope.SOCIAL_CUTOVER_READ])
    person = await users.make()
    async with db.unit_of_work() as session:
        await session.execute(text("INSERT INTO social_legacy.id_map (source_table, legacy_id, new_id, mapped_at) "
                                   "VALUES ('users', 41, :u, :now)"), {"u": person.id, "now": clock.now()})
    await _switch(db, clock, 100)
    assert (await api.ok(api.get(gateway, "/cutover/users/41")))["user_id"] == str(person.id)
    never = await api.ok(api.get(gateway, "/cutover/users/42"))  # never migrated: the legacy side, always
    assert (never["user_id"], never["reads_from"]) == (None, "legacy")


async def test_who_may_ask(api, db, clock, users):
    ann, bob = await users.make(), await users.make()
    other_client = await _client(db, clock, [Scope.RESERVATIONS_READ])
    assert (await api.ok(api.get(ann, f"/cutover/users/{ann.id}")))["reads_from"] == "legacy"
    assert _answer(await api.get(ann, f"/cutover/users/{bob.id}")) == (404, "USER_NOT_FOUND")
    assert _answer(await api.get(other_client, f"/cutover/users/{ann.id}")) == (403, "PERMISSION_DENIED")
    assert _answer(await api.get(ann, "/cutover/users/not-a-user")) == (422, "VALIDATION_FAILED")
    assert _answer(await api.get(ann, f"/cutover/users/{uuid.uuid4()}")) == (404, "USER_NOT_FOUND")
    assert (await api.get(None, f"/cutover/users/{ann.id}")).status_code == 401


def _answer(response) -> tuple[int, str]:
    return response.status_code, code(response)
