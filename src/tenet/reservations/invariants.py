# ruff: noqa: S608  (detector SQL is built from this module's own constants)
"""The rules of the reservation workflow (spec 003, issue 12), each with its enforcement and its detector.

Every detector returns the violating rows (empty = holds); `tenet invariants check` runs them on one
snapshot. Detectors that check a trigger's presence catch a disabled guard, which no row would show.
"""

from tenet.kernel.invariants import register
from tenet.reservations.audit import AUDIT_SNAPSHOT_KEYS
from tenet.reservations.cards.provider import PROVIDER
from tenet.reservations.models import (
    BATCH_KEY_INDEX,
    HOTEL_STAFF_PK,
    ORDER_ACTIVE_KEY_INDEX,
    TASK_EXECUTION_ORDER_INDEX,
    TASK_ONE_EXECUTING_INDEX,
    TRIGGERS,
)

D = "reservations"
S = "reservation"
_T, _O = f"{S}.workflow_reservation_task", f"{S}.workflow_reservation_order"
_OP, _A = f"{S}.workflow_reservation_opera_operation", f"{S}.workflow_reservation_opera_operation_attempt"
_B, _TR = f"{S}.workflow_reservation_ai_batch", f"{S}.workflow_reservation_ai_transition"
_C, _AU = f"{S}.workflow_reservation_task_card", f"{S}.workflow_reservation_audit_log"
_OPEN = "('PENDING_CONFIRM', 'READY', 'EXECUTING')"
_ORDER_LOCK = ("Every command that changes a queue task's status or appends to a queue first holds the order's "
               "row lock (FOR UPDATE; several orders in ascending id order), then decides.")


def _trigger_missing(table: str, trigger: str) -> str:
    return f"""
        SELECT NULL::text AS hotel_id, NULL::bigint AS id, 'trigger {trigger} missing or disabled' AS problem
         WHERE NOT EXISTS (SELECT 1 FROM pg_trigger g JOIN pg_class c ON c.oid = g.tgrelid
                             JOIN pg_namespace n ON n.oid = c.relnamespace
                            WHERE n.nspname = '{S}' AND c.relname = '{table}' AND g.tgname = '{trigger}'
                              AND g.tgenabled <> 'D')"""


register(
    id="RSV-INV-01", domain=D,
    statement="Every table of schema reservation has hotel_id; every primary key, unique index and foreign key "
              "between its tables includes it, so a row never references another hotel's row.",
    scope="the catalog of schema reservation",
    counterexample="A task of hotel H1 whose order_id points at an order of H2 after a move; a unique index on "
                   "item_idempotency_key alone, which a per-hotel distribution cannot enforce.",
    db=("pk_workflow_reservation_task", "fk_rsv_task_order", "fk_rsv_card_task", "fk_rsv_op_task"),
    app="Composite keys (id, hotel_id) everywhere; moves check the target's hotel first for TASK_MOVE_CROSS_HOTEL.",
    error_code="TASK_MOVE_CROSS_HOTEL",
    concurrency="Structural: not applicable.",
    detector=f"""
        SELECT c.relname::text AS table_name, NULL::text AS object_name, 'table without hotel_id' AS problem
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{S}' AND c.relkind IN ('r', 'p')
           AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'hotel_id'
                            AND NOT a.attisdropped)
        UNION ALL
        SELECT c.relname::text, i.relname::text, 'unique index without hotel_id'
          FROM pg_index x JOIN pg_class i ON i.oid = x.indexrelid JOIN pg_class c ON c.oid = x.indrelid
          JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{S}' AND x.indisunique
           AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'hotel_id'
                            AND a.attnum = ANY (x.indkey))
        UNION ALL
        SELECT c.relname::text, k.conname::text, 'foreign key without hotel_id'
          FROM pg_constraint k JOIN pg_class c ON c.oid = k.conrelid JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = '{S}' AND k.contype = 'f'
           AND NOT EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'hotel_id'
                            AND a.attnum = ANY (k.conkey))
    """,
)

register(
    id="RSV-INV-02", domain=D,
    statement="At most one batch per (hotel, batch idempotency key). The key is computed by the system: from "
              "(hotel, client, request_id) when the body names a request id, else from (hotel, body SHA-256); so "
              "one request id of one client names one body.",
    scope="workflow_reservation_ai_batch, every row",
    counterexample="Two identical posts racing each create a batch and every task is queued twice; a client "
                   "reuses request id r-17 for another message and silently gets the first answer.",
    db=(BATCH_KEY_INDEX, "ck_rsv_batch_key_hex", "ck_rsv_batch_basis"),
    app="A read-path lookup by key answers replays (200, replayed: true) and reuse (409) without a transaction; "
        "the ingest transaction starts with INSERT .. ON CONFLICT DO NOTHING on the key.",
    error_code="AI_BATCH_REQUEST_ID_REUSED",
    concurrency="The unique index: a racing duplicate waits for the first insert, then finds its row and "
                "replays it (tests/concurrency/test_reservations_races.py).",
    detector=f"""
        SELECT b.hotel_id, b.id AS batch_id, 'key is not the documented function of the request' AS problem
          FROM {_B} b
         WHERE b.batch_idempotency_key <> encode(sha256(convert_to(
                 CASE b.idempotency_basis
                   WHEN 'REQUEST_ID' THEN concat_ws(chr(31), 'rsv-batch-v1', 'request', b.hotel_id, b.client_id::text,
                                                   b.request_id)
                   ELSE concat_ws(chr(31), 'rsv-batch-v1', 'body', b.hotel_id, b.request_payload_sha256) END,
                 'UTF8')), 'hex')
        UNION ALL
        SELECT hotel_id, min(id), 'one request id of one client names several batches' FROM {_B}
         WHERE request_id IS NOT NULL GROUP BY hotel_id, client_id, request_id HAVING count(*) > 1
        UNION ALL
        SELECT hotel_id, id, 'batch committed without its first answer' FROM {_B} WHERE response_items_json IS NULL
    """,
)

register(
    id="RSV-INV-03", domain=D,
    statement="A batch keeps the request body bytes as received with their SHA-256; each transition's "
              "ai_payload_json is the exact text of its item, sliced from those bytes, with its own SHA-256; the "
              "card keeps the same text; none of it ever changes.",
    scope="batches, transitions, cards",
    counterexample='The item {"rate":1.50,"b":1,"a":2} is stored as {"a": 2, "b": 1, "rate": 1.5}: key order and '
                   "number spelling are lost and nobody can prove what the AI said.",
    db=("ck_rsv_batch_body_matches_sha256", "ck_rsv_transition_payload_matches_sha256", "ck_rsv_transition_raw_span",
        TRIGGERS["batch_immutable"], TRIGGERS["transition_immutable"], TRIGGERS["card_guard"]),
    app="The route reads the raw body; rawjson.parse reports the character span of every item and member, and "
        "the service stores slices of the decoded text (never a re-serialisation).",
    error_code=None,
    concurrency="Rows are written once; not applicable.",
    detector=f"""
        SELECT t.hotel_id, t.id, 'item text is not the slice of the request body' AS problem
          FROM {_TR} t JOIN {_B} b ON b.hotel_id = t.hotel_id AND b.id = t.batch_id
         WHERE substring(b.request_body FROM t.raw_byte_offset + 1 FOR t.raw_byte_length)
               <> convert_to(t.ai_payload_json, 'UTF8')
        UNION ALL
        SELECT c.hotel_id, c.id, 'card snapshot differs from its transition'
          FROM {_C} c JOIN {_T} k ON k.hotel_id = c.hotel_id AND k.id = c.task_id
          JOIN {_TR} t ON t.hotel_id = k.hotel_id AND t.id = k.ai_transition_id
         WHERE c.ai_payload_json <> t.ai_payload_json
        UNION ALL {_trigger_missing('workflow_reservation_ai_batch', TRIGGERS['batch_immutable'])}
        UNION ALL {_trigger_missing('workflow_reservation_ai_transition', TRIGGERS['transition_immutable'])}
    """,
)

register(
    id="RSV-INV-04", domain=D,
    statement="A batch has exactly item_count transitions; in each list their positions are 1..n without gaps; "
              "each has its own item idempotency key, computed from the batch key, the list and the position.",
    scope="transitions with their batch",
    counterexample="A 20-item batch with 19 transitions because one item failed to map, or two rows for item 3.",
    db=("uq_rsv_transition_item_key", "uq_rsv_transition_position", "ck_rsv_transition_array_index"),
    app="Ingest writes every item's transition in the batch's transaction; mapping failures become rows "
        "(RSV-INV-06), never exceptions.",
    error_code=None,
    concurrency="Inherits RSV-INV-02: only the batch's creator writes its transitions.",
    detector=f"""
        SELECT b.hotel_id, b.id AS batch_id, 'transition count differs from item_count' AS problem FROM {_B} b
         WHERE b.item_count <> (SELECT count(*) FROM {_TR} t WHERE t.hotel_id = b.hotel_id AND t.batch_id = b.id)
        UNION ALL
        SELECT t.hotel_id, t.batch_id, 'positions of ' || t.source_list || ' have gaps' FROM {_TR} t
         GROUP BY t.hotel_id, t.batch_id, t.source_list HAVING max(t.array_index) <> count(*)
        UNION ALL
        SELECT t.hotel_id, t.id, 'item key is not the documented function'
          FROM {_TR} t JOIN {_B} b ON b.hotel_id = t.hotel_id AND b.id = t.batch_id
         WHERE t.item_idempotency_key <> encode(sha256(convert_to(concat_ws(chr(31), 'rsv-item-v1',
                 b.batch_idempotency_key, t.source_list, t.array_index::text), 'UTF8')), 'hex')
    """,
)

register(
    id="RSV-INV-05", domain=D,
    statement="Every transition has exactly one task, created in the same transaction, carrying the transition's "
              "mapping (system task type, card type, queue participation) at creation.",
    scope="transitions and tasks",
    counterexample="An item maps but its task insert is skipped: the customer's request exists only in a table "
                   "nobody reads.",
    db=("uq_rsv_task_transition", "fk_rsv_task_transition"),
    app="Ingest inserts one task per transition in the batch's transaction.",
    error_code=None,
    concurrency="Inherits RSV-INV-02.",
    detector=f"""
        SELECT t.hotel_id, t.id AS transition_id, 'transition without task' AS problem FROM {_TR} t
         WHERE NOT EXISTS (SELECT 1 FROM {_T} k WHERE k.hotel_id = t.hotel_id AND k.ai_transition_id = t.id)
    """,
)

register(
    id="RSV-INV-06", domain=D,
    statement="An item the adapter cannot map is kept as an ADAPTER_CONTRACT_ERROR transition with a code from a "
              "closed list and a summary built only from a template, contract member names and expected types "
              "(never a value or an unknown member name), and becomes a MANUAL_REVIEW / FALLBACK_REVIEW task a "
              "person sees (who may then convert it to a typed task).",
    scope="transitions",
    counterexample="An item whose case_keys is a string is dropped, or its error message quotes "
                   "'guest ada@example.com is not a string' into a column support tooling reads.",
    db=("ck_rsv_transition_adapter_error", "ck_rsv_transition_adapter_error_code"),
    app="ai_contract.map_item answers a mapping or a ContractError; messages come from its templates.",
    error_code=None,
    concurrency="Not applicable.",
    detector=f"""
        SELECT t.hotel_id, t.id AS transition_id, 'adapter error without a fallback review task' AS problem
          FROM {_TR} t
         WHERE t.system_process_category = 'ADAPTER_CONTRACT_ERROR'
           AND (t.system_task_type <> 'MANUAL_REVIEW' OR t.task_card_type <> 'FALLBACK_REVIEW'
                OR NOT EXISTS (SELECT 1 FROM {_T} k WHERE k.hotel_id = t.hotel_id AND k.ai_transition_id = t.id))
        UNION ALL
        SELECT hotel_id, id, 'adapter error message carries payload-looking text' FROM {_TR}
         WHERE adapter_error_message ~ '(@|https?://|[0-9]{{7,}})'
    """,
)

register(
    id="RSV-INV-07", domain=D,
    statement="At most one ACTIVE order per (hotel, key type, business key).",
    scope="orders with order_status = 'ACTIVE'",
    counterexample="Two emails about confirmation number 884213 arrive at once; each ingest creates an ACTIVE "
                   "order and the booking's changes run in two queues, out of order.",
    db=(ORDER_ACTIVE_KEY_INDEX,),
    app="Ingest matches first and creates with INSERT .. ON CONFLICT DO NOTHING (keys sorted), then reads the "
        "winner; POST /orders pre-checks for the friendly ORDER_KEY_ALREADY_ACTIVE; back-fill merges on conflict.",
    error_code="ORDER_KEY_ALREADY_ACTIVE",
    concurrency="The partial unique index decides; ON CONFLICT waits for an uncommitted competitor.",
    detector=f"""
        SELECT hotel_id, order_key_type, order_business_key, count(*) AS active_orders FROM {_O}
         WHERE order_status = 'ACTIVE' GROUP BY hotel_id, order_key_type, order_business_key HAVING count(*) > 1
    """,
)

register(
    id="RSV-INV-08", domain=D,
    statement="Order state is consistent: a TEMPORARY order is unkeyed with a display code; an ACTIVE order has a "
              "normalised key with its source; ENDED has ended_at; LOGIC_DELETED has its time and reason; ENDED and "
              "LOGIC_DELETED are final; orders are never deleted.",
    scope="orders, every row",
    counterexample="An ACTIVE order without a key (matches nothing); a LOGIC_DELETED order set back to ACTIVE by "
                   "a script, reviving a merged-away queue.",
    db=("ck_rsv_order_status", "ck_rsv_order_key_present", "ck_rsv_order_key_normalized",
        "ck_rsv_order_temporary_is_unkeyed", "ck_rsv_order_active_is_keyed", "ck_rsv_order_temporary_has_code",
        "ck_rsv_order_ended_has_time", "ck_rsv_order_deleted_has_time", TRIGGERS["order_guard"]),
    app="Every order change is a declared transition (lifecycles.ORDER) under the order lock.",
    error_code="ORDER_NOT_OPEN",
    concurrency=_ORDER_LOCK,
    detector=f"""
        SELECT hotel_id, id, order_status AS problem FROM {_O}
         WHERE order_status NOT IN ('TEMPORARY', 'ACTIVE', 'ENDED', 'LOGIC_DELETED')
            OR (order_status = 'TEMPORARY' AND (order_key_type <> 'TEMPORARY' OR temporary_order_code IS NULL))
            OR (order_status = 'ACTIVE' AND order_key_type = 'TEMPORARY')
            OR ((order_key_type = 'TEMPORARY') <> (order_business_key IS NULL))
            OR ((order_status = 'ENDED') <> (ended_at IS NOT NULL))
            OR ((order_status = 'LOGIC_DELETED') <> (logic_deleted_at IS NOT NULL))
        UNION ALL {_trigger_missing('workflow_reservation_order', TRIGGERS['order_guard'])}
    """,
)

register(
    id="RSV-INV-09", domain=D,
    statement="Only TEMPORARY and ACTIVE orders take tasks (by ingest, move or merge); an ENDED or LOGIC_DELETED "
              "order holds no open task.",
    scope="tasks with their orders",
    counterexample="A late ingest attaches a task to a logic-deleted temporary order: it is in no open queue and "
                   "never executed.",
    db=(TRIGGERS["task_guard"], TRIGGERS["order_closed_has_no_open_tasks"]),
    app="Ingest re-checks matched orders under their lock (a closed one sends its items to a temporary order); "
        "move, end and logic-delete decide under the order lock.",
    error_code="ORDER_HAS_UNFINISHED_TASKS",
    concurrency=_ORDER_LOCK,
    detector=f"""
        SELECT k.hotel_id, k.id AS task_id, o.id AS order_id, o.order_status FROM {_T} k
          JOIN {_O} o ON o.hotel_id = k.hotel_id AND o.id = k.order_id
         WHERE o.order_status IN ('ENDED', 'LOGIC_DELETED') AND k.task_status IN {_OPEN}
    """,
)

register(
    id="RSV-INV-10", domain=D,
    statement="execution_order is unique within an order. A queue task is READY, EXECUTING or COMPLETED only when "
              "every queue task before it in its order is COMPLETED or FAILED; at most one task per order is "
              "EXECUTING. BLOCKED is computed from this and never stored.",
    scope="queue tasks, per order",
    counterexample="An agent confirms and executes the cancellation while the update in front of it still "
                   "waits: OPERA receives the update after the cancellation.",
    db=(TASK_EXECUTION_ORDER_INDEX, TASK_ONE_EXECUTING_INDEX, TRIGGERS["task_queue_respected"]),
    app="Confirm, convert, draft and execute compute `blocked` (the first open queue task of the order, the "
        "parent) and answer TASK_BLOCKED; queue positions come from the order's counter under its lock.",
    error_code="TASK_BLOCKED",
    concurrency=_ORDER_LOCK + " A task's blockers only shrink while it stays on its order; a move bumps its "
                              "version.",
    detector=f"""
        SELECT k.hotel_id, k.order_id, k.id AS task_id, e.id AS earlier_open_task_id FROM {_T} k
          JOIN {_T} e ON e.hotel_id = k.hotel_id AND e.order_id = k.order_id AND e.queue_participation
           AND e.execution_order < k.execution_order AND e.task_status IN {_OPEN}
         WHERE k.queue_participation AND k.task_status IN ('READY', 'EXECUTING', 'COMPLETED')
        UNION ALL
        SELECT hotel_id, order_id, min(id), NULL FROM {_T} WHERE task_status = 'EXECUTING'
         GROUP BY hotel_id, order_id HAVING count(*) > 1
    """,
)

register(
    id="RSV-INV-11", domain=D,
    statement="A task with blocked_until_parent_completed has an older parent task of its hotel and is READY, "
              "EXECUTING or COMPLETED only when the parent is COMPLETED (a FAILED parent does not release it).",
    scope="tasks with a parent",
    counterexample="'Add a trace note to the new booking' runs although the NEW_BOOKING it depends on failed.",
    db=("fk_rsv_task_parent", "ck_rsv_task_parent_before_child", "ck_rsv_task_blocked_needs_parent",
        TRIGGERS["task_queue_respected"]),
    app="Ingest resolves parents (this batch first, then earlier batches of the same message) and inserts them "
        "first; an unresolvable parent of a waiting item is the adapter error PARENT_NOT_FOUND.",
    error_code="TASK_BLOCKED",
    concurrency="The parent's status only moves forward; a stale read errs towards blocked.",
    detector=f"""
        SELECT k.hotel_id, k.id AS task_id, p.id AS parent_task_id, p.task_status AS parent_status FROM {_T} k
          LEFT JOIN {_T} p ON p.hotel_id = k.hotel_id AND p.id = k.parent_task_id
         WHERE k.blocked_until_parent_completed AND k.task_status IN ('READY', 'EXECUTING', 'COMPLETED')
           AND (p.id IS NULL OR p.task_status <> 'COMPLETED')
    """,
)

register(
    id="RSV-INV-12", domain=D,
    statement="Tasks have five stored states (never BLOCKED) and change only along lifecycles.TASK; each state "
              "carries its time; COMPLETED and FAILED are final; the version increases on every change; tasks are "
              "never deleted.",
    scope="tasks, every row",
    counterexample="A script sets a FAILED task to COMPLETED (a forced completion the spec forbids), or stores "
                   "task_status = 'BLOCKED'.",
    db=("ck_rsv_task_status", "ck_rsv_task_completed_has_time", "ck_rsv_task_failed_has_time",
        "ck_rsv_task_confirmed_has_time", TRIGGERS["task_guard"]),
    app="Every change goes through kernel.transitions.transition with the declared machine; zero rows answers "
        "the state's code (TASK_NOT_EDITABLE, TASK_NOT_READY, TASK_NOT_MOVABLE, TASK_ALREADY_FINISHED).",
    error_code="TASK_NOT_EDITABLE",
    concurrency="Conditional UPDATE on the source states (and the version the caller saw).",
    detector=f"""
        SELECT hotel_id, id AS task_id, task_status AS problem FROM {_T}
         WHERE task_status NOT IN ('PENDING_CONFIRM', 'READY', 'EXECUTING', 'COMPLETED', 'FAILED')
            OR (task_status = 'COMPLETED') <> (completed_at IS NOT NULL)
            OR (task_status = 'FAILED') <> (failed_at IS NOT NULL)
            OR (task_status = 'FAILED' AND last_failure_reason IS NULL)
            OR (queue_participation AND task_status IN ('READY', 'EXECUTING', 'COMPLETED') AND confirmed_at IS NULL)
        UNION ALL {_trigger_missing('workflow_reservation_task', TRIGGERS['task_guard'])}
    """,
)

register(
    id="RSV-INV-13", domain=D,
    statement="Informational messages (notifications, history items, source-message notices) are outside the "
              "queue, COMPLETED from their creation and never have operations; every queue task — manual review and "
              "fallback included — starts in PENDING_CONFIRM.",
    scope="tasks and operations",
    counterexample="A 'guest asks about parking' notification enters the queue and blocks the cancellation "
                   "behind it until someone confirms a notification; a manual review arrives READY and runs unseen.",
    db=("ck_rsv_task_queue_type", "ck_rsv_task_notification_completed", "ck_rsv_task_card_matches_type",
        TRIGGERS["task_guard"], TRIGGERS["op_guard"]),
    app="The AI contract's mapping table decides queue participation; ingest inserts notifications COMPLETED.",
    error_code=None,
    concurrency="Insert-time rule; not applicable.",
    detector=f"""
        SELECT k.hotel_id, k.id AS task_id, 'notification in the queue or not completed' AS problem FROM {_T} k
         WHERE (NOT k.queue_participation) <> (k.system_task_type = 'INFORMATIONAL_MESSAGE')
            OR (NOT k.queue_participation AND k.task_status <> 'COMPLETED')
        UNION ALL
        SELECT x.hotel_id, x.task_id, 'operation of a task outside the queue' FROM {_OP} x
          JOIN {_T} k ON k.hotel_id = x.hotel_id AND k.id = x.task_id WHERE NOT k.queue_participation
    """,
)

register(
    id="RSV-INV-14", domain=D,
    statement="Nobody force-completes or skips: a queue task is COMPLETED only when it has operations and all are "
              "SUCCEEDED; an operation is attempted only after every earlier operation of its task SUCCEEDED; a "
              "failed operation leaves the task EXECUTING (a committed EXECUTING task has exactly one FAILED "
              "operation); no route completes a task or marks an operation by hand.",
    scope="queue tasks and their operations",
    counterexample="The OPERA write failed; the agent clicks 'mark done', or a retry of the precheck jumps to "
                   "COMPLETED without the write, and the next task is released although OPERA never got the change.",
    db=(TRIGGERS["task_completion_earned"], TRIGGERS["attempt_in_sequence"]),
    app="Execution walks operations in sequence and stops at the first failure; retry accepts only the FAILED "
        "operation of an EXECUTING task; there is no complete or skip route.",
    error_code="OPERATION_NOT_FAILED",
    concurrency=_ORDER_LOCK + " Execution and retry run in one transaction each.",
    detector=f"""
        SELECT k.hotel_id, k.id AS task_id, 'completed without every operation succeeded' AS problem FROM {_T} k
         WHERE k.queue_participation AND k.task_status = 'COMPLETED'
           AND (NOT EXISTS (SELECT 1 FROM {_OP} x WHERE x.hotel_id = k.hotel_id AND x.task_id = k.id)
                OR EXISTS (SELECT 1 FROM {_OP} x WHERE x.hotel_id = k.hotel_id AND x.task_id = k.id
                              AND x.operation_status <> 'SUCCEEDED'))
        UNION ALL
        SELECT x.hotel_id, x.task_id, 'operation attempted before an earlier one succeeded' FROM {_OP} x
          JOIN {_OP} e ON e.hotel_id = x.hotel_id AND e.task_id = x.task_id
           AND e.operation_sequence < x.operation_sequence
         WHERE x.attempt_count > 0 AND e.operation_status <> 'SUCCEEDED'
        UNION ALL
        SELECT k.hotel_id, k.id, 'executing without exactly one failed operation' FROM {_T} k
         WHERE k.task_status = 'EXECUTING'
           AND (SELECT count(*) FROM {_OP} x WHERE x.hotel_id = k.hotel_id AND x.task_id = k.id
                   AND x.operation_status = 'FAILED') <> 1
    """,
)

register(
    id="RSV-INV-15", domain=D,
    statement="Attempts are history: only inserted, numbered 1..n per operation; an operation's attempt_count, "
              "last attempt and status agree with its attempts; SUCCEEDED is final; operations and attempts stay on "
              "their task's order.",
    scope="operations and attempts",
    counterexample="A retry overwrites attempt 1 with the success of attempt 2, erasing the evidence that OPERA "
                   "first rejected the write; two simultaneous retries both record attempt 2.",
    db=("uq_rsv_attempt_number", "ck_rsv_op_attempts", TRIGGERS["attempt_append_only"],
        TRIGGERS["attempt_in_sequence"], TRIGGERS["op_guard"]),
    app="Retry claims the operation with a conditional UPDATE on (FAILED, attempt_count = the If-Match), then "
        "inserts the attempt and records its outcome, in one transaction.",
    error_code="OPERATION_NOT_FAILED",
    concurrency=_ORDER_LOCK + " Of two retries naming the same attempt count, one adds an attempt.",
    detector=f"""
        SELECT x.hotel_id, x.id AS operation_id,
               'counts, last attempt or status disagree with the attempts' AS problem
          FROM {_OP} x LEFT JOIN {_A} a ON a.hotel_id = x.hotel_id AND a.operation_id = x.id
         GROUP BY x.hotel_id, x.id, x.attempt_count, x.last_attempt_id, x.operation_status, x.task_id, x.order_id
        HAVING count(a.id) <> x.attempt_count OR coalesce(max(a.attempt_number), 0) <> count(a.id)
            OR x.last_attempt_id IS DISTINCT FROM (array_agg(a.id ORDER BY a.attempt_number DESC))[1]
            OR (count(a.id) > 0 AND x.operation_status IS DISTINCT FROM
                (array_agg(a.attempt_status ORDER BY a.attempt_number DESC))[1])
            OR bool_or(a.task_id <> x.task_id OR a.order_id <> x.order_id)
        UNION ALL
        SELECT x.hotel_id, x.id, 'operation on another order than its task' FROM {_OP} x
          JOIN {_T} k ON k.hotel_id = x.hotel_id AND k.id = x.task_id WHERE x.order_id <> k.order_id
        UNION ALL {_trigger_missing('workflow_reservation_opera_operation_attempt', TRIGGERS['attempt_append_only'])}
    """,
)

_KNOWN_VERSIONS = ", ".join(f"('{t}', '{v}')" for t, v in PROVIDER.known_pairs())

register(
    id="RSV-INV-16", domain=D,
    statement="Each task has exactly one card, of its card type, in a contract version the provider knows. A "
              "queue task past PENDING_CONFIRM has a confirmed card; a confirmed payload, with who and when, is "
              "final. Only cards with neither draft nor confirmed payload move to a new contract version by "
              "migration (spec §9); others move when re-saved or confirmed.",
    scope="cards with their tasks",
    counterexample="OPERA is written from a draft the agent never confirmed; a migration rewrites the contract "
                   "version of a card holding a user's draft made under the old fields.",
    db=("uq_rsv_card_task", "fk_rsv_card_task", "ck_rsv_card_confirmed_complete", "ck_rsv_card_payload_objects",
        TRIGGERS["card_guard"], TRIGGERS["task_completion_earned"]),
    app="cards.validation (draft: types and limits; confirm: also required fields and rules); the contract "
        "migration's UPDATE is conditioned on draft and confirmed payload being NULL.",
    error_code="TASK_CARD_PAYLOAD_INVALID",
    concurrency="Card writes follow the task's conditional version UPDATE in the same transaction.",
    detector=f"""
        SELECT k.hotel_id, k.id AS task_id, 'card missing or of another type' AS problem FROM {_T} k
         WHERE NOT EXISTS (SELECT 1 FROM {_C} c WHERE c.hotel_id = k.hotel_id AND c.task_id = k.id
                              AND c.task_card_type = k.task_card_type)
        UNION ALL
        SELECT k.hotel_id, k.id, 'past PENDING_CONFIRM without a confirmed card' FROM {_T} k
          JOIN {_C} c ON c.hotel_id = k.hotel_id AND c.task_id = k.id
         WHERE k.queue_participation AND k.task_status IN ('READY', 'EXECUTING', 'COMPLETED')
           AND c.confirmed_payload_json IS NULL
        UNION ALL
        SELECT c.hotel_id, c.task_id, 'unknown field contract version ' || c.field_contract_version FROM {_C} c
         WHERE (c.task_card_type, c.field_contract_version) NOT IN ({_KNOWN_VERSIONS})
    """,
)

register(
    id="RSV-INV-17", domain=D,
    statement="Draft, confirm, move, convert and abandon change a task only at the version the caller read "
              "(If-Match or expected_version; required); retry names the operation's attempt count; every change "
              "increments the version.",
    scope="tasks (and their cards) and operations",
    counterexample="Two agents edit one draft and the second save silently erases the first's work; an agent "
                   "confirms a task a colleague moved to another order a second earlier.",
    db=("ck_rsv_task_version", TRIGGERS["task_guard"]),
    app="The conditional UPDATE includes version = expected; zero rows answers 412 PRECONDITION_FAILED (If-Match) "
        "or 409 VERSION_CONFLICT (body) with the current version; no version at all is 428 PRECONDITION_REQUIRED.",
    error_code="PRECONDITION_FAILED",
    concurrency="The row lock of the conditional UPDATE; READ COMMITTED re-checks the loser's WHERE.",
    detector=f"""
        SELECT hotel_id, id AS task_id, 'version not positive' AS problem FROM {_T} WHERE version < 1
        UNION ALL {_trigger_missing('workflow_reservation_task', TRIGGERS['task_guard'])}
    """,
)

register(
    id="RSV-INV-18", domain=D,
    statement="A task changes order only while PENDING_CONFIRM, to a TEMPORARY or ACTIVE order of its hotel, at "
              "the end of the target's queue: positions come from the order's counter, so a task never overtakes.",
    scope="tasks and their orders",
    counterexample="A READY cancellation is moved into an order in front of an open update; a task with a FAILED "
                   "operation is moved, leaving its attempts on the old order.",
    db=(TRIGGERS["task_guard"], "fk_rsv_task_order", "ck_rsv_order_last_execution_order"),
    app="move_task locks both orders in ascending id order, takes target.last_execution_order + 1 and moves the "
        "task conditionally on (PENDING_CONFIRM, version).",
    error_code="TASK_NOT_MOVABLE",
    concurrency=_ORDER_LOCK,
    detector=f"""
        SELECT k.hotel_id, k.id AS task_id, 'position beyond the order''s allocation counter' AS problem
          FROM {_T} k JOIN {_O} o ON o.hotel_id = k.hotel_id AND o.id = k.order_id
         WHERE k.execution_order > o.last_execution_order
    """,
)

register(
    id="RSV-INV-19", domain=D,
    statement="A temporary order gets a business key only when a NEW_BOOKING on it completes (the confirmed key, "
              "else OPERA's answer). If that key is already ACTIVE, the temporary order's open tasks join that "
              "order's queue and the temporary order is LOGIC_DELETED, merged into it: the one-ACTIVE rule holds "
              "through back-fill.",
    scope="orders with business_key_backfilled_at or merged_into_order_id",
    counterexample="The NEW_BOOKING completes with confirmation number 884213 while an email about 884213 has "
                   "already made an ACTIVE order: back-fill makes a second ACTIVE order for the key.",
    db=("ck_rsv_order_backfill", "ck_rsv_order_merged", "fk_rsv_order_merged_into", ORDER_ACTIVE_KEY_INDEX),
    app="Completion activates the order in a savepoint; a violation of uq_rsv_order_active_key switches to the "
        "merge. The back-fill never waits for a lock out of order: a busy order answers ORDER_BUSY (nothing "
        "recorded; retry).",
    error_code="ORDER_BUSY",
    concurrency="lock_timeout on the activation and NOWAIT on the second order, so the back-fill cannot "
                "deadlock with an ingest or a move.",
    detector=f"""
        SELECT m.hotel_id, m.id AS order_id, 'merged into a missing or unkeyed order' AS problem FROM {_O} m
          LEFT JOIN {_O} t ON t.hotel_id = m.hotel_id AND t.id = m.merged_into_order_id
         WHERE m.merged_into_order_id IS NOT NULL AND (t.id IS NULL OR t.order_key_type = 'TEMPORARY')
        UNION ALL
        SELECT o.hotel_id, o.id, 'back-filled without a completed NEW_BOOKING on it' FROM {_O} o
         WHERE o.business_key_backfilled_at IS NOT NULL
           AND NOT EXISTS (SELECT 1 FROM {_T} k WHERE k.hotel_id = o.hotel_id AND k.order_id = o.id
                              AND k.system_task_type = 'NEW_BOOKING' AND k.task_status = 'COMPLETED')
    """,
)

_KEYS = ", ".join(f"'{k}'" for k in sorted(AUDIT_SNAPSHOT_KEYS))

register(
    id="RSV-INV-20", domain=D,
    statement="Audit rows are append-only, name their actor (SYSTEM, or USER / SUPERAGENT with an id) and hold only "
              "allow-listed summaries: never secrets, tokens, message bodies, attachment URLs, emails or payload "
              "values.",
    scope="workflow_reservation_audit_log",
    counterexample='After a draft save the audit row holds {"guest_email": "ada@example.com", '
                   '"attachment": "https://files/...?sig=..."}.',
    db=(TRIGGERS["audit_append_only"], TRIGGERS["audit_no_truncate"], "ck_rsv_audit_actor_type",
        "ck_rsv_audit_actor_named"),
    app="reservations.audit refuses snapshot keys outside AUDIT_SNAPSHOT_KEYS; user-typed reasons are refused "
        "when they hold an email address or a URL.",
    error_code=None,
    concurrency="Insert-only, in the changing transaction.",
    detector=rf"""
        SELECT a.hotel_id, a.id AS audit_id, 'snapshot key outside the allow-list: ' || k.key AS problem
          FROM {_AU} a
          CROSS JOIN LATERAL (SELECT jsonb_object_keys(coalesce(a.before_snapshot_json, '{{}}'::jsonb)) AS key
                              UNION SELECT jsonb_object_keys(coalesce(a.after_snapshot_json, '{{}}'::jsonb))) k
         WHERE k.key <> ALL (ARRAY[{_KEYS}]::text[])
        UNION ALL
        SELECT hotel_id, id, 'email, URL or secret-looking text' FROM {_AU}
         WHERE concat_ws(' ', before_snapshot_json::text, after_snapshot_json::text, reason)
               ~* '([a-z0-9._%+-]+@[a-z0-9-]+\.[a-z]|https?://|"(token|secret|password|access_token)"\s*:)'
        UNION ALL
        SELECT hotel_id, id, 'actor not named' FROM {_AU} WHERE actor_type <> 'SYSTEM' AND actor_id IS NULL
    """,
)

register(
    id="RSV-INV-21", domain=D,
    statement="Staff assignments reference accounts that are not deleted; every read and command of the domain "
              "selects rows of the caller's visible hotels only (all for reservation:hotel:manage, assigned ones "
              "for other users, hotel_ids for API clients), and ingest is accepted only for the client's hotels.",
    scope="hotel_staff; every statement of the domain",
    counterexample="An agent of hotel H1 opens /tasks/{id} of H2 by guessing the id; an ingest client of H1 posts "
                   "a batch for H2.",
    db=(HOTEL_STAFF_PK, "fk_hotel_staff_hotel"),
    app="permissions.visible_sql is part of every statement; the account-deleted handler removes the account's "
        "assignments in identity's unit of work; grants share-lock the account (require_active_accounts).",
    error_code="RESERVATION_HOTEL_FORBIDDEN",
    concurrency="The handler runs inside the deletion's transaction after identity locked the account.",
    detector=f"""
        SELECT s.hotel_id, s.user_id, 'assignment of a deleted or missing account' AS problem
          FROM {S}.hotel_staff s LEFT JOIN iam.user_account u ON u.id = s.user_id
         WHERE u.id IS NULL OR u.status = 'deleted'
    """,
)
