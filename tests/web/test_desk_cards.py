"""The desk's task card over plain HTTP (issue 19): the form generated from the card's contract (each type its input,
required marks, read-only fields, the AI's prefill and its issues, the contract version); drafts saved as one types
(htmx: the new version and the field errors swapped in) and found again on reload; the card's 422 on its fields;
decimals kept exact; rooming-list rows added and removed; confirm; the 412 of a stale version shown as "changed by
someone else" with both values side by side (two agents on one task: nothing overwritten); move, convert, abandon;
execute with the simulator's failure switch, the FAILED attempt, the retry, the next task unblocked."""

from __future__ import annotations

import re

import pytest

from tenet.iam.permissions import Role
from tests.reservations.conftest import assign, make_world
from tests.web.desk_support import ReservationApi, agent_browser, body, csrf, form_of, item, signed_in

DESK = "/console/desk"
BAD_DATE = {"guest_name": "Ada Guest", "arrival_date": "2026-02-30", "departure_date": "2026-03-03",
            "room_type": "KING", "adults": 2}


@pytest.fixture
async def world(db, users, clock):
    return await make_world(db, users, clock)


@pytest.fixture
def rsv(client, app, clock) -> ReservationApi:
    return ReservationApi(client, app, clock)


async def _tasks(rsv, world, *items: str) -> list[str]:
    answer = await rsv.ingest_ok(world.ingest1, body("H1", list(items)))
    return [i["task_id"] for i in answer["items"]]


def _card_form(html: str) -> dict[str, str]:
    found = form_of(html, "card-form")
    for match in re.finditer(r'<select[^>]*name="([^"]+)"[^>]*>(.*?)</select>', html, re.S):
        chosen = re.search(r'<option value="([^"]*)" selected', match.group(2))
        found[match.group(1)] = chosen.group(1) if chosen else ""
    for match in re.finditer(r'<textarea[^>]*name="([^"]+)"[^>]*>(.*?)</textarea>', html, re.S):
        found[match.group(1)] = match.group(2)
    return found


async def test_the_card_is_generated_from_its_contract_with_the_prefill_and_its_issues(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-1", fields=BAD_DATE))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    assert page.status_code == 200, page.text
    html = page.text
    assert 'id="contract-version">20260711-p0' in html
    assert 'type="date" id="field-departure_date" name="f:departure_date"' in html and 'value="2026-03-03"' in html
    assert '<label for="field-guest_name">Guest name <span class="required"' in html  # required mark, labelled
    assert 'id="field-arrival_date" name="f:arrival_date" aria-describedby="field-arrival_date-error" ' \
           'aria-invalid="true"' in html  # the AI's invalid date is shown in red, at its field
    assert 'data-issue="BAD_FORMAT"' in html and 'inputmode="numeric" id="field-adults"' in html
    assert '<select id="field-opera_simulation_outcome"' in html and 'value="SUCCEED" selected' in html
    assert '<textarea id="field-special_requests"' in html
    assert "Ada Guest" in html


async def test_a_draft_is_saved_as_one_types_and_found_after_a_reload(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-2", fields=BAD_DATE))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    form = {**_card_form(page.text), "f:arrival_date": "2026-03-01", "f:special_requests": "Late arrival"}
    saved = await client.post(f"{DESK}/tasks/{task}/draft", data=form, headers={"HX-Request": "true"})
    assert saved.status_code == 200, saved.text
    assert saved.text.startswith('<p id="draft-status"') and "Draft saved at" in saved.text
    assert 'id="card-version" name="version" value="2" hx-swap-oob="true"' in saved.text
    reloaded = await client.get(f"{DESK}/tasks/{task}")
    assert 'value="2026-03-01"' in reloaded.text and "Late arrival</textarea>" in reloaded.text
    assert (await rsv.task(world.agent, task))["card"]["draft_payload"]["arrival_date"] == "2026-03-01"


async def test_a_drafts_422_lands_on_its_fields_and_nothing_is_written(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-3", fields=BAD_DATE))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    form = {**_card_form(page.text), "f:adults": "two", "f:number_of_rooms": "0"}
    refused = await client.post(f"{DESK}/tasks/{task}/draft", data=form, headers={"HX-Request": "true"})
    assert refused.status_code == 200  # htmx swaps 2xx only: the refusal is in the fragment
    assert 'id="field-adults-error" class="field-error error" role="alert" data-code="WRONG_TYPE"' in refused.text
    assert 'id="field-number_of_rooms-error" class="field-error error" role="alert" data-code="OUT_OF_RANGE"' \
        in refused.text
    assert 'data-code="TASK_CARD_PAYLOAD_INVALID"' in refused.text and "hx-swap-oob" in refused.text
    assert (await rsv.task(world.agent, task))["version"] == 1
    plain = await client.post(f"{DESK}/tasks/{task}/draft", data=form)
    assert plain.status_code == 422 and 'value="two"' in plain.text  # what was typed stays in the form


async def test_decimals_are_kept_exact_as_typed(client, rsv, world):
    [task] = await _tasks(rsv, world, item("VOUCHER_RECEIVED", cn="CNF-4", fields={"voucher_number": "V-9"}))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    assert 'inputmode="decimal" id="field-voucher_amount"' in page.text
    form = {**_card_form(page.text), "f:voucher_amount": "1234567.1250", "f:currency": "EUR"}
    saved = await client.post(f"{DESK}/tasks/{task}/draft", data=form)
    assert saved.status_code == 303, saved.text
    assert (await rsv.task(world.agent, task))["card"]["draft_payload"]["voucher_amount"] == "1234567.1250"


async def test_rooming_list_rows_are_added_and_removed(client, rsv, world):
    rooming = {"rooming_list": [{"guest_name": "Ada"}, {"guest_name": "Bea"}]}
    [task] = await _tasks(rsv, world, item("ROOMING_LIST", gc="GRP-R", fields=rooming))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    assert 'name="f:rooming_list:1:guest_name"' in page.text and 'value="Bea"' in page.text
    added = await client.post(f"{DESK}/tasks/{task}/draft", data={**_card_form(page.text), "rows": "add:rooming_list"})
    assert added.status_code == 200 and 'name="f:rooming_list:2:guest_name"' in added.text
    form = {**_card_form(added.text), "f:rooming_list:2:guest_name": "Cleo", "rows": "remove:rooming_list:0"}
    removed = await client.post(f"{DESK}/tasks/{task}/draft", data=form)
    assert removed.status_code == 200
    rows = (await rsv.task(world.agent, task))["card"]["draft_payload"]["rooming_list"]
    assert [r["guest_name"] for r in rows] == ["Bea", "Cleo"]


async def test_confirm_refuses_on_the_fields_then_confirms(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-5", fields=BAD_DATE))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    refused = await client.post(f"{DESK}/tasks/{task}/confirm", data=_card_form(page.text))
    assert refused.status_code == 422
    assert 'id="field-arrival_date-error" class="field-error error" role="alert" data-code="REQUIRED"' in refused.text
    confirmed = await client.post(f"{DESK}/tasks/{task}/confirm",
                                  data={**_card_form(page.text), "f:arrival_date": "2026-03-01"})
    assert confirmed.status_code == 303
    shown = await client.get(f"{DESK}/tasks/{task}")
    assert 'data-state="READY"' in shown.text and 'id="execute-task"' in shown.text and 'id="confirm"' not in shown.text


@pytest.mark.invariant("RSV-INV-17")
async def test_two_agents_on_one_task_the_second_sees_the_412_and_nothing_is_overwritten(app, client, rsv, world,
                                                                                         users):
    colleague = await users.make(roles=[Role.RESERVATION_AGENT], display_name="Cora Colleague")
    await assign(app.state.db, colleague, "H1", rsv.clock)
    [task] = await _tasks(rsv, world, item("new", cn="CNF-6", fields={**BAD_DATE, "arrival_date": "2026-03-01"}))
    await signed_in(client, world.agent.email)
    async with agent_browser(app) as second:
        await signed_in(second, colleague.email)
        mine = await client.get(f"{DESK}/tasks/{task}")
        theirs = await second.get(f"{DESK}/tasks/{task}")
        first = await client.post(f"{DESK}/tasks/{task}/draft",
                                  data={**_card_form(mine.text), "f:guest_name": "Ada Changed"})
        assert first.status_code == 303
        stale = await second.post(f"{DESK}/tasks/{task}/confirm",
                                  data={**_card_form(theirs.text), "f:guest_name": "Cora's Guest"})
        assert stale.status_code == 412, stale.text
        assert 'data-code="PRECONDITION_FAILED"' in stale.text and "Changed by someone else" in stale.text
        row = stale.text[stale.text.index('data-field="guest_name" class="differs"'):]
        assert '<td class="mine">Cora&#39;s Guest</td><td class="theirs">Ada Changed</td>' in row[:300]
        assert 'value="Cora&#39;s Guest"' in stale.text  # theirs beside, mine kept in the form
        after = await rsv.task(world.agent, task)
        assert after["task_status"] == "PENDING_CONFIRM" and after["card"]["draft_payload"]["guest_name"] == \
            "Ada Changed"
        confirmed = await client.post(f"{DESK}/tasks/{task}/confirm",
                                      data={**_card_form((await client.get(f"{DESK}/tasks/{task}")).text)})
        assert confirmed.status_code == 303
        late = await second.post(f"{DESK}/tasks/{task}/confirm", data=_card_form(theirs.text))
        assert late.status_code == 409 and "Changed by someone else" in late.text
        assert (await rsv.task(world.agent, task))["card"]["confirmed_payload"]["guest_name"] == "Ada Changed"


async def test_a_stale_autosave_shows_the_conflict_and_keeps_mine_on_request(app, client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-7", fields=BAD_DATE))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    current = await rsv.task(world.agent, task)
    await rsv.put(world.agent, f"/tasks/{task}/card/draft", {"payload": {"guest_name": "Other"}},
                  version=current["version"])
    stale = await client.post(f"{DESK}/tasks/{task}/draft", data={**_card_form(page.text), "f:guest_name": "Mine"},
                              headers={"HX-Request": "true"})
    assert stale.status_code == 200 and '<div id="conflict" hx-swap-oob="true">' in stale.text
    assert 'id="keep-mine"' in stale.text and 'name="override_version" value="2"' in stale.text
    kept = await client.post(f"{DESK}/tasks/{task}/draft",
                             data={**_card_form(page.text), "f:guest_name": "Mine", "override_version": "2"})
    assert kept.status_code == 303
    assert (await rsv.task(world.agent, task))["card"]["draft_payload"]["guest_name"] == "Mine"


async def test_a_manual_review_is_moved_to_an_active_order_converted_and_abandoned(client, rsv, world):
    [active_task] = await _tasks(rsv, world, item(cn="CNF-TARGET"))
    [review] = await _tasks(rsv, world, item("review"))
    target_order = (await rsv.task(world.agent, active_task))["order_id"]
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{review}", params={"target": "cnf-target"})
    assert 'id="move-form"' in page.text and 'id="convert-task"' in page.text
    moved = await client.post(f"{DESK}/tasks/{review}/move",
                              data={**form_of(page.text, "move-form"), "order_id": target_order})
    assert moved.status_code == 303, moved.text
    assert (await rsv.task(world.agent, review))["order_id"] == target_order
    [other] = await _tasks(rsv, world, item("review"))
    page = await client.get(f"{DESK}/tasks/{other}")
    token, version = csrf(page.text), (await rsv.task(world.agent, other))["version"]
    converted = await client.post(f"{DESK}/tasks/{other}/convert", data={
        "csrf_token": token, "version": str(version), "task_card_type": "CANCEL_BOOKING"})
    assert converted.status_code == 303
    assert (await rsv.task(world.agent, other))["task_card_type"] == "CANCEL_BOOKING"
    unknown = await client.post(f"{DESK}/tasks/{other}/convert", data={
        "csrf_token": token, "version": str(version + 1), "task_card_type": "NOPE"})
    assert unknown.status_code == 422
    no_reason = await client.post(f"{DESK}/tasks/{other}/abandon", data={
        "csrf_token": token, "version": str(version + 1), "reason": " "})
    assert no_reason.status_code == 422
    abandoned = await client.post(f"{DESK}/tasks/{other}/abandon", data={
        "csrf_token": token, "version": str(version + 1), "reason": "Handled by phone"})
    assert abandoned.status_code == 303
    assert (await rsv.task(world.agent, other))["task_status"] == "FAILED"


async def test_execute_fails_is_retried_completes_and_unblocks_the_next_task(client, rsv, world):
    first, second = await _tasks(rsv, world, item(cn="CNF-X"), item(cn="CNF-X"))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{first}")
    form = {**_card_form(page.text), "f:opera_simulation_outcome": "FAIL_WRITE_ONCE"}
    assert (await client.post(f"{DESK}/tasks/{first}/confirm", data=form)).status_code == 303
    ready = await client.get(f"{DESK}/tasks/{first}")
    executed = await client.post(f"{DESK}/tasks/{first}/execute", data=form_of(ready.text, "execute"))
    assert executed.status_code == 303
    failed = await client.get(f"{DESK}/tasks/{first}")
    assert 'data-state="EXECUTING"' in failed.text and 'data-attempt="1" data-status="FAILED"' in failed.text
    retry = re.search(r'action="(/console/desk/operations/\d+/retry)"', failed.text)
    assert retry
    start = failed.text.index(retry.group(1))
    retry_form = dict(re.findall(r'name="([^"]+)" value="([^"]*)"', failed.text[start:start + 600]))
    retried = await client.post(retry.group(1), data=retry_form)
    assert retried.status_code == 303
    done = await client.get(f"{DESK}/tasks/{first}")
    assert 'data-state="COMPLETED"' in done.text and 'data-attempt="2" data-status="SUCCEEDED"' in done.text
    assert 'class="retry"' not in done.text
    nxt = await client.get(f"{DESK}/tasks/{second}")
    assert 'id="task-blocked" data-blocked="false"' in nxt.text and 'id="confirm"' in nxt.text
    again = await client.post(retry.group(1), data=retry_form)  # the same attempt count again: refused, in words
    assert again.status_code in (409, 412) and "data-code=" in again.text


async def test_the_ais_view_shows_the_batch_and_the_exact_item(client, rsv, world):
    raw = item("new", cn="CNF-AI", fields={"guest_name": "Zoë", "rate": 120.50}, extra=',"unknown_member":[1,2]')
    answer = await rsv.ingest_ok(world.ingest1, body("H1", [raw], request_id="req-ai",
                                                     extra=',"extraction_warnings":["low confidence"]'))
    task = answer["items"][0]["task_id"]
    await signed_in(client, world.agent.email)
    card = await client.get(f"{DESK}/tasks/{task}")
    assert f'href="/console/desk/tasks/{task}/ai"' in card.text and 'id="audit-view"' in card.text
    page = await client.get(f"{DESK}/tasks/{task}/ai")
    assert page.status_code == 200, page.text
    assert f'id="batch-id">{answer["batch_id"]} (req-ai)' in page.text
    assert "&#34;unknown_member&#34;: [" in page.text and "low confidence" in page.text
    download = await client.get(f"{DESK}/tasks/{task}/ai/raw")
    assert download.content == raw.encode() and "attachment" in download.headers["content-disposition"]


async def test_the_audit_timeline_shows_actor_action_and_changes(client, rsv, world):
    [task] = await _tasks(rsv, world, item(cn="CNF-AU"))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    assert (await client.post(f"{DESK}/tasks/{task}/draft", data=_card_form(page.text))).status_code == 303
    timeline = await client.get(f"{DESK}/tasks/{task}/audit")
    assert timeline.status_code == 200, timeline.text
    assert 'data-action="reservation.task.draft_saved" class="this-task"' in timeline.text
    assert f"USER <code>{world.agent.id}</code>" in timeline.text


async def test_the_audit_timeline_filters_to_one_task_of_the_order(client, rsv, world):
    first, second = await _tasks(rsv, world, item(cn="CNF-AF", event=1), item(cn="CNF-AF", event=2))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{first}")  # the second waits behind the first: only its creation
    assert (await client.post(f"{DESK}/tasks/{first}/draft", data=_card_form(page.text))).status_code == 303
    whole = await client.get(f"{DESK}/tasks/{first}/audit")
    assert whole.status_code == 200, whole.text
    shown = set(re.findall(r'class="only-task"[^>]*>#(\d+)<', whole.text))
    assert shown == {str(first), str(second)}  # the order's timeline holds both tasks' events
    assert f'id="filter-order" href="/console/desk/tasks/{first}/audit" aria-current="page"' in whole.text
    assert 'data-action="reservation.order.created"' in whole.text
    for task, other, action in ((first, second, "draft_saved"), (second, first, "created")):
        only = await client.get(f"{DESK}/tasks/{first}/audit", params={"only": task})
        assert only.status_code == 200, only.text
        rows = re.findall(r'<tr data-action="([^"]+)"', only.text)
        assert f"reservation.task.{action}" in rows and "reservation.order.created" not in rows
        assert set(re.findall(r'class="only-task"[^>]*>#(\d+)<', only.text)) == {str(task)}
        assert f">#{other}<" not in only.text and f'data-only="{task}"' in only.text
        assert len(rows) < len(re.findall(r'<tr data-action="', whole.text))  # the order's own events are left out
    other_order = await rsv.ingest_ok(world.ingest1, body("H1", [item(cn="CNF-ELSE")]))
    stranger = other_order["items"][0]["task_id"]  # a task of another order shows nothing under this one
    elsewhere = await client.get(f"{DESK}/tasks/{first}/audit", params={"only": stranger})
    assert elsewhere.status_code == 200 and "Nothing recorded yet." in elsewhere.text
    assert (await client.get(f"{DESK}/tasks/{first}/audit", params={"only": "x"})).status_code in (404, 422)


async def test_another_hotels_ai_item_and_audit_are_404(client, rsv, world):
    answer = await rsv.ingest_ok(world.ingest2, body("H2", [item(cn="CNF-OTHER")]))
    task = answer["items"][0]["task_id"]
    await signed_in(client, world.agent.email)
    for path in ("/ai", "/ai/raw", "/audit"):
        assert (await client.get(f"{DESK}/tasks/{task}{path}")).status_code == 404, path


_CONTROL = re.compile(r'<(input|select|textarea)\b([^>]*)>')


def _unlabelled(html: str) -> list[str]:
    labelled = set(re.findall(r'<label[^>]*\bfor="([^"]+)"', html))
    missing = []
    for _, attrs in _CONTROL.findall(html):
        if 'type="hidden"' in attrs or 'type="radio"' in attrs:
            continue  # radios sit inside their label
        found = re.search(r'\bid="([^"]+)"', attrs)
        if not found or found.group(1) not in labelled:
            missing.append(attrs[:80])
    return missing


async def test_every_field_of_every_desk_page_has_a_label(client, rsv, world):
    rooming = {"rooming_list": [{"guest_name": "Ada"}]}
    tasks = await _tasks(rsv, world, item("new", cn="CNF-L", fields=BAD_DATE), item("review"),
                         item("ROOMING_LIST", gc="GRP-L", fields=rooming), item("VOUCHER_RECEIVED", cn="CNF-V"),
                         item("TRACE_RESERVATION_NOTES", cn="CNF-T"))
    await signed_in(client, world.admin.email)
    order = (await rsv.task(world.agent, tasks[0]))["order_id"]
    paths = [f"/tasks/{t}" for t in tasks] + ["", "?staff=H1", "/hotels/H1/orders", f"/orders/{order}",
                                              f"/tasks/{tasks[0]}/ai", f"/tasks/{tasks[0]}/audit"]
    for path in paths:
        page = await client.get(DESK + path)
        assert page.status_code == 200, path
        assert _unlabelled(page.text) == [], path


def test_every_label_of_every_card_contract_is_a_msgid():
    from tenet.reservations.cards.provider import PROVIDER
    from tenet.reservations.pages.labels import LABELS
    from tenet.web import i18n

    def named(fields):
        for f in fields:
            yield f.label
            if f.description:
                yield f.description
            yield from named(f.item_fields)

    shown = {text for card in PROVIDER.card_types() for version in PROVIDER.versions(card)
             for text in named(PROVIDER.definition(card, version).fields)}
    assert shown - LABELS == set()
    chinese = i18n.translations("zh-CN")
    assert all(chinese.gettext(label) != label for label in shown)


async def test_the_card_speaks_chinese(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-ZH", fields=BAD_DATE))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}", headers={"Accept-Language": "zh-CN"})
    assert '<html lang="zh-CN">' in page.text
    assert '<label for="field-guest_name">客人姓名 <span class="required"' in page.text and "任务卡" in page.text


async def test_a_new_booking_shows_the_business_key_opera_gave_back(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", fields={**BAD_DATE, "arrival_date": "2026-03-01"}))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    assert 'id="business-key"' not in page.text  # a temporary order: no key yet
    assert (await client.post(f"{DESK}/tasks/{task}/confirm", data=_card_form(page.text))).status_code == 303
    ready = await client.get(f"{DESK}/tasks/{task}")
    assert (await client.post(f"{DESK}/tasks/{task}/execute", data=form_of(ready.text, "execute"))).status_code == 303
    done = await client.get(f"{DESK}/tasks/{task}")
    key = (await rsv.task(world.agent, task))["order"]["order_business_key"]
    assert key and key.startswith("SIM") and f"<strong>{key}</strong>" in done.text


async def test_confirm_mine_over_theirs_confirms_at_their_version(client, rsv, world):
    [task] = await _tasks(rsv, world, item("new", cn="CNF-OV", fields={**BAD_DATE, "arrival_date": "2026-03-01"}))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    await rsv.put(world.agent, f"/tasks/{task}/card/draft", {"payload": {"guest_name": "Other"}}, version=1)
    stale = await client.post(f"{DESK}/tasks/{task}/confirm", data=_card_form(page.text))
    assert stale.status_code == 412 and 'id="confirm-mine"' in stale.text
    mine = await client.post(f"{DESK}/tasks/{task}/confirm", data={**_card_form(page.text), "override_version": "2"})
    assert mine.status_code == 303
    assert (await rsv.task(world.agent, task))["card"]["confirmed_payload"]["guest_name"] == "Ada Guest"


async def test_a_rows_error_lands_on_the_row_shown_when_an_empty_row_is_before_it(client, rsv, world):
    rooming = {"rooming_list": [{"guest_name": "Ada"}, {"guest_name": "Bea"}]}
    [task] = await _tasks(rsv, world, item("ROOMING_LIST", gc="GRP-E", fields=rooming))
    await signed_in(client, world.agent.email)
    page = await client.get(f"{DESK}/tasks/{task}")
    form = {**_card_form(page.text), "f:rooming_list:0:guest_name": "", "f:rooming_list:1:arrival_date": "2026-13-40"}
    refused = await client.post(f"{DESK}/tasks/{task}/draft", data=form)
    assert refused.status_code == 422
    assert 'id="field-rooming_list-1-arrival_date-error" class="field-error error" role="alert" ' \
           'data-code="BAD_FORMAT"' in refused.text  # the card said rooming_list[0]: the first row sent
