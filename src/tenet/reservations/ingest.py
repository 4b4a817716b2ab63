# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""AI batch ingest (spec 003 §5-§8, issue 12): one request becomes a batch, one transition per item, one task
per transition, on the right order.

`prepare` does everything that needs no database (parse, envelope checks, the hotel check, hashes, keys,
the item mapping); `ingest` is the write, one unit of work:

1. the batch row, claimed by its idempotency key (INSERT .. ON CONFLICT DO NOTHING): a racing duplicate
   waits for the first insert, then finds nothing to do and the route replays the first answer (RSV-INV-02);
2. parents from earlier batches of the same message, and the ACTIVE orders the items' keys match;
3. new ACTIVE orders for UPDATE / CANCEL items with a key no ACTIVE order has, inserted in key order with
   ON CONFLICT DO NOTHING (a concurrent ingest creating the same key wins, and its order is used);
4. the row locks of every existing order the batch appends to, in ascending id order; an order closed
   meanwhile sends its items to a new temporary order (no ACTIVE order is created once row locks are held,
   so an ingest never waits on a key while holding an order);
5. temporary orders, transitions, tasks, cards and audit rows (one multi-row INSERT each), and the stored
   first answer.

Where an item goes: to its parent's order (this batch first, then earlier batches of the message), else to
the order of an earlier item of its linked group, else to the ACTIVE order of its confirmation number
(then group code), else to a new ACTIVE order (UPDATE / CANCEL with a key), else to a temporary order
shared by the unkeyed items of the same business event (`source_event_index`) of this batch.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

from sqlalchemy.ext.asyncio import AsyncSession

from tenet.iam.principal import Principal
from tenet.kernel.errors import MalformedRequestBody
from tenet.kernel.reads import Params, Runner
from tenet.kernel.statements import statements
from tenet.reservations import audit, errors
from tenet.reservations.ai_contract import AI_CONTRACT_VERSION, LISTS, ContractError, MappedItem, map_item
from tenet.reservations.audit import AuditActor, Entry
from tenet.reservations.cards.provider import PROVIDER
from tenet.reservations.rawjson import ByteOffsets, MalformedJson, parse

US = "\x1f"
MAX_SOURCE_MESSAGE_ID = 2**63 - 1
# Known envelope members; a duplicate of one is ambiguous (which hotel?) and refused, never "last one wins".
ENVELOPE_MEMBERS = ("hotel_id", "source_message_id", "request_id", *LISTS, "extraction_warnings")
_O = "reservation.workflow_reservation_order"


def sha256_hex(data: bytes | str) -> str:
    return hashlib.sha256(data.encode("utf-8") if isinstance(data, str) else data).hexdigest()


def batch_key(hotel_id: str, client_id: uuid.UUID, request_id: str | None, body_sha: str) -> str:
    """RSV-INV-02: (hotel, client, request id) when the body names one, else (hotel, body hash)."""
    if request_id is not None:
        return sha256_hex(US.join(("rsv-batch-v1", "request", hotel_id, str(client_id), request_id)))
    return sha256_hex(US.join(("rsv-batch-v1", "body", hotel_id, body_sha)))


def item_key(batch_idempotency_key: str, source_list: str, array_index: int) -> str:
    return sha256_hex(US.join(("rsv-item-v1", batch_idempotency_key, source_list, str(array_index))))


@dataclass(frozen=True)
class Prepared:
    hotel_id: str
    source_message_id: int
    request_id: str | None
    body: bytes
    body_sha: str
    key: str
    items: tuple[MappedItem, ...]
    byte_offsets: tuple[int, ...]
    extraction_warnings_json: str | None


def _issue(name: str, message: str, kind: str) -> dict[str, object]:
    return {"loc": ["body", name], "msg": message, "type": kind}


def _safe_text(value: object, limit: int) -> bool:
    return (isinstance(value, str) and 0 < len(value) <= limit and value == value.strip()
            and value.isprintable() and "\x1f" not in value)


def prepare(body: bytes, *, principal: Principal, max_items: int) -> Prepared:
    """Everything about an ingest that needs no database. 400 for a body that is not one JSON object, 422
    `AI_BATCH_INVALID` naming each bad envelope member (never its value), 403 for another hotel."""
    try:
        envelope = parse(body, LISTS)
    except MalformedJson as exc:
        raise MalformedRequestBody(str(exc)) from None
    members = envelope.envelope.members
    issues = [_issue(name, "appears more than once", "duplicate_member")
              for name in sorted(envelope.envelope.duplicates) if name in ENVELOPE_MEMBERS]
    hotel_id = members["hotel_id"].value if "hotel_id" in members else None
    if not _safe_text(hotel_id, 64):
        issues.append(_issue("hotel_id", "required: 1 to 64 printable characters", "hotel_id"))
    raw_message = members["source_message_id"].value if "source_message_id" in members else None
    source_message_id = None
    if isinstance(raw_message, int) and not isinstance(raw_message, bool):
        source_message_id = raw_message
    elif isinstance(raw_message, str) and raw_message.isascii() and raw_message.isdigit() and len(raw_message) < 20:
        source_message_id = int(raw_message)
    if source_message_id is None or not 1 <= source_message_id <= MAX_SOURCE_MESSAGE_ID:
        issues.append(_issue("source_message_id", "required: an integer from 1 to 2^63-1", "source_message_id"))
    request_id = members["request_id"].value if "request_id" in members else None
    if request_id is not None and not _safe_text(request_id, 128):
        issues.append(_issue("request_id", "1 to 128 printable characters", "request_id"))
    total = 0
    for name in LISTS:
        value = members[name].value if name in members else None
        if value is None:
            if name == "ai_task_results":
                issues.append(_issue(name, "required: an array of items", "missing"))
        elif not isinstance(value, list):
            issues.append(_issue(name, "must be an array", "array"))
        else:
            total += len(value)
    if total > max_items:
        issues.append(_issue("ai_task_results", f"at most {max_items} items in all lists", "too_many_items"))
    if issues:
        raise errors.AiBatchInvalid(errors=issues)
    assert isinstance(hotel_id, str) and source_message_id is not None
    if hotel_id not in principal.hotel_ids:
        raise errors.HotelForbidden(hotel_id=hotel_id)
    body_sha = sha256_hex(body)
    items = [map_item(name, index, element, envelope.text)
             for name in LISTS for index, element in enumerate(envelope.lists.get(name, ()), start=1)]
    offsets = ByteOffsets(envelope.text)
    spans = sorted((item.start, position) for position, item in enumerate(items))
    byte_offsets = [0] * len(items)
    for start, position in spans:
        byte_offsets[position] = offsets(start)
    warnings = members.get("extraction_warnings")
    return Prepared(
        hotel_id=hotel_id, source_message_id=source_message_id, request_id=request_id, body=body,
        body_sha=body_sha, key=batch_key(hotel_id, principal.id, request_id, body_sha), items=tuple(items),
        byte_offsets=tuple(byte_offsets),
        extraction_warnings_json=None if warnings is None else envelope.text[warnings.start:warnings.end],
    )


# --- the write -------------------------------------------------------------------------------------------


class Writer(Runner, Protocol):
    """What the ingest runs its statements on (psycopg `%(name)s` placeholders, rows as dicts): Tenet's unit of
    work (`kernel.statements`); the bench's baseline runs the very same statements on a bare psycopg cursor."""

    async def execute(self, sql: str, params: Params = None) -> int: ...


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=str)


async def _insert(run: Writer, table: str, rows: list[dict[str, Any]]) -> None:
    """Many rows in one statement with one parameter (the rows as JSON, decoded by PostgreSQL into the
    table's own row type): the same statement whatever the batch size."""
    if not rows:
        return
    columns = ", ".join(rows[0])
    await run.execute(f"INSERT INTO reservation.{table} ({columns}) SELECT {columns} FROM "
                      f"json_populate_recordset(NULL::reservation.{table}, CAST(%(rows)s AS json))",
                      {"rows": _json(rows)})


class BatchExists(Exception):
    """The batch key is taken (a replay, or a request id reused): the route answers from the stored batch."""


def _processing_order(items: list[MappedItem]) -> tuple[list[int], dict[int, int], set[int]]:
    """Items in an order where a parent in this batch comes before its children (else array order), the
    parent position of each child, and the positions caught in a parent cycle."""
    first_queue_item: dict[int, int] = {}
    for position, item in enumerate(items):
        if item.queue and not item.is_error and item.source_event_index is not None:
            first_queue_item.setdefault(item.source_event_index, position)
    parent_of: dict[int, int] = {}
    for position, item in enumerate(items):
        if item.parent_source_event_index is not None and not item.is_error:
            parent = first_queue_item.get(item.parent_source_event_index)
            if parent is not None:
                parent_of[position] = parent
    order: list[int] = []
    state: dict[int, str] = {}
    cyclic: set[int] = set()

    def visit(position: int, path: list[int]) -> None:
        if state.get(position) == "done":
            return
        if state.get(position) == "active":
            cyclic.update(path[path.index(position):])
            return
        state[position] = "active"
        parent = parent_of.get(position)
        if parent is not None:
            visit(parent, [*path, position])
        state[position] = "done"
        order.append(position)

    for position in range(len(items)):
        visit(position, [position])
    return order, parent_of, cyclic


async def _earlier_parents(run: Writer, prepared: Prepared, batch_id: int,
                           indexes: Iterable[int]) -> dict[int, dict[str, Any]]:
    """The newest queue task of an earlier batch of this message for each source event index."""
    wanted = sorted(set(indexes))
    if not wanted:
        return {}
    rows = await run.all(f"""
        SELECT DISTINCT ON (t.source_event_index) t.source_event_index, k.id AS task_id, k.order_id,
               o.order_status
          FROM reservation.workflow_reservation_ai_transition t
          JOIN reservation.workflow_reservation_task k ON k.hotel_id = t.hotel_id AND k.ai_transition_id = t.id
          JOIN {_O} o ON o.hotel_id = k.hotel_id AND o.id = k.order_id
         WHERE t.hotel_id = %(h)s AND t.source_message_id = %(m)s AND t.batch_id <> %(b)s
           AND t.source_event_index = ANY(%(idx)s) AND k.queue_participation
         ORDER BY t.source_event_index, t.id DESC""",
        {"h": prepared.hotel_id, "m": prepared.source_message_id, "b": batch_id, "idx": wanted})
    return {row["source_event_index"]: row for row in rows}


async def _active_orders(run: Writer, hotel_id: str, keys: set[tuple[str, str]]) -> dict[tuple[str, str], int]:
    if not keys:
        return {}
    types, values = zip(*sorted(keys), strict=True)
    rows = await run.all(f"""
        SELECT id, order_key_type, order_business_key FROM {_O}
         WHERE hotel_id = %(h)s AND order_status = 'ACTIVE'
           AND (order_key_type, order_business_key) IN (SELECT * FROM unnest(CAST(%(types)s AS text[]),
                                                                             CAST(%(keys)s AS text[])))""",
        {"h": hotel_id, "types": list(types), "keys": list(values)})
    return {(row["order_key_type"], row["order_business_key"]): row["id"] for row in rows}


def _new_key(item: MappedItem) -> tuple[str, str] | None:
    """The key an UPDATE / CANCEL item creates its ACTIVE order with: such a booking exists in OPERA."""
    if item.is_error or item.system_task_type not in ("UPDATE_BOOKING", "CANCEL_BOOKING"):
        return None
    group_card = item.task_card_type in ("ROOMING_LIST", "AMEND_GROUP_CODE")
    if item.group_code and (group_card or not item.confirmation_number):
        return ("GROUP_CODE", item.group_code)
    if item.confirmation_number:
        return ("CONFIRMATION_NUMBER", item.confirmation_number)
    return None


def _match_keys(item: MappedItem) -> list[tuple[str, str]]:
    if item.is_error:
        return []
    found = []
    if item.confirmation_number:
        found.append(("CONFIRMATION_NUMBER", item.confirmation_number))
    if item.group_code:
        found.append(("GROUP_CODE", item.group_code))
    return found


async def _allocate_ids(run: Writer, count: int) -> dict[str, list[int]]:
    """Ids for the batch's transitions, tasks and cards in one round trip, ascending: tasks are inserted
    parents first, so a parent's id is always smaller than its child's (ck_rsv_task_parent_before_child)."""
    tables = {"transition": "workflow_reservation_ai_transition", "task": "workflow_reservation_task",
              "card": "workflow_reservation_task_card"}
    columns = ", ".join(
        f"ARRAY(SELECT nextval(pg_get_serial_sequence('reservation.{table}', 'id')) "
        f"FROM generate_series(1, %(n)s)) AS {name}" for name, table in tables.items())
    (row,) = await run.all(f"SELECT {columns}", {"n": count})
    return {name: sorted(row[name]) for name in tables}


async def ingest(db: AsyncSession | Writer, prepared: Prepared, *, principal: Principal,
                 now: datetime) -> dict[str, Any]:
    """Write the batch; answer its stored first answer (`items` and the batch facts). Raises BatchExists when
    the key is already taken (the caller answers from the stored batch)."""
    run: Writer = await statements(db) if isinstance(db, AsyncSession) else db
    # Custom plans for this transaction's statements. Their lookups take arrays whose sizes vary with the batch
    # (`= ANY(%(ids)s)`, `unnest(...)`, `json_populate_recordset(...)`); once psycopg prepares them (on a
    # connection's 5th use), PostgreSQL may settle on a generic plan that is far worse for them. Measured with
    # `python -m bench ai_ingest`: about 3x the PostgreSQL CPU per batch and half the batches per second.
    await run.execute("SET LOCAL plan_cache_mode = force_custom_plan")
    claimed = await run.all(f"""
        WITH hotel AS (INSERT INTO reservation.hotel (hotel_id, created_at, updated_at) VALUES (%(h)s, %(now)s, %(now)s)
                       ON CONFLICT (hotel_id) DO NOTHING)
        INSERT INTO reservation.workflow_reservation_ai_batch (hotel_id, source_message_id, request_payload_sha256,
               batch_idempotency_key, idempotency_basis, client_id, request_id, received_at, item_count, request_body,
               extraction_warnings_json, ai_contract_version, created_at, updated_at)
        VALUES (%(h)s, %(m)s, %(sha)s, %(key)s, %(basis)s, %(client)s, %(request_id)s, %(now)s, %(count)s, %(body)s,
                %(warnings)s, '{AI_CONTRACT_VERSION}', %(now)s, %(now)s)
        ON CONFLICT (hotel_id, batch_idempotency_key) DO NOTHING RETURNING id""",
        {"h": prepared.hotel_id, "m": prepared.source_message_id, "sha": prepared.body_sha, "key": prepared.key,
         "basis": "REQUEST_ID" if prepared.request_id is not None else "BODY", "client": principal.id,
         "request_id": prepared.request_id, "now": now, "count": len(prepared.items), "body": prepared.body,
         "warnings": prepared.extraction_warnings_json})
    if not claimed:
        raise BatchExists()
    batch_id = claimed[0]["id"]

    items = list(prepared.items)
    processing, parent_of, cyclic = _processing_order(items)
    # Failing the items of a cycle can make another item the first of its event index, and so the parent of a
    # cycle of its own (two items of one event index naming it as their parent): repeat until none is left.
    # Each round fails at least one item, so this ends.
    while cyclic:
        for position in cyclic:
            items[position] = items[position].failed(ContractError("PARENT_CYCLE"))
        processing, parent_of, cyclic = _processing_order(items)
    earlier = await _earlier_parents(run, prepared, batch_id, (
        item.parent_source_event_index for position, item in enumerate(items)
        if item.parent_source_event_index is not None and not item.is_error and position not in parent_of))
    parent_task: dict[int, tuple[str, int]] = {}
    for position, item in enumerate(items):
        if item.is_error or item.parent_source_event_index is None:
            continue
        if position in parent_of and not items[parent_of[position]].is_error:
            parent_task[position] = ("item", parent_of[position])
        elif item.parent_source_event_index in earlier:
            parent_task[position] = ("task", earlier[item.parent_source_event_index]["task_id"])
        elif item.blocked_until_parent_completed:
            items[position] = item.failed(ContractError("PARENT_NOT_FOUND"))
    # A child of an item that failed above becomes an orphan (or an error itself when it must wait, which
    # may orphan its own children: repeat until nothing changes).
    changed = True
    while changed:
        changed = False
        for position in list(parent_task):
            kind, ref = parent_task[position]
            if kind == "item" and items[ref].is_error:
                del parent_task[position]
                changed = True
                if items[position].blocked_until_parent_completed:
                    items[position] = items[position].failed(ContractError("PARENT_NOT_FOUND"))

    matched = await _active_orders(run, prepared.hotel_id,
                                   {key for item in items for key in _match_keys(item)})
    ids = await _allocate_ids(run, len(items))
    task_id = dict(zip(processing, ids["task"], strict=True))
    transition_id = dict(zip(processing, ids["transition"], strict=True))
    card_id = dict(zip(processing, ids["card"], strict=True))

    # Targets: ("order", id) an existing order, ("new", key) a new ACTIVE order, ("temp", group) a new
    # temporary order.
    target: dict[int, tuple[str, Any]] = {}
    groups: dict[str, tuple[str, Any]] = {}
    creating: set[tuple[str, str]] = set()  # keys a new ACTIVE order is made for in this batch
    for position in processing:
        item = items[position]
        chosen: tuple[str, Any] | None = None
        parent = parent_task.get(position)
        if parent is not None:
            kind, ref = parent
            if kind == "item":
                chosen = target[ref]
            elif item.parent_source_event_index is not None and \
                    earlier[item.parent_source_event_index]["order_status"] in ("TEMPORARY", "ACTIVE"):
                chosen = ("order", earlier[item.parent_source_event_index]["order_id"])
        if chosen is None and item.linked_task_group_id is not None and not item.is_error:
            chosen = groups.get(item.linked_task_group_id)
        if chosen is None:
            chosen = next((("order", matched[key]) if key in matched else ("new", key)
                           for key in _match_keys(item) if key in matched or key in creating), None)
        if chosen is None and (key := _new_key(item)) is not None:
            chosen = ("new", key)
            creating.add(key)
        if chosen is None:
            chosen = ("temp", ("event", item.source_event_index) if item.source_event_index is not None
                      and not item.is_error else ("item", position))
        target[position] = chosen
        if item.linked_task_group_id is not None and not item.is_error:
            groups.setdefault(item.linked_task_group_id, chosen)

    def tally() -> tuple[dict[tuple[str, Any], int], dict[tuple[str, Any], int]]:
        """Tasks per target, and the first task (in processing order) of each."""
        count: dict[tuple[str, Any], int] = defaultdict(int)
        first: dict[tuple[str, Any], int] = {}
        for position in processing:
            count[target[position]] += 1
            first.setdefault(target[position], task_id[position])
        return count, first

    # New ACTIVE orders, in key order: two ingests creating the same keys take them in the same order, so
    # one waits for the other instead of each holding a key the other needs.
    counts, first_task = tally()
    new_keys = sorted({t[1] for t in target.values() if t[0] == "new"})
    created: dict[tuple[str, str], int] = {}
    if new_keys:
        rows = await run.all(f"""
            INSERT INTO {_O} (hotel_id, order_key_type, order_business_key, order_status, business_key_source,
                              display_name, source_message_id, created_from_task_id, last_execution_order,
                              created_at, updated_at)
            SELECT %(h)s, k.key_type, k.business_key, 'ACTIVE', 'AI_CANDIDATE', k.key_type || ' ' || k.business_key,
                   %(m)s, k.task, k.n, %(now)s, %(now)s
              FROM unnest(CAST(%(types)s AS text[]), CAST(%(keys)s AS text[]), CAST(%(tasks)s AS bigint[]),
                          CAST(%(counts)s AS integer[])) WITH ORDINALITY AS k(key_type, business_key, task, n, i)
             ORDER BY k.i
            ON CONFLICT (hotel_id, order_key_type, order_business_key) WHERE order_status = 'ACTIVE' DO NOTHING
            RETURNING id, order_key_type, order_business_key""",
            {"h": prepared.hotel_id, "m": prepared.source_message_id, "now": now,
             "types": [k[0] for k in new_keys], "keys": [k[1] for k in new_keys],
             "tasks": [first_task[("new", k)] for k in new_keys], "counts": [counts[("new", k)] for k in new_keys]})
        created = {(row["order_key_type"], row["order_business_key"]): row["id"] for row in rows}
        lost = set(new_keys) - set(created)
        winners = await _active_orders(run, prepared.hotel_id, lost)
        for position, chosen in list(target.items()):
            if chosen[0] == "new" and chosen[1] not in created:
                won = winners.get(chosen[1])
                # A concurrent ingest made the order first: use it (or, if it was ended already, wait on a
                # temporary order).
                target[position] = ("order", won) if won is not None else ("temp", ("lost", chosen[1]))

    # Existing orders: lock in id order; an order closed meanwhile sends its items to a temporary order.
    status_of: dict[int, str] = {order_id: "ACTIVE" for order_id in created.values()}
    existing = sorted({chosen[1] for chosen in target.values() if chosen[0] == "order"})
    if existing:
        locked = await run.all(f"SELECT id, order_status FROM {_O} WHERE hotel_id = %(h)s AND id = ANY(%(ids)s) "
                           "ORDER BY id FOR UPDATE", {"h": prepared.hotel_id, "ids": existing})
        status_of.update({row["id"]: row["order_status"] for row in locked})
        for position, chosen in list(target.items()):
            if chosen[0] == "order" and status_of.get(chosen[1]) not in ("TEMPORARY", "ACTIVE"):
                target[position] = ("temp", ("closed", chosen[1]))
        existing = [order_id for order_id in existing if status_of.get(order_id) in ("TEMPORARY", "ACTIVE")]
    counts, first_task = tally()
    start_at: dict[int, int] = {order_id: 0 for order_id in created.values()}
    if existing:
        rows = await run.all(f"""
            UPDATE {_O} o SET last_execution_order = o.last_execution_order + c.n, updated_at = %(now)s
              FROM unnest(CAST(%(ids)s AS bigint[]), CAST(%(counts)s AS integer[])) AS c(id, n)
             WHERE o.hotel_id = %(h)s AND o.id = c.id
            RETURNING o.id, o.last_execution_order - c.n AS before""",
            {"h": prepared.hotel_id, "now": now, "ids": existing,
             "counts": [counts[("order", order_id)] for order_id in existing]})
        start_at.update({row["id"]: row["before"] for row in rows})

    order_ids: dict[tuple[str, Any], int] = {("new", key): order_id for key, order_id in created.items()}
    temp_groups = sorted({chosen[1] for chosen in target.values() if chosen[0] == "temp"}, key=repr)
    if temp_groups:
        rows = await run.all(f"""
            WITH fresh AS (
                SELECT nextval(pg_get_serial_sequence('{_O}', 'id')) AS id, t.i, t.card, t.task, t.n
                  FROM unnest(CAST(%(cards)s AS text[]), CAST(%(tasks)s AS bigint[]), CAST(%(counts)s AS integer[]))
                       WITH ORDINALITY AS t(card, task, n, i))
            INSERT INTO {_O} (id, hotel_id, order_key_type, temporary_order_code, order_status, display_name,
                              source_message_id, created_from_task_id, last_execution_order, created_at, updated_at)
            SELECT f.id, %(h)s, 'TEMPORARY', 'TMP-' || f.id, 'TEMPORARY', 'TMP-' || f.id || ' · ' || f.card, %(m)s,
                   f.task, f.n, %(now)s, %(now)s
              FROM fresh f ORDER BY f.i
            RETURNING id, created_from_task_id""",
            {"h": prepared.hotel_id, "m": prepared.source_message_id, "now": now,
             "cards": [items[processing[ids["task"].index(first_task[("temp", g)])]].task_card_type
                       for g in temp_groups],
             "tasks": [first_task[("temp", g)] for g in temp_groups],
             "counts": [counts[("temp", g)] for g in temp_groups]})
        by_first_task = {row["created_from_task_id"]: row["id"] for row in rows}
        for group in temp_groups:
            order_ids[("temp", group)] = by_first_task[first_task[("temp", group)]]
            status_of[order_ids[("temp", group)]] = "TEMPORARY"
            start_at[order_ids[("temp", group)]] = 0

    def order_id_of(chosen: tuple[str, Any]) -> int:
        return chosen[1] if chosen[0] == "order" else order_ids[chosen]

    position_in_order: dict[int, int] = {}
    for position in processing:
        order_id = order_id_of(target[position])
        start_at[order_id] += 1
        position_in_order[position] = start_at[order_id]

    transitions, tasks, cards, answers = [], [], [], {}
    for position in processing:
        item = items[position]
        order_id = order_id_of(target[position])
        parent = parent_task.get(position)
        parent_id = None if parent is None else (task_id[parent[1]] if parent[0] == "item" else parent[1])
        slices = dict(item.slices)
        transitions.append({
            "id": transition_id[position], "hotel_id": prepared.hotel_id, "batch_id": batch_id,
            "source_message_id": prepared.source_message_id, "source_list": item.source_list,
            "array_index": item.array_index, "source_event_index": item.source_event_index,
            "execution_order": position_in_order[position], "catalog_code": item.catalog_code,
            "skill_id": item.skill_id, "result_type": item.result_type, "ai_task_type": item.ai_task_type,
            "route_code": item.route_code, "system_process_category": item.category,
            "system_task_type": item.system_task_type, "task_card_type": item.task_card_type,
            "task_subtype": item.task_subtype, "current_or_history": item.current_or_history,
            "group_code": item.group_code, "confirmation_number": item.confirmation_number,
            "item_payload_sha256": sha256_hex(item.text),
            "item_idempotency_key": item_key(prepared.key, item.source_list, item.array_index),
            "manual_reason_code": item.manual_reason_code,
            "parent_source_event_index": item.parent_source_event_index,
            "linked_task_group_id": item.linked_task_group_id,
            "blocked_until_parent_completed": item.blocked_until_parent_completed and parent_id is not None,
            "ai_payload_json": item.text, "raw_byte_offset": prepared.byte_offsets[position],
            "raw_byte_length": len(item.text.encode("utf-8")),
            **{column: slices.get(column) for column in ("case_keys_json", "extracted_fields_json",
                                                         "manual_review_json", "informational_message_json",
                                                         "attachments_json", "context_used_json")},
            "adapter_error_code": item.adapter_error_code, "adapter_error_message": item.adapter_error_message,
            "created_at": now, "updated_at": now,
        })
        status = "PENDING_CONFIRM" if item.queue else "COMPLETED"
        tasks.append({
            "id": task_id[position], "hotel_id": prepared.hotel_id, "order_id": order_id,
            "source_message_id": prepared.source_message_id, "ai_transition_id": transition_id[position],
            "result_type": item.result_type, "ai_task_type": item.ai_task_type,
            "system_task_type": item.system_task_type, "task_card_type": item.task_card_type,
            "task_subtype": item.task_subtype, "task_status": status, "queue_participation": item.queue,
            "execution_order": position_in_order[position], "parent_task_id": parent_id,
            "parent_source_event_index": item.parent_source_event_index,
            "linked_task_group_id": item.linked_task_group_id,
            "blocked_until_parent_completed": item.blocked_until_parent_completed and parent_id is not None,
            "manual_review": item.manual_review, "manual_reason_code": item.manual_reason_code,
            "completed_at": None if item.queue else now, "version": 1, "created_at": now, "updated_at": now,
        })
        cards.append({
            "id": card_id[position], "hotel_id": prepared.hotel_id, "task_id": task_id[position],
            "task_card_type": item.task_card_type,
            "field_contract_version": PROVIDER.current_version(item.task_card_type), "ai_payload_json": item.text,
            "created_at": now, "updated_at": now,
        })
        answers[position] = {
            "source_list": item.source_list, "array_index": item.array_index, "transition_id": transition_id[position],
            "item_idempotency_key": transitions[-1]["item_idempotency_key"],
            "item_payload_sha256": transitions[-1]["item_payload_sha256"], "result_type": item.result_type,
            "ai_task_type": item.ai_task_type, "task_subtype": item.task_subtype,
            "system_process_category": item.category, "system_task_type": item.system_task_type,
            "task_card_type": item.task_card_type, "route_code": item.route_code, "task_id": task_id[position],
            "order_id": order_id, "order_status": status_of[order_id], "task_status": status,
            "execution_order": position_in_order[position], "adapter_error_code": item.adapter_error_code,
            "adapter_error_message": item.adapter_error_message,
        }
    await _insert(run, "workflow_reservation_ai_transition", transitions)
    await _insert(run, "workflow_reservation_task", tasks)
    await _insert(run, "workflow_reservation_task_card", cards)

    categories: dict[str, int] = defaultdict(int)
    for item in items:
        categories[item.category] += 1
    entries = [Entry(prepared.hotel_id, "reservation.batch.ingested", batch_id=batch_id,
                     after={"item_count": len(items), "counts": dict(categories),
                            "request_payload_sha256": prepared.body_sha})]
    for key, order_id in sorted(order_ids.items(), key=lambda kv: kv[1]):
        entries.append(Entry(prepared.hotel_id, "reservation.order.created", order_id=order_id, batch_id=batch_id,
                             after={"order_status": status_of[order_id],
                                    "order_key_type": key[1][0] if key[0] == "new" else "TEMPORARY",
                                    "order_business_key": key[1][1] if key[0] == "new" else None,
                                    "business_key_source": "AI_CANDIDATE" if key[0] == "new" else None}))
    for row in tasks:
        entries.append(Entry(prepared.hotel_id, "reservation.task.created", order_id=cast(int, row["order_id"]),
                             task_id=cast(int, row["id"]), batch_id=batch_id,
                             after={"task_status": row["task_status"], "system_task_type": row["system_task_type"],
                                    "task_card_type": row["task_card_type"],
                                    "queue_participation": row["queue_participation"],
                                    "execution_order": row["execution_order"],
                                    "transition_id": row["ai_transition_id"]}))
    await _insert(run, "workflow_reservation_audit_log", audit.rows(entries, actor=AuditActor.of(principal), now=now))

    ordered = [answers[position] for position in range(len(items))]
    await run.execute("UPDATE reservation.workflow_reservation_ai_batch "
                      "SET response_items_json = CAST(%(items)s AS jsonb), updated_at = %(now)s "
                      "WHERE hotel_id = %(h)s AND id = %(b)s",
                      {"items": _json(ordered), "now": now, "h": prepared.hotel_id, "b": batch_id})
    return {"batch_id": batch_id, "hotel_id": prepared.hotel_id, "source_message_id": prepared.source_message_id,
            "request_id": prepared.request_id, "request_payload_sha256": prepared.body_sha,
            "batch_idempotency_key": prepared.key, "item_count": len(items), "items": ordered}
