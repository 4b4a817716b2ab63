"""An identity command answers what the GET of the same account answers right after it (issue 23: the answer is
read back through the GET's query in the command's transaction): registration, creation, roles, disable, enable."""

from __future__ import annotations

from tenet.iam.permissions import Role

PASSWORD = "correct horse battery staple"


async def test_an_account_written_answers_its_get(client, users):
    admin = await users.admin()

    async def same_as_get(written) -> None:
        assert written.status_code in (200, 201), written.text
        fetched = await client.get(f"/api/v1/iam/users/{written.json()['id']}", headers=admin.headers)
        assert fetched.status_code == 200, fetched.text
        assert written.json() == fetched.json()

    registered = await client.post("/api/v1/auth/register", json={
        "email": "Self.Made@Example.com", "password": PASSWORD, "display_name": "Self Made"})
    await same_as_get(registered)
    created = await client.post("/api/v1/iam/users", headers=admin.headers, json={
        "email": "made@example.com", "password": PASSWORD, "display_name": "Made",
        "roles": [Role.LEADER, Role.EMPLOYEE]})
    await same_as_get(created)
    user_id = created.json()["id"]
    await same_as_get(await client.put(f"/api/v1/iam/users/{user_id}/roles", headers=admin.headers,
                                       json={"roles": [Role.MEETING_MANAGER]}))
    await same_as_get(await client.post(f"/api/v1/iam/users/{user_id}/disable", headers=admin.headers))
    await same_as_get(await client.post(f"/api/v1/iam/users/{user_id}/enable", headers=admin.headers))


async def test_an_api_client_created_answers_its_row_in_the_list(client, users):
    admin = await users.admin()
    created = await client.post("/api/v1/iam/api-clients", headers=admin.headers,
                                json={"name": "Importer", "scopes": ["reservations:read"], "hotel_ids": ["H1"]})
    assert created.status_code == 201, created.text
    listed = (await client.get("/api/v1/iam/api-clients", headers=admin.headers)).json()["items"]
    shown = next(c for c in listed if c["id"] == created.json()["id"])
    assert {k: v for k, v in created.json().items() if k != "client_secret"} == shown
