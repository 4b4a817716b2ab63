"""A Microsoft Graph emulator for the Outlook sync's tests (issue 17): a real HTTPS server on 127.0.0.1 speaking
the subset the sync uses, with the identity platform MSAL needs, so MSAL and httpx run unmodified against it.

Facts it follows (with their sources): /work/shared/design/GRAPH.md; where Graph's behaviour was unclear, the choice
is in docs/decisions.md ("Graph emulator"). Its own tests, which show every capability in use:
tests/support/test_graph_emulator.py.

Starting it
-----------
The `graph` fixture (tests/conftest.py) gives a `GraphEmulator`, reset for each test (new tenant, app registration,
mailboxes, log) on a server started once per xdist worker (`graph_emulator_server`). Point the sync at it with
`graph.env()`: GRAPH_TENANT_ID, GRAPH_CLIENT_ID, GRAPH_CLIENT_SECRET, GRAPH_AUTHORITY_URL (`graph.authority_url`,
the tenant is appended), GRAPH_BASE_URL (`graph.base_url`, ".../v1.0"), GRAPH_CA_BUNDLE (`graph.ca_bundle`, the
PEM of the CA made at start; nothing else trusts it).

Two things the client must do, as it must against the real service:
- MSAL: `ConfidentialClientApplication(client_id, client_credential=secret, authority=f"{authority_url}/{tenant}",
  http_client=session, instance_discovery=False)`. A non-Microsoft authority host makes MSAL ask
  login.microsoftonline.com for instance discovery unless `instance_discovery=False` (the emulator also serves
  `/common/discovery/instance` if you pass that URL instead). And requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE
  from the environment override `Session.verify` (they are set on this machine): give MSAL a `requests.Session` with
  `trust_env = False` and `verify = GRAPH_CA_BUNDLE`, or `verify=` alone will silently not be used.
- httpx: `verify=ssl.create_default_context(cafile=GRAPH_CA_BUNDLE)`, `trust_env=False` (or an explicit context).
The token scope is "https://graph.microsoft.com/.default" (any "<resource>/.default" is accepted).

Mailboxes (the test API; all of it also takes the emulator's lock, so it is safe while requests are served)
-------------------------------------------------------------------------------------------------------
    box = graph.add_mailbox("room@contoso.com")              # box.id is its GUID; paths accept id or UPN
    one = box.create_event("Standup", "2026-01-05T09:00", "2026-01-05T09:15", zone="Pacific Standard Time",
                           location="Room 1", attendees=[{"address": "a@contoso.com"}])   # naive = wall time
    series = box.create_series("Weekly", "2026-03-02T09:00", "2026-03-02T10:00",
                               pattern={"type": "weekly", "daysOfWeek": ["monday"]}, until=date(2026, 6, 1))
    box.update_event(one, subject="Renamed")                 # a master too: Graph reports only the master
    box.update_event(series, start=..., end=...)             # rescheduling: exceptions dropped, occurrence ids change
    box.edit_occurrence(series, original_start, subject="Moved", start=..., end=...)  # -> exception, same id
    box.delete_occurrence(series, original_start)            # silent: delta never mentions it; /instances does
    box.delete_occurrence(series, original_start, silent=False)   # delta carries `@removed`
    box.delete_event(one); box.move_event(one)               # move: REST id changes, ImmutableId does not
    box.occurrence(series, original_start); box.id_of(item, immutable=True)   # ids for assertions
    box.fill(10_000, start=..., spacing=timedelta(minutes=10))            # a bench's mailbox, no notifications
    graph.deny(box) / graph.allow(box)                       # 403 ErrorAccessDenied on its mailbox routes
    box.rest_enabled = False                                 # 404 MailboxNotEnabledForRESTAPI
Recurrence is Graph's `patternedRecurrence` JSON, expanded with dateutil in `range.recurrenceTimeZone` (Windows names
mapped by icalendar's WINDOWS_TO_OLSON), so a 09:00 Los Angeles series stays 09:00 local across DST. Times render
in UTC unless `Prefer: outlook.timezone="..."`. `original_start_time_zone="tzone://Microsoft/Custom"` on
create_event gives an event Outlook's custom zone.

Routes (under /v1.0; names in brackets are the route names faults, latency and the log use)
------------------------------------------------------------------------------------------
GET /users/{id} [user] (the directory: not refused for a denied mailbox), GET /users/{id}/calendar [calendar],
GET /users/{id}/events [events] ($top, $skip, @odata.nextLink, $select, $filter on type/subject/isCancelled/
start/dateTime/end/dateTime with eq/ne/ge/gt/le/lt and/or), GET /users/{id}/events/{eid} [event] (singles, masters,
occurrences, exceptions), GET .../events/{eid}/instances?startDateTime&endDateTime [instances] (paged),
GET /users/{id}/calendarView?startDateTime&endDateTime [calendarView], GET /users/{id}/calendarView/delta [delta]
(`Prefer: odata.maxpagesize=N`, default 10; @odata.nextLink with $skiptoken, @odata.deltaLink with $deltatoken, both
carrying the window; occurrences carry only id/type/seriesMasterId/start/end; no masters; `@removed` {"reason":
"deleted"} for deleted events AND for events that left the window or were made outside it; $select refused),
any write on /users/{id}/events* [event_write] (403: the app holds Calendars.Read), POST/GET /subscriptions
[subscriptions], GET/PATCH/DELETE /subscriptions/{sid} [subscription], POST /subscriptions/{sid}/reauthorize
[reauthorize] (204). Identity (not under /v1.0): /{tenant}/v2.0/.well-known/openid-configuration [discovery],
POST /{tenant}/oauth2/v2.0/token [token] (client credentials; a wrong secret gets invalid_client AADSTS7000215).
Every Graph answer carries request-id and client-request-id (echoed); errors are Graph's
{"error": {"code", "message", "innerError": {"date", "request-id", "client-request-id"}}}.

Subscriptions and notifications
-------------------------------
POST /subscriptions validates notificationUrl and lifecycleNotificationUrl with Graph's call-back (POST
`?validationToken=...`, 200 text/plain with the decoded token within `graph.settings.validation_timeout`, 10 s) and
answers 400 ValidationError otherwise; lifetime above `settings.subscription_max_minutes` (10,080; set 4,230 for the
older limit) -> 400 ExtensionError, below 45 minutes raised to 45; clientState over 128 characters, a non-https URL
(`settings.require_https_notification_url`) or a resource other than /users/{id}/events -> 400. Subscriptions made
with `Prefer: IdType="ImmutableId"` get ImmutableIds in their notifications. The emulator's clock (`graph.state.now`,
`graph.state.set_now(dt)`, `graph.state.advance(td)`) decides expiry: an expired subscription is gone (404).
Call-backs and notifications reach real HTTPS endpoints (trusting the emulator's CA: `graph.issue_certificate()`
gives a receiver a certificate) or an in-process app: `graph.mount("https://tenet.test", httpx.AsyncClient(
transport=httpx.ASGITransport(app=tenet_app), base_url="https://tenet.test"))`, called from async code (the
emulator then calls that app on the test's event loop). Mailbox changes queue notifications; nothing is sent until:
    await graph.deliver_notifications(duplicate=True, out_of_order=True, wrong_client_state=[0, 3], delay=0.5,
                                      batch_size=None)   # one POST per notification URL, {"value": [...]}
    await graph.send_lifecycle((sub, "reauthorizationRequired"), (sub, "missed"), (other, "subscriptionRemoved"))
    graph.subscriptions(box); graph.expire_subscription(sub); graph.pending_notifications(); graph.deliveries()
`missed` drops the subscription's queued notifications; `subscriptionRemoved` removes it (PATCH then 404);
`reauthorizationRequired` sets `sub.reauthorization_required` until POST .../reauthorize or a PATCH.
Edits produce one notification each (create: created; update: updated; an occurrence's edit: updated of the exception
and of the master; an occurrence's deletion: updated of the master only); Graph's 2-3 per edit: `duplicate=True`.

Faults
------
    graph.throttle(box, retry_after=2, route="delta", times=1)     # 429 ApplicationThrottled + Retry-After
    graph.unavailable(box, retry_after=1, times=2)                 # 503 + Retry-After
    graph.fail(403, "ErrorAccessDenied", "...", route="event", mailbox=box, times=None)   # anything, until cleared
    graph.add_latency(0.3, route="delta", mailbox=box)             # slower answers
    held = graph.hold(route="events", mailbox=box); await graph.wait_in_flight(box, 4); held.release()
    graph.revoke_tokens()                                          # 401 InvalidAuthenticationToken until a new token
    graph.reset_delta(box, code="syncStateNotFound")               # every token so far: 410 (+ Location)
    graph.expire_skip_tokens(box); graph.replay_next_delta_round(box); box.delta_duplicates = True
    graph.clear_faults()
More than `settings.concurrency_limit` (4) requests of one mailbox in flight at once get 429 ApplicationThrottled
"Application is over its MailboxConcurrency limit." (Retry-After 1), counted for real; `graph.peak_concurrency(box)`.

The request log
---------------
`graph.requests(route=None, method=None, mailbox=None, api="graph")` lists `LoggedRequest`s (method, path, query,
route, mailbox id, status, prefer, immutable_id, client_request_id, request_id, authorized, body); `api="identity"`
for discovery and token calls. `graph.writes_to_events()` (must stay empty for Tenet), `graph.requests_without_
immutable_id()` (must stay empty: every request, subscriptions included, carries Prefer IdType="ImmutableId"),
`len(graph.requests())` for the Graph requests a sync used.
"""

from tests.support.graph.server import GraphEmulator, running_emulator

__all__ = ["GraphEmulator", "running_emulator"]
