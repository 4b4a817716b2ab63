"""Issue 24 item 9: the answer must not tell a caller whether an account (or a private group) exists when the
caller may not know. A person who does not exist, is not active, or exists and refuses (privacy, a block, not a
friend) gets one answer, status and code; and a command on an object the caller may not see answers that first,
whoever the other party is."""

from __future__ import annotations

import uuid

import pytest
from tests.support.outcomes import code
from tests.support.users import TestUser, UserFactory


def answer(response) -> tuple[int, str]:
    return response.status_code, code(response)


@pytest.fixture
async def strangers(api, ann, users: UserFactory, client) -> dict[str, uuid.UUID]:
    """Ids of people Ann has no relation with: one missing, one disabled, one who refuses requests, one who
    blocked her."""
    admin = await users.admin()
    disabled, private, blocker = [await users.make(display_name=n) for n in ("Dee", "Pri", "Blo")]
    assert (await client.post(f"/api/v1/iam/users/{disabled.id}/disable", headers=admin.headers)).status_code == 200
    await api.ok(api.patch(private, "/me/settings", {"privacy": {"allow_friend_requests": False}}))
    await api.ok(api.post(blocker, "/friendships/blocks", {"user_id": str(ann.id)}))
    return {"missing": uuid.uuid4(), "disabled": disabled.id, "private": private.id, "blocker": blocker.id}


async def test_a_friend_request_answers_missing_and_refusing_people_alike(api, ann, strangers):
    answers = {name: answer(await api.post(ann, "/friendships", {"user_id": str(user_id)}))
               for name, user_id in strangers.items()}
    assert set(answers.values()) == {(403, "RECIPIENT_UNAVAILABLE")}, answers


async def test_sharing_an_item_one_cannot_see_answers_that_first(api, ann, bob, strangers):
    hidden = await api.item(bob)
    answers = {name: answer(await api.post(ann, f"/schedule-items/{hidden['id']}/subscriptions",
                                           {"subject_type": "user", "subject_id": str(user_id)}))
               for name, user_id in {**strangers, "bob": bob.id}.items()}
    assert set(answers.values()) == {(404, "SCHEDULE_ITEM_NOT_FOUND")}, answers


async def test_sharing_ones_item_answers_missing_and_refusing_people_alike(api, ann, strangers):
    mine = await api.item(ann)
    answers = {name: answer(await api.post(ann, f"/schedule-items/{mine['id']}/subscriptions",
                                           {"subject_type": "user", "subject_id": str(user_id)}))
               for name, user_id in strangers.items() if name != "private"}  # privacy is about requests only
    assert set(answers.values()) == {(403, "RECIPIENT_UNAVAILABLE")}, answers


async def test_a_group_invitation_answers_the_group_first_then_alike_for_non_friends(api, ann, bob, strangers):
    theirs = await api.group(bob, "Bob's")
    outside = {name: answer(await api.post(ann, f"/groups/{theirs}/invitations", {"user_id": str(user_id)}))
               for name, user_id in strangers.items()}
    assert set(outside.values()) == {(404, "GROUP_NOT_FOUND")}, outside
    mine = await api.group(ann, "Ann's")
    inside = {name: answer(await api.post(ann, f"/groups/{mine}/invitations", {"user_id": str(user_id)}))
              for name, user_id in {**strangers, "bob": bob.id}.items()}
    assert set(inside.values()) == {(403, "INVITEE_NOT_FRIEND")}, inside


async def test_sharing_with_a_private_group_one_is_not_in_answers_as_a_missing_one(api, ann, bob: TestUser):
    mine = await api.item(ann)
    private = await api.group(bob, "Private", visibility="private")
    answers = {name: answer(await api.post(ann, f"/schedule-items/{mine['id']}/subscriptions",
                                           {"subject_type": "group", "subject_id": group_id}))
               for name, group_id in {"missing": str(uuid.uuid4()), "private": private}.items()}
    assert set(answers.values()) == {(404, "SUBSCRIPTION_SUBJECT_NOT_FOUND")}, answers
