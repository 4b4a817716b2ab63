# ruff: noqa: S608  (SQL is built from this module's constants; values are always bound parameters)
"""AI batch ingest (spec 003 §5-§8, issue 12): one request becomes a batch, one transition per item, one task
per transition, on the right order.

`prepare` does everything that needs no database (parse, envelope checks, the hotel check, hashes, keys,
the item mapping); `ingest` is the write, one unit of work, in five steps that fill in one `Plan`:

1. `_claim`: the batch row, claimed by its idempotency key (INSERT .. ON CONFLICT DO NOTHING): a racing
   duplicate waits for the first insert, then finds nothing to do and the route replays the first answer
   (RSV-INV-02);
2. `_resolve_parents`: the processing order (parents first) and each child's parent, in this batch or an
   earlier batch of the same message;
3. `_choose_targets`: the ACTIVE orders the items' keys match, the ids of the batch's rows, and where each
   item goes (below);
4. `_create_orders`: new ACTIVE orders for UPDATE / CANCEL items with a key no ACTIVE order has, inserted in
   key order with ON CONFLICT DO NOTHING (a concurrent ingest creating the same key wins, and its order is
   used); then the row locks of every existing order the batch appends to, in ascending id order (an order
   closed meanwhile sends its items to a new temporary order: no ACTIVE order is created once row locks are
   held, so an ingest never waits on a key while holding an order); then the temporary orders;
5. `_write_rows_and_audit`: transitions, tasks, cards and audit rows (one multi-row INSERT each), and the
   stored first answer.

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
from dataclasses import dataclass, field
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


# Where an item's task goes: ("order", id) an existing order, ("new", key) a new ACTIVE order made for the
# key, ("temp", group) a new temporary order shared by the group.
Target = tuple[str, Any]
Key = tuple[str, str]


@dataclass
class Plan:
    """What the ingest's steps decide, handed from one to the next: the batch, where each item's task goes
    (items by their position in the batch, `processing` parents first) and the orders it goes to."""

    prepared: Prepared
    principal: Principal
    now: datetime
    items: list[MappedItem]
    batch_id: int = 0
    processing: list[int] = field(default_factory=list)
    # A child's parent: ("item", position) in this batch, or ("task", id) of an earlier batch of the message.
    parent_task: dict[int, tuple[str, int]] = field(default_factory=dict)
    earlier: dict[int, dict[str, Any]] = field(default_factory=dict)  # by the parent's source event index
    matched: dict[Key, int] = field(default_factory=dict)  # ACTIVE orders of the items' keys
    task_id: dict[int, int] = field(default_factory=dict)
    transition_id: dict[int, int] = field(default_factory=dict)
    card_id: dict[int, int] = field(default_factory=dict)
    target: dict[int, Target] = field(default_factory=dict)
    created: dict[Key, int] = field(default_factory=dict)  # the new ACTIVE orders
    order_ids: dict[Target, int] = field(default_factory=dict)  # the new orders' ids, by their target
    status_of: dict[int, str] = field(default_factory=dict)
    start_at: dict[int, int] = field(default_factory=dict)  # each order's last queue position before the batch
    position_in_order: dict[int, int] = field(default_factory=dict)

    @property
    def hotel_id(self) -> str:
        return self.prepared.hotel_id

    def tally(self) -> tuple[dict[Target, int], dict[Target, int]]:
        """Tasks per target, and the first task (in processing order) of each."""
        count: dict[Target, int] = defaultdict(int)
        first: dict[Target, int] = {}
        for position in self.processing:
            count[self.target[position]] += 1
            first.setdefault(self.target[position], self.task_id[position])
        return count, first

    def order_id_of(self, chosen: Target) -> int:
        return cast(int, chosen[1]) if chosen[0] == "order" else self.order_ids[chosen]


async def ingest(db: AsyncSession | Writer, prepared: Prepared, *, principal: Principal,
                 now: datetime) -> dict[str, Any]:
    """Write the batch; answer its stored first answer (`items` and the batch facts). Raises BatchExists when
    the key is already taken (the caller answers from the stored batch). The steps of the module's doc, in
    order, each deciding a part of one plan."""
    run: Writer = await statements(db) if isinstance(db, AsyncSession) else db
    plan = Plan(prepared=prepared, principal=principal, now=now, items=list(prepared.items))
    await _claim(run, plan)
    await _resolve_parents(run, plan)
    await _choose_targets(run, plan)
    await _create_orders(run, plan)
    return await _write_rows_and_audit(run, plan)


# --- 1. the claim --------------------------------------------------------------------------------------------

_CLAIM_SQL = f"""
    WITH hotel AS (INSERT INTO reservation.hotel (hotel_id, created_at, updated_at) VALUES (%(h)s, %(now)s, %(now)s)
                   ON CONFLICT (hotel_id) DO NOTHING)
    INSERT INTO reservation.workflow_reservation_ai_batch (hotel_id, source_message_id, request_payload_sha256,
           batch_idempotency_key, idempotency_basis, client_id, request_id, received_at, item_count, request_body,
           extraction_warnings_json, ai_contract_version, created_at, updated_at)
    VALUES (%(h)s, %(m)s, %(sha)s, %(key)s, %(basis)s, %(client)s, %(request_id)s, %(now)s, %(count)s, %(body)s,
            %(warnings)s, '{AI_CONTRACT_VERSION}', %(now)s, %(now)s)
    ON CONFLICT (hotel_id, batch_idempotency_key) DO NOTHING RETURNING id"""


async def _claim(run: Writer, plan: Plan) -> None:
    """The batch row, claimed by its idempotency key (with the hotel row, when it is the first batch)."""
    prepared = plan.prepared
    # Custom plans for this transaction's statements. Their lookups take arrays whose sizes vary with the batch
    # (`= ANY(%(ids)s)`, `unnest(...)`, `json_populate_recordset(...)`); once psycopg prepares them (on a
    # connection's 5th use), PostgreSQL may settle on a generic plan that is far worse for them. Measured with
    # `python -m bench ai_ingest`: about 3x the PostgreSQL CPU per batch and half the batches per second.
    await run.execute("SET LOCAL plan_cache_mode = force_custom_plan")
    claimed = await run.all(_CLAIM_SQL, {
        "h": prepared.hotel_id, "m": prepared.source_message_id, "sha": prepared.body_sha, "key": prepared.key,
        "basis": "REQUEST_ID" if prepared.request_id is not None else "BODY", "client": plan.principal.id,
        "request_id": prepared.request_id, "now": plan.now, "count": len(prepared.items), "body": prepared.body,
        "warnings": prepared.extraction_warnings_json})
    if not claimed:
        raise BatchExists()
    plan.batch_id = claimed[0]["id"]


# --- 2. parents ----------------------------------------------------------------------------------------------


async def _resolve_parents(run: Writer, plan: Plan) -> None:
    """The processing order (parents first), each child's parent (this batch first, then the earlier batches of
    the message), and the items that fail for want of one (PARENT_CYCLE, PARENT_NOT_FOUND)."""
    items = plan.items
    processing, parent_of, cyclic = _processing_order(items)
    # Failing the items of a cycle can make another item the first of its event index, and so the parent of a
    # cycle of its own (two items of one event index naming it as their parent): repeat until none is left.
    # Each round fails at least one item, so this ends.
    while cyclic:
        for position in cyclic:
            items[position] = items[position].failed(ContractError("PARENT_CYCLE"))
        processing, parent_of, cyclic = _processing_order(items)
    plan.processing = processing
    plan.earlier = await _earlier_parents(run, plan.prepared, plan.batch_id, (
        item.parent_source_event_index for position, item in enumerate(items)
        if item.parent_source_event_index is not None and not item.is_error and position not in parent_of))
    for position, item in enumerate(items):
        if item.is_error or item.parent_source_event_index is None:
            continue
        if position in parent_of and not items[parent_of[position]].is_error:
            plan.parent_task[position] = ("item", parent_of[position])
        elif item.parent_source_event_index in plan.earlier:
            plan.parent_task[position] = ("task", plan.earlier[item.parent_source_event_index]["task_id"])
        elif item.blocked_until_parent_completed:
            items[position] = item.failed(ContractError("PARENT_NOT_FOUND"))
    _orphan_children_of_failed_items(plan)


def _orphan_children_of_failed_items(plan: Plan) -> None:
    """A child of an item that failed becomes an orphan (or an error itself when it must wait, which may orphan
    its own children: repeat until nothing changes)."""
    items, parent_task = plan.items, plan.parent_task
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


# --- 3. targets ----------------------------------------------------------------------------------------------


async def _choose_targets(run: Writer, plan: Plan) -> None:
    """The ACTIVE orders the items' keys match, the ids of the batch's rows, and each item's target."""
    items = plan.items
    plan.matched = await _active_orders(run, plan.hotel_id, {key for item in items for key in _match_keys(item)})
    ids = await _allocate_ids(run, len(items))
    plan.task_id = dict(zip(plan.processing, ids["task"], strict=True))
    plan.transition_id = dict(zip(plan.processing, ids["transition"], strict=True))
    plan.card_id = dict(zip(plan.processing, ids["card"], strict=True))
    groups: dict[str, Target] = {}
    creating: set[Key] = set()  # keys a new ACTIVE order is made for in this batch
    for position in plan.processing:
        item = items[position]
        chosen = _target(plan, position, groups, creating)
        plan.target[position] = chosen
        if item.linked_task_group_id is not None and not item.is_error:
            groups.setdefault(item.linked_task_group_id, chosen)


def _target(plan: Plan, position: int, groups: dict[str, Target], creating: set[Key]) -> Target:
    """Where one item goes (the module's doc, "Where an item goes")."""
    item = plan.items[position]
    chosen: Target | None = None
    parent = plan.parent_task.get(position)
    if parent is not None:
        kind, ref = parent
        if kind == "item":
            chosen = plan.target[ref]
        elif item.parent_source_event_index is not None and \
                plan.earlier[item.parent_source_event_index]["order_status"] in ("TEMPORARY", "ACTIVE"):
            chosen = ("order", plan.earlier[item.parent_source_event_index]["order_id"])
    if chosen is None and item.linked_task_group_id is not None and not item.is_error:
        chosen = groups.get(item.linked_task_group_id)
    if chosen is None:
        chosen = next((("order", plan.matched[key]) if key in plan.matched else ("new", key)
                       for key in _match_keys(item) if key in plan.matched or key in creating), None)
    if chosen is None and (key := _new_key(item)) is not None:
        chosen = ("new", key)
        creating.add(key)
    if chosen is None:
        chosen = ("temp", ("event", item.source_event_index) if item.source_event_index is not None
                  and not item.is_error else ("item", position))
    return chosen


# --- 4. orders -----------------------------------------------------------------------------------------------

_NEW_ORDERS_SQL = f"""
    INSERT INTO {_O} (hotel_id, order_key_type, order_business_key, order_status, business_key_source,
                      display_name, source_message_id, created_from_task_id, last_execution_order,
                      created_at, updated_at)
    SELECT %(h)s, k.key_type, k.business_key, 'ACTIVE', 'AI_CANDIDATE', k.key_type || ' ' || k.business_key,
           %(m)s, k.task, k.n, %(now)s, %(now)s
      FROM unnest(CAST(%(types)s AS text[]), CAST(%(keys)s AS text[]), CAST(%(tasks)s AS bigint[]),
                  CAST(%(counts)s AS integer[])) WITH ORDINALITY AS k(key_type, business_key, task, n, i)
     ORDER BY k.i
    ON CONFLICT (hotel_id, order_key_type, order_business_key) WHERE order_status = 'ACTIVE' DO NOTHING
    RETURNING id, order_key_type, order_business_key"""
_LOCK_ORDERS_SQL = f"""
    SELECT id, order_status FROM {_O} WHERE hotel_id = %(h)s AND id = ANY(%(ids)s) ORDER BY id FOR UPDATE"""
_APPEND_SQL = f"""
    UPDATE {_O} o SET last_execution_order = o.last_execution_order + c.n, updated_at = %(now)s
      FROM unnest(CAST(%(ids)s AS bigint[]), CAST(%(counts)s AS integer[])) AS c(id, n)
     WHERE o.hotel_id = %(h)s AND o.id = c.id
    RETURNING o.id, o.last_execution_order - c.n AS before"""
_TEMPORARY_ORDERS_SQL = f"""
    WITH fresh AS (
        SELECT nextval(pg_get_serial_sequence('{_O}', 'id')) AS id, t.i, t.card, t.task, t.n
          FROM unnest(CAST(%(cards)s AS text[]), CAST(%(tasks)s AS bigint[]), CAST(%(counts)s AS integer[]))
               WITH ORDINALITY AS t(card, task, n, i))
    INSERT INTO {_O} (id, hotel_id, order_key_type, temporary_order_code, order_status, display_name,
                      source_message_id, created_from_task_id, last_execution_order, created_at, updated_at)
    SELECT f.id, %(h)s, 'TEMPORARY', 'TMP-' || f.id, 'TEMPORARY', 'TMP-' || f.id || ' · ' || f.card, %(m)s,
           f.task, f.n, %(now)s, %(now)s
      FROM fresh f ORDER BY f.i
    RETURNING id, created_from_task_id"""


async def _create_orders(run: Writer, plan: Plan) -> None:
    """New ACTIVE orders, the row locks and queue positions of the existing ones, the temporary orders; then
    each task's position in its order's queue."""
    await _create_active_orders(run, plan)
    await _append_to_existing_orders(run, plan)
    await _create_temporary_orders(run, plan)
    for position in plan.processing:
        order_id = plan.order_id_of(plan.target[position])
        plan.start_at[order_id] += 1
        plan.position_in_order[position] = plan.start_at[order_id]


async def _create_active_orders(run: Writer, plan: Plan) -> None:
    """New ACTIVE orders, in key order: two ingests creating the same keys take them in the same order, so one
    waits for the other instead of each holding a key the other needs."""
    counts, first_task = plan.tally()
    new_keys = sorted({t[1] for t in plan.target.values() if t[0] == "new"})
    if new_keys:
        rows = await run.all(_NEW_ORDERS_SQL, {
            "h": plan.hotel_id, "m": plan.prepared.source_message_id, "now": plan.now,
            "types": [k[0] for k in new_keys], "keys": [k[1] for k in new_keys],
            "tasks": [first_task[("new", k)] for k in new_keys], "counts": [counts[("new", k)] for k in new_keys]})
        plan.created = {(row["order_key_type"], row["order_business_key"]): row["id"] for row in rows}
        winners = await _active_orders(run, plan.hotel_id, set(new_keys) - set(plan.created))
        for position, chosen in list(plan.target.items()):
            if chosen[0] == "new" and chosen[1] not in plan.created:
                won = winners.get(chosen[1])
                # A concurrent ingest made the order first: use it (or, if it was ended already, wait on a
                # temporary order).
                plan.target[position] = ("order", won) if won is not None else ("temp", ("lost", chosen[1]))
    plan.order_ids = {("new", key): order_id for key, order_id in plan.created.items()}
    plan.status_of = {order_id: "ACTIVE" for order_id in plan.created.values()}
    plan.start_at = {order_id: 0 for order_id in plan.created.values()}


async def _append_to_existing_orders(run: Writer, plan: Plan) -> None:
    """Existing orders: lock in id order, then take their queue positions; an order closed meanwhile sends its
    items to a temporary order."""
    existing = sorted({chosen[1] for chosen in plan.target.values() if chosen[0] == "order"})
    if not existing:
        return
    locked = await run.all(_LOCK_ORDERS_SQL, {"h": plan.hotel_id, "ids": existing})
    plan.status_of.update({row["id"]: row["order_status"] for row in locked})
    for position, chosen in list(plan.target.items()):
        if chosen[0] == "order" and plan.status_of.get(chosen[1]) not in ("TEMPORARY", "ACTIVE"):
            plan.target[position] = ("temp", ("closed", chosen[1]))
    existing = [order_id for order_id in existing if plan.status_of.get(order_id) in ("TEMPORARY", "ACTIVE")]
    if existing:
        counts, _ = plan.tally()
        rows = await run.all(_APPEND_SQL, {"h": plan.hotel_id, "now": plan.now, "ids": existing,
                                           "counts": [counts[("order", order_id)] for order_id in existing]})
        plan.start_at.update({row["id"]: row["before"] for row in rows})


async def _create_temporary_orders(run: Writer, plan: Plan) -> None:
    temp_groups = sorted({chosen[1] for chosen in plan.target.values() if chosen[0] == "temp"}, key=repr)
    if not temp_groups:
        return
    counts, first_task = plan.tally()
    first_position = {task_id: position for position, task_id in plan.task_id.items()}
    rows = await run.all(_TEMPORARY_ORDERS_SQL, {
        "h": plan.hotel_id, "m": plan.prepared.source_message_id, "now": plan.now,
        "cards": [plan.items[first_position[first_task[("temp", g)]]].task_card_type for g in temp_groups],
        "tasks": [first_task[("temp", g)] for g in temp_groups],
        "counts": [counts[("temp", g)] for g in temp_groups]})
    by_first_task = {row["created_from_task_id"]: row["id"] for row in rows}
    for group in temp_groups:
        order_id = by_first_task[first_task[("temp", group)]]
        plan.order_ids[("temp", group)] = order_id
        plan.status_of[order_id] = "TEMPORARY"
        plan.start_at[order_id] = 0


# --- 5. rows and audit ---------------------------------------------------------------------------------------

_ANSWER_SQL = """
    UPDATE reservation.workflow_reservation_ai_batch SET response_items_json = CAST(%(items)s AS jsonb),
           updated_at = %(now)s
     WHERE hotel_id = %(h)s AND id = %(b)s"""
_SLICES = ("case_keys_json", "extracted_fields_json", "manual_review_json", "informational_message_json",
           "attachments_json", "context_used_json")


async def _write_rows_and_audit(run: Writer, plan: Plan) -> dict[str, Any]:
    """The transitions, tasks, cards and audit rows (one statement each), and the stored first answer."""
    transitions, tasks, cards, answers = [], [], [], {}
    for position in plan.processing:
        transitions.append(_transition_row(plan, position))
        tasks.append(_task_row(plan, position))
        cards.append(_card_row(plan, position))
        answers[position] = _answer_item(plan, position, transitions[-1], tasks[-1])
    await _insert(run, "workflow_reservation_ai_transition", transitions)
    await _insert(run, "workflow_reservation_task", tasks)
    await _insert(run, "workflow_reservation_task_card", cards)
    await _insert(run, "workflow_reservation_audit_log",
                  audit.rows(_audit_entries(plan, tasks), actor=AuditActor.of(plan.principal), now=plan.now))
    prepared = plan.prepared
    ordered = [answers[position] for position in range(len(plan.items))]
    await run.execute(_ANSWER_SQL, {"items": _json(ordered), "now": plan.now, "h": prepared.hotel_id,
                                    "b": plan.batch_id})
    return {"batch_id": plan.batch_id, "hotel_id": prepared.hotel_id, "source_message_id": prepared.source_message_id,
            "request_id": prepared.request_id, "request_payload_sha256": prepared.body_sha,
            "batch_idempotency_key": prepared.key, "item_count": len(plan.items), "items": ordered}


def _parent_id(plan: Plan, position: int) -> int | None:
    parent = plan.parent_task.get(position)
    return None if parent is None else (plan.task_id[parent[1]] if parent[0] == "item" else parent[1])


def _transition_row(plan: Plan, position: int) -> dict[str, Any]:
    item, prepared, now = plan.items[position], plan.prepared, plan.now
    slices = dict(item.slices)
    has_parent = _parent_id(plan, position) is not None
    return {
        "id": plan.transition_id[position], "hotel_id": prepared.hotel_id, "batch_id": plan.batch_id,
        "source_message_id": prepared.source_message_id, "source_list": item.source_list,
        "array_index": item.array_index, "source_event_index": item.source_event_index,
        "execution_order": plan.position_in_order[position], "catalog_code": item.catalog_code,
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
        "blocked_until_parent_completed": item.blocked_until_parent_completed and has_parent,
        "ai_payload_json": item.text, "raw_byte_offset": prepared.byte_offsets[position],
        "raw_byte_length": len(item.text.encode("utf-8")),
        **{column: slices.get(column) for column in _SLICES},
        "adapter_error_code": item.adapter_error_code, "adapter_error_message": item.adapter_error_message,
        "created_at": now, "updated_at": now,
    }


def _task_row(plan: Plan, position: int) -> dict[str, Any]:
    item, now = plan.items[position], plan.now
    parent_id = _parent_id(plan, position)
    return {
        "id": plan.task_id[position], "hotel_id": plan.hotel_id, "order_id": plan.order_id_of(plan.target[position]),
        "source_message_id": plan.prepared.source_message_id, "ai_transition_id": plan.transition_id[position],
        "result_type": item.result_type, "ai_task_type": item.ai_task_type,
        "system_task_type": item.system_task_type, "task_card_type": item.task_card_type,
        "task_subtype": item.task_subtype, "task_status": "PENDING_CONFIRM" if item.queue else "COMPLETED",
        "queue_participation": item.queue,
        "execution_order": plan.position_in_order[position], "parent_task_id": parent_id,
        "parent_source_event_index": item.parent_source_event_index,
        "linked_task_group_id": item.linked_task_group_id,
        "blocked_until_parent_completed": item.blocked_until_parent_completed and parent_id is not None,
        "manual_review": item.manual_review, "manual_reason_code": item.manual_reason_code,
        "completed_at": None if item.queue else now, "version": 1, "created_at": now, "updated_at": now,
    }


def _card_row(plan: Plan, position: int) -> dict[str, Any]:
    item = plan.items[position]
    return {
        "id": plan.card_id[position], "hotel_id": plan.hotel_id, "task_id": plan.task_id[position],
        "task_card_type": item.task_card_type,
        "field_contract_version": PROVIDER.current_version(item.task_card_type), "ai_payload_json": item.text,
        "created_at": plan.now, "updated_at": plan.now,
    }


def _answer_item(plan: Plan, position: int, transition: dict[str, Any], task: dict[str, Any]) -> dict[str, Any]:
    item = plan.items[position]
    return {
        "source_list": item.source_list, "array_index": item.array_index, "transition_id": transition["id"],
        "item_idempotency_key": transition["item_idempotency_key"],
        "item_payload_sha256": transition["item_payload_sha256"], "result_type": item.result_type,
        "ai_task_type": item.ai_task_type, "task_subtype": item.task_subtype,
        "system_process_category": item.category, "system_task_type": item.system_task_type,
        "task_card_type": item.task_card_type, "route_code": item.route_code, "task_id": task["id"],
        "order_id": task["order_id"], "order_status": plan.status_of[task["order_id"]],
        "task_status": task["task_status"], "execution_order": task["execution_order"],
        "adapter_error_code": item.adapter_error_code, "adapter_error_message": item.adapter_error_message,
    }


def _audit_entries(plan: Plan, tasks: list[dict[str, Any]]) -> list[Entry]:
    """The batch, each new order and each new task (ids, states and counts only)."""
    categories: dict[str, int] = defaultdict(int)
    for item in plan.items:
        categories[item.category] += 1
    hotel_id, batch_id = plan.hotel_id, plan.batch_id
    entries = [Entry(hotel_id, "reservation.batch.ingested", batch_id=batch_id,
                     after={"item_count": len(plan.items), "counts": dict(categories),
                            "request_payload_sha256": plan.prepared.body_sha})]
    for key, order_id in sorted(plan.order_ids.items(), key=lambda kv: kv[1]):
        entries.append(Entry(hotel_id, "reservation.order.created", order_id=order_id, batch_id=batch_id,
                             after={"order_status": plan.status_of[order_id],
                                    "order_key_type": key[1][0] if key[0] == "new" else "TEMPORARY",
                                    "order_business_key": key[1][1] if key[0] == "new" else None,
                                    "business_key_source": "AI_CANDIDATE" if key[0] == "new" else None}))
    for row in tasks:
        entries.append(Entry(hotel_id, "reservation.task.created", order_id=cast(int, row["order_id"]),
                             task_id=cast(int, row["id"]), batch_id=batch_id,
                             after={"task_status": row["task_status"], "system_task_type": row["system_task_type"],
                                    "task_card_type": row["task_card_type"],
                                    "queue_participation": row["queue_participation"],
                                    "execution_order": row["execution_order"],
                                    "transition_id": row["ai_transition_id"]}))
    return entries
