"""The audit log (spec §10, RSV-INV-20): every change has its row with actor type and id; no secret, token,
message body, attachment URL or personal datum ever reaches it, whatever the AI sent or the agent typed."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import text

from tests.reservations.conftest import body, confirmable, item
from tests.support.invariants import rules_hold

EMAIL = "ada.lovelace@example.com"
PHONE = "+44 20 7946 0958"
URL = "https://files.example.com/att/voucher.pdf?sig=s3cr3tSIGNATURE"
TOKEN = "tok_live_0123456789abcdef"
BODY_TEXT = "Dear hotel, I would like to change my booking. " * 100  # 4.8 KB of mail text
NAME = "Ada Lovelace-Byron"
SECRETS = (EMAIL, PHONE, URL, TOKEN, "s3cr3tSIGNATURE", "Dear hotel", NAME)


def _noisy(kind: str, cn: str, **kwargs) -> str:
    fields = {"guest_name": NAME, "guest_email": EMAIL, "guest_phone": PHONE, "room_type": "KING"}
    extra = (f',"attachments":[{{"url":{json.dumps(URL)},"name":"voucher.pdf"}}],"token":{json.dumps(TOKEN)},'
             f'"context_used":{{"mail_body":{json.dumps(BODY_TEXT)}}}')
    return item(kind, cn=cn, fields=fields, extra=extra, **kwargs)


class TestRedaction:
    @pytest.mark.invariant("RSV-INV-20")
    async def test_no_audit_row_carries_what_the_ai_sent_or_the_agent_typed(self, rsv, world, db):
        raw = body("H1", [_noisy("new", None), _noisy("update", "RD1"), _noisy("review", None),
                          _noisy("cancel", "RD2")])
        new, update, review, cancel = (await rsv.ingest_ok(world.ingest1, raw))["items"]
        # Every command, each with personal data in what the agent submits.
        task = await rsv.task(world.agent, new["task_id"])
        await rsv.put(world.agent, f"/tasks/{new['task_id']}/card/draft",
                      {"payload": {"guest_name": NAME, "special_requests": f"call {PHONE} or {EMAIL}"}},
                      version=task["version"])
        task = await rsv.task(world.agent, new["task_id"])
        await rsv.confirm_ok(world.agent, new["task_id"], confirmable(
            task, guest_name=NAME, special_requests=f"call {PHONE}", opera_simulation_outcome="FAIL_WRITE_ONCE"))
        executed = (await rsv.execute(world.agent, new["task_id"])).json()
        await rsv.post(world.agent, f"/operations/{executed['operations'][1]['id']}/retry", version=1)
        task = await rsv.task(world.agent, review["task_id"])
        await rsv.post(world.agent, f"/tasks/{review['task_id']}/move", {"order_id": update["order_id"]},
                       version=task["version"])
        await rsv.confirm_ok(world.agent, update["task_id"], confirmable(
            await rsv.task(world.agent, update["task_id"]), special_requests=f"guest {NAME} at {EMAIL}"))
        await rsv.execute(world.agent, update["task_id"])
        moved = await rsv.task(world.agent, review["task_id"])
        await rsv.post(world.agent, f"/tasks/{review['task_id']}/convert", {"task_card_type": "UPDATE_BOOKING"},
                       version=moved["version"])
        converted = await rsv.task(world.agent, review["task_id"])
        await rsv.post(world.agent, f"/tasks/{review['task_id']}/abandon", {"reason": "duplicate of RD1"},
                       version=converted["version"])
        await rsv.post(world.agent, f"/tasks/{cancel['task_id']}/abandon", {"reason": "guest changed mind"},
                       version=1)
        await rsv.post(world.agent, f"/orders/{cancel['order_id']}/logic-delete", {"reason": "no booking"})
        async with db.read_only() as session:
            rows = (await session.execute(text(
                "SELECT action, actor_type, actor_id, reason, before_snapshot_json::text AS before, "
                "after_snapshot_json::text AS after FROM reservation.workflow_reservation_audit_log"))).mappings().all()
        actions = {row["action"] for row in rows}
        assert actions >= {
            "reservation.batch.ingested", "reservation.order.created", "reservation.task.created",
            "reservation.task.draft_saved", "reservation.task.confirmed", "reservation.task.execution_started",
            "reservation.operation.attempted", "reservation.task.completed", "reservation.order.activated",
            "reservation.task.moved", "reservation.task.converted", "reservation.task.abandoned",
            "reservation.order.logic_deleted"}
        everything = json.dumps([dict(row) for row in rows])
        for secret in SECRETS:
            assert secret not in everything, secret
        assert {row["actor_type"] for row in rows} == {"SUPERAGENT", "USER", "SYSTEM"}
        assert all(row["actor_id"] for row in rows if row["actor_type"] != "SYSTEM")
        # The redaction is structural: the draft row names the fields and hashes the payload.
        (draft,) = [json.loads(row["after"]) for row in rows if row["action"] == "reservation.task.draft_saved"]
        assert draft["changed_fields"] == ["guest_name", "special_requests"] and len(draft["payload_sha256"]) == 64
        await rules_hold(db, "RSV-")

    async def test_the_audit_route_lists_a_tasks_history_newest_first(self, rsv, world):
        (result,) = (await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="AL1")])))["items"]
        await rsv.confirm_ok(world.agent, result["task_id"])
        page = (await rsv.get(world.agent, "/audit-logs", task_id=result["task_id"])).json()
        assert [r["action"] for r in page["items"]] == ["reservation.task.confirmed", "reservation.task.created"]
        assert page["items"][0]["after_snapshot"]["task_status"] == "READY"
        confirmed = (await rsv.get(world.agent, "/audit-logs", hotel_id="H1",
                                   action="reservation.task.confirmed")).json()["items"]
        assert len(confirmed) == 1
        assert (await rsv.get(world.agent, "/audit-logs")).status_code == 422
        assert (await rsv.get(world.agent2, "/audit-logs", task_id=result["task_id"])).status_code == 404
