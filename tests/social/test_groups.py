"""Groups (SOC-INV-07..09) through the API: invitations, roles, the one creator, hand-over, archive, public
and private groups."""

from __future__ import annotations

import pytest
from tests.support.invariants import rules_hold
from tests.support.outcomes import code
from tests.support.rows import refused_by


class TestGroups:
    @pytest.mark.invariant("SOC-INV-07", "SOC-INV-08", "SOC-INV-09")
    async def test_invite_accept_roles_hand_over_and_the_creator_stays_one(self, api, ann, bob, cid, db):
        gid = await api.group(ann)
        await api.add_to_group(ann, gid, bob)
        members = await api.ok(api.get(ann, f"/groups/{gid}/members"))
        # The frozen clock gives both the same joined_at: the order is then by id.
        assert sorted((m["username"], m["role"]) for m in members["items"]) == [("Ann", "creator"), ("Bob", "member")]
        assert code(await api.delete(ann, f"/groups/{gid}/members/{ann.id}")) == "GROUP_CREATOR_CANNOT_LEAVE"
        assert code(await api.post(bob, f"/groups/{gid}/invitations", {"user_id": str(cid.id)})) == \
            "GROUP_ROLE_FORBIDDEN"
        await api.ok(api.patch(ann, f"/groups/{gid}/members/{bob.id}", {"role": "admin"}))
        # Only friends of the inviter: Bob and Cid are not friends yet.
        assert code(await api.post(bob, f"/groups/{gid}/invitations", {"user_id": str(cid.id)})) == \
            "INVITEE_NOT_FRIEND"
        await api.ok(api.patch(ann, f"/groups/{gid}/members/{bob.id}", {"role": "creator"}))
        group = await api.ok(api.get(ann, f"/groups/{gid}"))
        assert group["owner_id"] == str(bob.id) and group["my_role"] == "admin"
        await api.ok(api.delete(ann, f"/groups/{gid}/members/{ann.id}"), 204)
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-09")
    async def test_second_invitation_and_archive_dismisses_open_ones(self, api, ann, bob, db):
        gid = await api.group(ann)
        await api.befriend(ann, bob)
        await api.ok(api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(bob.id)}), 201)
        again = await api.post(ann, f"/groups/{gid}/invitations", {"user_id": str(bob.id)})
        assert again.status_code == 409 and code(again) == "GROUP_INVITATION_ALREADY_PENDING"
        await api.ok(api.post(ann, f"/groups/{gid}/archive"))
        message = (await api.ok(api.get(bob, "/inbox", message_type="group_invitation")))["items"][0]
        assert message["status"] == "dismissed"
        assert code(await api.post(bob, f"/inbox/{message['id']}/accept")) == "INBOX_MESSAGE_ALREADY_ACTED"
        assert (await api.get(bob, f"/groups/{gid}")).status_code == 404
        await rules_hold(db, "SOC-")

    @pytest.mark.invariant("SOC-INV-07")
    async def test_the_database_refuses_a_second_creator_and_a_group_without_one(self, api, ann, bob, db):
        gid = await api.group(ann)
        await api.add_to_group(ann, gid, bob)
        assert await refused_by(db, "UPDATE social.group_members SET role = 'creator' WHERE group_id = :g AND "
                                  "user_id = :u", {"g": gid, "u": bob.id}) == "uq_group_members_current_creator"
        assert await refused_by(db, "UPDATE social.group_members SET role = 'admin' WHERE group_id = :g AND "
                                  "user_id = :u", {"g": gid, "u": ann.id}) == "group_member_keeps_creator"

    async def test_public_groups_can_be_joined_and_private_ones_are_invisible(self, api, ann, bob):
        public = await api.group(ann, "Open", visibility="public")
        private = await api.group(ann, "Closed")
        assert (await api.get(bob, f"/groups/{private}")).status_code == 404
        assert (await api.post(bob, f"/groups/{private}/join")).status_code == 404
        await api.ok(api.post(bob, f"/groups/{public}/join"))
        assert code(await api.post(bob, f"/groups/{public}/join")) == "ALREADY_GROUP_MEMBER"
        await api.ok(api.delete(ann, f"/groups/{public}/members/{bob.id}"), 204)
        assert code(await api.post(bob, f"/groups/{public}/join")) == "GROUP_REJOIN_NEEDS_INVITATION"
