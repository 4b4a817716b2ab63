"""Bad input of every kind gets a 4xx problem+json with a stable code: never a 500, never a trace."""

from __future__ import annotations

import json

import pytest

PROBLEM = "application/problem+json"
REGISTER = "/api/v1/auth/register"


def assert_problem(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    body = response.json()
    assert body["code"] == code and body["status"] == status
    assert {"type", "title", "detail"} <= body.keys()
    assert "Traceback" not in response.text
    return body


async def test_malformed_json_is_400(client):
    response = await client.post(REGISTER, content=b'{"email": ', headers={"content-type": "application/json"})
    assert_problem(response, 400, "MALFORMED_REQUEST_BODY")


async def test_wrong_types_are_422_with_locations(client):
    response = await client.post(REGISTER, json={"email": 5, "password": ["x"], "display_name": "A"})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert {tuple(e["loc"]) for e in body["errors"]} >= {("body", "email"), ("body", "password")}


async def test_validation_errors_never_echo_the_input(client):
    secret = "my secret password that must not leak"
    response = await client.post(REGISTER, json={"email": "a@example.com", "password": secret, "display_name": ""})
    assert_problem(response, 422, "VALIDATION_FAILED")
    assert secret not in response.text


async def test_unknown_fields_are_refused_where_forbidden(client):
    response = await client.post(REGISTER, json={
        "email": "a@example.com", "password": "long enough password", "display_name": "A", "is_admin": True})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert body["errors"][0]["type"] == "extra_forbidden"


async def test_unknown_route_is_404_route_not_found(client):
    assert_problem(await client.get("/api/v1/nothing-here"), 404, "ROUTE_NOT_FOUND")


async def test_wrong_method_is_405_with_allow(client):
    response = await client.put("/api/v1/auth/me")
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response.headers["allow"]


async def test_oversized_body_is_413_by_content_length(client, settings):
    body = b"[" + b"1," * settings.max_json_body_bytes + b"1]"
    response = await client.post(REGISTER, content=body, headers={"content-type": "application/json"})
    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")


async def test_oversized_chunked_body_is_413(client, settings):
    async def chunks():
        for _ in range(settings.max_json_body_bytes // 65536 + 2):
            yield b" " * 65536

    response = await client.post(REGISTER, content=chunks(), headers={"content-type": "application/json"})
    assert_problem(response, 413, "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml", "application/x-www-form-urlencoded"])
async def test_json_route_with_another_media_type_is_415(client, content_type):
    response = await client.post(REGISTER, content=b"email=a", headers={"content-type": content_type})
    assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")


async def test_form_route_with_json_is_415(client):
    response = await client.post("/api/v1/auth/token", json={"grant_type": "password"})
    assert_problem(response, 415, "UNSUPPORTED_MEDIA_TYPE")


async def test_json_with_a_charset_parameter_is_accepted(client):
    response = await client.post(REGISTER, content=b'{"email": "cs@example.com", "password": "long enough pw",'
                                                     b' "display_name": "C"}',
                                 headers={"content-type": "application/json; charset=utf-8"})
    assert response.status_code == 201, response.text


async def test_bad_path_parameter_is_422(client, users):
    admin = await users.admin()
    response = await client.get("/api/v1/iam/users/not-a-uuid", headers=admin.headers)
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_limit_out_of_range_is_422(client, users):
    admin = await users.admin()
    response = await client.get("/api/v1/iam/users?limit=100000", headers=admin.headers)
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_every_answer_carries_a_request_id(client):
    response = await client.get("/api/v1/nothing-here", headers={"X-Request-ID": "abc-123"})
    assert response.headers["x-request-id"] == "abc-123"
    assert response.json()["request_id"] == "abc-123"
    generated = await client.get("/healthz", headers={"X-Request-ID": "bad id with spaces"})
    assert generated.headers["x-request-id"] != "bad id with spaces"


async def test_control_characters_in_names_are_422(client):
    response = await client.post(REGISTER, json={"email": "nul@example.com", "password": "long enough password",
                                                 "display_name": "Bad\u0000Name"})
    assert_problem(response, 422, "VALIDATION_FAILED")


async def test_a_nul_character_the_schema_lets_through_is_422_not_500(client):
    """The safety net: the sign-in form does not validate the username, so the NUL reaches PostgreSQL, which
    refuses it in text; the answer is a 422 (the DataError handler's), never a 500 — nor a 401, which would
    mean the value never reached the database and the net went untested."""
    response = await client.post("/api/v1/auth/token", data={"grant_type": "password",
                                                             "username": "a\u0000b@example.com", "password": "x"})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    assert body["detail"].startswith("A value cannot be stored")



async def test_a_value_postgresql_refuses_on_the_read_path_is_422_not_500(db):
    """The read path hands psycopg's DataError through unwrapped (no SQLAlchemy around it): a NUL in a query
    parameter must still answer 422."""
    import httpx
    from fastapi import FastAPI

    from tenet.kernel.http import install_error_handlers

    app = FastAPI()
    install_error_handlers(app)

    @app.get("/echo")
    async def echo(value: str) -> dict:
        return {"rows": await db.reads.all("SELECT %(v)s::text AS v", {"v": value})}

    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        assert (await client.get("/echo", params={"value": "fine"})).status_code == 200
        assert_problem(await client.get("/echo", params={"value": "a\u0000b"}), 422, "VALIDATION_FAILED")


@pytest.mark.parametrize("path,body", [
    # Check-in opens 30 minutes before the start: before year 1 for a meeting at 00:10 on 0001-01-01.
    ("/api/v1/meeting-attendance/meetings", {"title": "Dawn of time", "timezone": "UTC",
                                             "start_time": "0001-01-01T00:10:00Z",
                                             "end_time": "0001-01-01T01:00:00Z"}),
    # A weekly series starting on the calendar's last day: its second occurrence is past year 9999.
    ("/api/v1/meeting-attendance/series", {"title": "End of time", "timezone": "UTC", "start_date": "9999-12-31",
                                           "start_local_time": "23:00", "duration_minutes": 120,
                                           "rrule": "FREQ=WEEKLY;COUNT=2"}),
])
async def test_dates_at_the_edge_of_the_calendar_are_4xx_not_500(client, users, path, body):
    """Review item 1 through real routes that do date arithmetic. The kernel answers an overflow 422
    VALUE_OUT_OF_RANGE; a domain that bounds its dates first answers with its own stable 4xx code."""
    from tenet.iam.permissions import Role
    from tenet.kernel.errors import ERROR_REGISTRY

    manager = await users.make(roles=[Role.ADMINISTRATOR])
    response = await client.post(path, json=body, headers=manager.headers)
    assert 400 <= response.status_code < 500, response.text
    assert response.headers["content-type"].startswith(PROBLEM)
    assert response.json()["code"] in ERROR_REGISTRY


def test_no_problem_document_fails_to_encode():
    """A client's string can reach a problem (a member name in `errors[].loc`, a field path): a lone surrogate
    in it (legal in a JSON escape, not in UTF-8) becomes U+FFFD, so the document is always UTF-8 JSON."""
    from tenet.kernel.errors import ValidationFailed
    from tenet.kernel.problems import problem_bytes

    error = ValidationFailed("bad \ud800 key", errors=[{"loc": ["body", "\udfff", "\ud83d\ude00"], "msg": "x",
                                                        "type": "y"}])
    document = json.loads(problem_bytes(error, "rid").decode("utf-8"))
    assert document["detail"] == "bad \ufffd key"
    assert document["errors"][0]["loc"] == ["body", "\ufffd", "\ufffd\ufffd"]


async def test_a_lone_surrogate_in_a_settings_key_is_422_not_500(client, users):
    user = await users.make()
    response = await client.patch("/api/v1/social/me/settings", content=b'{"\\ud800": 1, "privacy": {"\\udc00x": 1}}',
                                  headers={**user.headers, "content-type": "application/json"})
    body = assert_problem(response, 422, "VALIDATION_FAILED")
    response.content.decode("utf-8")  # strict: well-formed UTF-8
    assert "\ufffd" in json.dumps(body, ensure_ascii=False)


@pytest.mark.parametrize(("digits", "ceiling", "wanted"), [
    ("0", 10, 0), ("7", 10, 7), ("10", 10, 10), ("11", 10, 10), ("0007", 10, 7), ("9" * 5000, 10, 10),
    ("0" * 5000 + "3", 10, 3), ("0" * 5000, 10, 0), ("99", 2**63, 99), ("9" * 19, 2**63, 2**63),
])
def test_digits_of_any_length_are_bounded_before_they_are_converted(digits, ceiling, wanted):
    from tenet.kernel.text import number_at_most

    assert number_at_most(digits, ceiling) == wanted
