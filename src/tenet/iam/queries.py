"""Identity's reads: users, API clients, the principal behind a token and the rows sign-in checks. One statement per
answer; each takes a `Runner` first (the read path for a GET and for authentication, the unit of work's statements
for a command that answers what it wrote as the GET shows it)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from tenet.iam import errors
from tenet.iam.principal import Principal, UserProfile
from tenet.iam.tokens import AccessClaims
from tenet.kernel.pagination import PageParams, SqlKeyset
from tenet.kernel.reads import Row, Runner

# An account as the administration shows it (UserRead): its roles sorted by name; deleted accounts are not shown.
_USER_COLUMNS = """u.id, u.email, u.display_name, u.status, u.created_at,
       ARRAY(SELECT r.role_name FROM iam.user_role r WHERE r.user_id = u.id ORDER BY r.role_name) AS roles"""
USER_SQL = f"""
    SELECT {_USER_COLUMNS} FROM iam.user_account u WHERE u.id = %(id)s AND u.status <> 'deleted'
"""  # noqa: S608  (constants of this module)
USERS_KEYSET = SqlKeyset(("u.created_at", "u.id"), (datetime, uuid.UUID))
USERS_SQL = f"""
    SELECT {_USER_COLUMNS} FROM iam.user_account u
     WHERE u.status <> 'deleted' AND {{matching}} AND {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)
# The administration's search (issue 18): the text in the name or the email, case-insensitive, `%`, `_` and
# backslash taken literally.
USERS_MATCHING = r"(u.display_name ILIKE %(pattern)s ESCAPE '\' OR u.email_normalized ILIKE %(pattern)s ESCAPE '\')"


async def user(reads: Runner, *, user_id: uuid.UUID) -> Row:
    row = await reads.one(USER_SQL, {"id": user_id})
    if row is None:
        raise errors.UserNotFound()
    return row


async def users(reads: Runner, *, page: PageParams, text: str | None = None) -> tuple[list[Row], str | None]:
    """Accounts that are not deleted, oldest first (with `text`: those whose name or email contains it)."""
    after, params = USERS_KEYSET.after(page)
    cleaned = (text or "").strip()
    if cleaned:
        escaped = cleaned.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        params = {**params, "pattern": f"%{escaped}%"}
    rows = await reads.all(USERS_SQL.format(matching=USERS_MATCHING if cleaned else "TRUE", after=after,
                                            order=USERS_KEYSET.order_by),
                           {"limit": USERS_KEYSET.fetch_limit(page), **params})
    return USERS_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))


_API_CLIENT_COLUMNS = "c.id, c.client_id, c.name, c.scopes, c.hotel_ids, c.created_at, c.revoked_at"
API_CLIENT_SQL = f"SELECT {_API_CLIENT_COLUMNS} FROM iam.api_client c WHERE c.id = %(id)s"  # noqa: S608
API_CLIENTS_KEYSET = SqlKeyset(("c.created_at", "c.id"), (datetime, uuid.UUID))
API_CLIENTS_SQL = f"""
    SELECT {_API_CLIENT_COLUMNS} FROM iam.api_client c WHERE {{after}} ORDER BY {{order}} LIMIT %(limit)s
"""  # noqa: S608  (constants of this module)


async def api_client(reads: Runner, *, api_client_id: uuid.UUID) -> Row:
    row = await reads.one(API_CLIENT_SQL, {"id": api_client_id})
    if row is None:
        raise errors.ApiClientNotFound()
    return row


async def api_clients(reads: Runner, *, page: PageParams) -> tuple[list[Row], str | None]:
    """Every API client (revoked ones included), oldest first."""
    after, params = API_CLIENTS_KEYSET.after(page)
    rows = await reads.all(API_CLIENTS_SQL.format(after=after, order=API_CLIENTS_KEYSET.order_by),
                           {"limit": API_CLIENTS_KEYSET.fetch_limit(page), **params})
    return API_CLIENTS_KEYSET.page(rows, page, key=lambda r: (r["created_at"], r["id"]))


# --- principals --------------------------------------------------------------------------------------

# One round trip per authenticated request, on the read path: the account (active, at the token's epoch,
# its sign-in not revoked), its roles and their permission points, plus the few profile columns /auth/me
# shows. bench/scenarios/auth_me.py runs this same statement as its baseline.
USER_PRINCIPAL_SQL = """
    SELECT u.id, u.email, u.display_name, u.status, u.created_at,
           COALESCE(array_agg(DISTINCT ur.role_name) FILTER (WHERE ur.role_name IS NOT NULL), '{}') AS roles,
           COALESCE(array_agg(DISTINCT rp.permission_name) FILTER (WHERE rp.permission_name IS NOT NULL), '{}')
             AS permissions
      FROM iam.user_account u
      LEFT JOIN iam.user_role ur ON ur.user_id = u.id
      LEFT JOIN iam.role_permission rp ON rp.role_name = ur.role_name
     WHERE u.id = %(id)s AND u.status = 'active' AND u.token_epoch = %(epoch)s
       AND NOT EXISTS (SELECT 1 FROM iam.refresh_token rt
                        WHERE rt.family_id = %(family)s AND rt.revoked_at IS NOT NULL)
     GROUP BY u.id
"""
CLIENT_PRINCIPAL_SQL = """
    SELECT id, scopes, hotel_ids FROM iam.api_client WHERE id = %(id)s AND revoked_at IS NULL
"""


async def principal(reads: Runner, claims: AccessClaims) -> Principal | None:
    """The caller behind verified token claims, in one round trip; None when the account or client is gone
    (deleted, disabled, revoked) or the token predates a disable or a revoked sign-in, so such tokens stop
    working at once."""
    if claims.kind == "user":
        row = await reads.one(USER_PRINCIPAL_SQL, {"id": claims.subject, "epoch": claims.epoch,
                                                   "family": claims.family})
        if row is None:
            return None
        return Principal(kind="user", id=row["id"], roles=frozenset(row["roles"]),
                         permissions=frozenset(row["permissions"]),
                         profile=UserProfile(email=row["email"], display_name=row["display_name"],
                                             status=row["status"], created_at=row["created_at"]))
    client = await reads.one(CLIENT_PRINCIPAL_SQL, {"id": claims.subject})
    if client is None:
        return None
    return Principal(kind="client", id=client["id"], scopes=frozenset(client["scopes"]),
                     hotel_ids=frozenset(client["hotel_ids"]))


# The console's caller (tenet.web): the session named by the cookie's digest, alive (not revoked, not expired, the
# account active at the session's epoch), with the same roles and permission points as a token's principal.
WEB_PRINCIPAL_SQL = """
    SELECT u.id, u.email, u.display_name, u.status, u.created_at, s.id AS session_id,
           COALESCE(array_agg(DISTINCT ur.role_name) FILTER (WHERE ur.role_name IS NOT NULL), '{}') AS roles,
           COALESCE(array_agg(DISTINCT rp.permission_name) FILTER (WHERE rp.permission_name IS NOT NULL), '{}')
             AS permissions
      FROM iam.web_sessions s
      JOIN iam.user_account u ON u.id = s.user_id
      LEFT JOIN iam.user_role ur ON ur.user_id = u.id
      LEFT JOIN iam.role_permission rp ON rp.role_name = ur.role_name
     WHERE s.token_digest = %(digest)s AND s.revoked_at IS NULL AND s.expires_at > %(now)s
       AND u.status = 'active' AND u.token_epoch = s.token_epoch
     GROUP BY u.id, s.id
"""


async def web_principal(reads: Runner, *, token_digest: str, now: datetime) -> tuple[Principal, uuid.UUID] | None:
    """The signed-in person behind a console session and the session's id; None when the session is unknown,
    signed out, expired, or its account changed (disabled, deleted, roles changed: the commands revoked it)."""
    row = await reads.one(WEB_PRINCIPAL_SQL, {"digest": token_digest, "now": now})
    if row is None:
        return None
    principal = Principal(kind="user", id=row["id"], roles=frozenset(row["roles"]),
                          permissions=frozenset(row["permissions"]),
                          profile=UserProfile(email=row["email"], display_name=row["display_name"],
                                              status=row["status"], created_at=row["created_at"]))
    return principal, row["session_id"]


# --- what sign-in checks -------------------------------------------------------------------------------

SIGN_IN_CANDIDATE_SQL = """
    SELECT id, password_hash FROM iam.user_account WHERE email_normalized = %(email)s AND status = 'active'
"""
CLIENT_CREDENTIALS_SQL = """
    SELECT id, secret_digest, scopes FROM iam.api_client WHERE client_id = %(client_id)s AND revoked_at IS NULL
"""


async def sign_in_candidate(reads: Runner, *, email_normalized: str) -> Row | None:
    """The active account a password sign-in names, with its hash (never leaves identity)."""
    return await reads.one(SIGN_IN_CANDIDATE_SQL, {"email": email_normalized})


async def client_credentials(reads: Runner, *, client_id: str) -> dict[str, Any] | None:
    """The live API client a client_credentials grant names, with its secret's digest."""
    return await reads.one(CLIENT_CREDENTIALS_SQL, {"client_id": client_id})
