"""workspace_members: `GET /api/v1/workspaces/{id}/members?limit=50`, paged with the cursor, 500 members.

What Tenet does for it (src/tenet/workspaces/api.py list_members, queries.py members): verify the JWT
(cached), load the principal (`USER_PRINCIPAL_SQL`) on the transaction-free read path, then one statement
(`MEMBERS_SQL`) that checks the caller is an active member of a workspace that is not DELETED and reads one
keyset page of active members with their display names and emails (limit + 1 rows, to know whether a next
page exists), and answer `{items: [{user_id, membership_id, role, display_name, email, joined_at}],
next_cursor}`. The baseline runs the same two statements in a transaction and builds the same answer.

How wrk pages: every answer queues the request for the page after it (its `next_cursor`), the next
request takes the oldest queued one, and a last page (`next_cursor` null) or an error queues the first
page again. So each in-flight request is one client walking the list, and what is measured is the real
thing: the cursors each side hands out are the ones it is then asked for, and a side whose cursors do
not work shows as errors. A fixed list of the 10 page URLs would cost the server the same per page, but
would replay cursors Tenet made at setup and prove nothing about the ones each side serves under load.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import httpx

from bench.loading import add_members, check_invariants, create_workspace, register_users, sign_in
from bench.scenario import BaselineAnswer, BaselineRequest, DictCursor, Request
from bench.scenarios._sql import PRINCIPAL_SQL, json_time, principal_params
from tenet.kernel.pagination import PageParams
from tenet.workspaces import queries

DESCRIPTION = "GET /api/v1/workspaces/{id}/members?limit=50, walking the 10 pages of 500 members by cursor"
MEMBERS = 500  # the owner and 499 members
PAGE_SIZE = 50
MEMBER_FIELDS = {"user_id", "membership_id", "role", "display_name", "email", "joined_at"}


@dataclass(frozen=True)
class Context:
    workspace_id: uuid.UUID
    user_id: uuid.UUID
    token: str
    member_ids: tuple[uuid.UUID, ...]  # in join order: the order the pages list them
    second_page_cursor: str


def _first_page(workspace_id: uuid.UUID) -> str:
    return f"/api/v1/workspaces/{workspace_id}/members?limit={PAGE_SIZE}"


def _walk(client: httpx.Client, workspace_id: uuid.UUID, service: str) -> list[dict[str, Any]]:
    """Every page, following next_cursor; answers the pages' JSON."""
    pages: list[dict[str, Any]] = []
    path: str | None = _first_page(workspace_id)
    while path is not None:
        response = client.get(path)
        if response.status_code != 200:
            raise SystemExit(f"{service} answered {response.status_code} to GET {path}: {response.text[:500]}")
        pages.append(response.json())
        cursor = pages[-1]["next_cursor"]
        path = None if cursor is None else f"{_first_page(workspace_id)}&cursor={cursor}"
        if len(pages) > MEMBERS // PAGE_SIZE + 1:
            raise SystemExit(f"{service}: the cursor of page {len(pages)} never reaches the end of the list")
    return pages


async def setup(client: httpx.AsyncClient, database_url: str) -> Context:
    (owner,) = await register_users(client, 1, prefix="owner")
    token = await sign_in(client, owner)
    workspace_id = await create_workspace(client, token, "Bench members")
    # 499 invitations accepted through the API would take minutes; SQL writes what they would leave.
    members = await add_members(database_url, workspace_id=workspace_id, inviter_id=owner.id, count=MEMBERS - 1,
                                since=datetime.now(UTC))
    check_invariants(database_url)
    first = (await client.get(_first_page(workspace_id), headers={"Authorization": f"Bearer {token}"})).json()
    return Context(workspace_id=workspace_id, user_id=owner.id, token=token, member_ids=(owner.id, *members),
                   second_page_cursor=first["next_cursor"])


def wrk_request(context: Context) -> Request:
    # The second page: a cursor page, like nine requests in ten (the Lua below starts its walks at the first).
    return Request(path=f"{_first_page(context.workspace_id)}&cursor={context.second_page_cursor}",
                   headers={"Authorization": f"Bearer {context.token}"})


def wrk_lua(context: Context) -> str:
    return f"""
local first_page = "{_first_page(context.workspace_id)}"
local queued = {{}}  -- per thread: the next_cursor of each answer not followed yet (false: start again)

function request()
  local cursor = table.remove(queued, 1)
  if cursor then
    return wrk.format(nil, first_page .. "&cursor=" .. cursor)
  end
  return wrk.format(nil, first_page)
end

function scenario_response(status, body)
  table.insert(queued, status == 200 and body:match('"next_cursor"%s*:%s*"([^"]+)"') or false)
end
"""


def check(client: httpx.Client, service: str, context: Context) -> None:
    """Walk the whole list once: every member, in join order, each with exactly the API's fields."""
    pages = _walk(client, context.workspace_id, service)
    items = [item for page in pages for item in page["items"]]
    if [uuid.UUID(item["user_id"]) for item in items] != list(context.member_ids):
        raise SystemExit(f"{service}: walking the pages did not list the {MEMBERS} members in join order")
    wrong = [item for item in items if set(item) != MEMBER_FIELDS]
    if wrong or set(pages[0]) != {"items", "next_cursor"}:
        raise SystemExit(f"{service}: a member page is not {{items: [{sorted(MEMBER_FIELDS)}], next_cursor}}: "
                         f"{(wrong or [pages[0]])[0]}")


def baseline_config(context: Context) -> dict[str, object]:
    return {"principal": principal_params(context.user_id, context.token)}


async def baseline(cursor: DictCursor, request: BaselineRequest, config: dict[str, Any]) -> BaselineAnswer:
    workspace_id = uuid.UUID(request.path.split("/")[4])  # /api/v1/workspaces/{id}/members
    page = PageParams(limit=int(request.query.get("limit", PAGE_SIZE)), cursor=request.query.get("cursor"))
    principal = config["principal"]
    await cursor.execute(PRINCIPAL_SQL, principal)
    await cursor.fetchall()
    # Tenet's statement, built by Tenet's own code (so the two cannot drift).
    after, params = queries.MEMBERS_KEYSET.after(page)
    sql = queries.MEMBERS_SQL.format(caller=queries.CALLER_SQL, member="TRUE", after=after,
                                     order=queries.MEMBERS_KEYSET.order_by,
                                     page_order="page.joined_at, page.membership_id")
    await cursor.execute(sql, {"workspace_id": workspace_id, "caller": principal["id"],
                               "limit": queries.MEMBERS_KEYSET.fetch_limit(page), **params})
    rows = await cursor.fetchall()
    if not rows:
        return BaselineAnswer(404, {"code": "WORKSPACE_NOT_FOUND"})
    found = [row for row in rows if row["membership_id"] is not None]
    kept, next_cursor = queries.MEMBERS_KEYSET.page(found, page, key=lambda r: (r["joined_at"], r["membership_id"]))
    items = [{"user_id": row["user_id"], "membership_id": row["membership_id"], "role": row["role"],
              "display_name": row["display_name"], "email": row["email"],
              "joined_at": json_time(row["joined_at"])} for row in kept]
    return BaselineAnswer(200, {"items": items, "next_cursor": next_cursor})


def describe(context: Context) -> dict[str, object]:
    return {"members": len(context.member_ids), "page_size": PAGE_SIZE,
            "pages": -(-len(context.member_ids) // PAGE_SIZE), "workspace_id": str(context.workspace_id)}
