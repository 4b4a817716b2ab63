async def test_healthz_answers(client):
    response = await client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


async def test_register_then_me(client):
    response = await client.post("/api/v1/auth/register", json={
        "email": "Ada@Example.com", "password": "correct horse battery", "display_name": "Ada"})
    assert response.status_code == 201, response.text
    token = await client.post("/api/v1/auth/token", data={
        "grant_type": "password", "username": "ada@example.com", "password": "correct horse battery"})
    assert token.status_code == 200, token.text
    me = await client.get("/api/v1/auth/me", headers={"Authorization": f"Bearer {token.json()['access_token']}"})
    assert me.status_code == 200, me.text
    assert me.json()["user"]["email"] == "Ada@Example.com"
