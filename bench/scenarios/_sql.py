"""Statements several scenarios' baselines share, as Tenet sends them (see `--show-sql`), in psycopg's
placeholders. Not a scenario (the leading underscore keeps it out of the list)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import jwt

from tenet.iam.queries import USER_PRINCIPAL_SQL
from tenet.workspaces.models import Membership, Workspace


def columns(model: Any) -> str:
    """The columns the ORM selects for `model`, qualified as SQLAlchemy writes them. Taken from the model,
    so a column added to it reaches the baseline too."""
    table = model.__table__
    return ", ".join(f"{table.schema}.{table.name}.{column.name}" for column in table.columns)


def json_time(value: datetime) -> str:
    """A UTC time as Pydantic writes it in Tenet's answers."""
    return value.isoformat().replace("+00:00", "Z")


# Every authenticated request: the principal (imported, not copied, so the two cannot drift). Its parameters:
# the account id, its token epoch and the token's sign-in family (`principal_params`).
PRINCIPAL_SQL = USER_PRINCIPAL_SQL


def principal_params(user_id: Any, token: str) -> dict[str, Any]:
    """The principal statement's parameters for a token, as Tenet reads them from its claims."""
    claims = jwt.decode(token, options={"verify_signature": False})
    return {"id": user_id, "epoch": claims.get("ep", 0), "family": claims.get("fam")}
# The workspace (session.get) and the caller's active membership: every workspace route starts with these.
WORKSPACE_SQL = f"SELECT {columns(Workspace)} FROM workspace.workspace WHERE workspace.workspace.id = %s::UUID"
ACTIVE_MEMBERSHIP_SQL = (
    f"SELECT {columns(Membership)} FROM workspace.membership "
    "WHERE workspace.membership.workspace_id = %s::UUID AND workspace.membership.user_id = %s::UUID "
    "AND workspace.membership.status = %s::VARCHAR")
