"""Routes of social collaboration: /api/v1/social (API.md "Social"), one module per aggregate.

GET routes read on the transaction-free path (one statement each, the caller's right to see the rows inside
it); writes call one command in the request's unit of work and answer what the GET of the same thing answers,
re-read through the same query function (tenet.social.queries) inside that unit of work. Every user's own rows
are theirs alone: anyone else's answer 404. API clients get 403 (these routes are for signed-in users).
"""

from __future__ import annotations

from tenet.social.api import automations, cutover, friendships, groups, inbox, items, profile, todos
from tenet.social.api._common import TAG
from tenet.social.permissions import permission_table_markdown

TAG_DESCRIPTION = (
    "Social collaboration (spec 000): your profile, settings and agent; friendships; groups; schedule items "
    "shared with people and groups; the inbox; todos; automations. Other people's rows answer 404.\n\n"
    "**Item permissions** (first match wins): the owner holds view, invite, edit; else your own subscription; "
    "else, for each group the item is shared with and you are a current member of, the group subscription's "
    "permission within your role's default (creator view+invite+edit, admin view+invite, member view); else "
    "nothing (404). `invite` shares, `edit` changes the item and manages subscriptions; only the owner deletes.\n\n"
    "**Group roles** (a refused role gets 403 `GROUP_ROLE_FORBIDDEN`):\n\n" + permission_table_markdown()
)
OPENAPI_TAGS = [{"name": TAG, "description": TAG_DESCRIPTION}]

# In the order of the paths in the OpenAPI document; the public feed last.
ROUTERS = [profile.router, friendships.router, groups.router, items.router, inbox.router, todos.router,
           automations.router, cutover.router, profile.feed_router]
