"""Request and response DTOs of workspaces. Requests forbid unknown fields; tokens never appear in a
response (they travel only by mail)."""

from __future__ import annotations

import uuid
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tenet.workspaces.permissions import InvitationRole, WorkspaceRole

# No control characters: the name goes into mail subjects and headers.
WorkspaceName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200,
                                                 pattern=r"^[^\x00-\x1f\x7f]+$")]
EmailText = Annotated[str, StringConstraints(min_length=3, max_length=320)]
InvitationToken = Annotated[str, StringConstraints(min_length=8, max_length=200, pattern=r"^[A-Za-z0-9_\-]+$")]

_WS_ID = "3f0c9a56-1f4e-4d5b-9a1e-6c2d8b7e5a10"
_USER_ID = "8d2e4f60-3b1a-4c7d-9e8f-0a1b2c3d4e5f"
_INV_ID = "5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d8e"


class WorkspaceStatus(StrEnum):
    """ACTIVE: usable. DELETING: an owner asked to delete it; read-only (no invitations, acceptance or
    membership changes) until the worker finishes. DELETED workspaces are never shown (404)."""

    ACTIVE = "ACTIVE"
    DELETING = "DELETING"


class InvitationStatus(StrEnum):
    """PENDING -> ACCEPTED | REVOKED | EXPIRED; the last three are final. A PENDING invitation past its
    `expires_at` is shown as EXPIRED."""

    PENDING = "PENDING"
    ACCEPTED = "ACCEPTED"
    REVOKED = "REVOKED"
    EXPIRED = "EXPIRED"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WorkspaceCreate(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"name": "Research"}]})

    name: WorkspaceName = Field(description="1 to 200 characters, no control characters")


WORKSPACE_EXAMPLE: dict[str, Any] = {
        "id": _WS_ID, "name": "Research", "status": "ACTIVE", "role": "owner",
        "created_at": "2026-01-05T09:00:00Z", "deletion_requested_at": None,
}


class WorkspaceRead(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [WORKSPACE_EXAMPLE]})

    id: uuid.UUID
    name: str
    status: WorkspaceStatus
    role: WorkspaceRole = Field(description="The caller's role in this workspace")
    created_at: datetime
    deletion_requested_at: datetime | None = None


class MemberRead(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "user_id": _USER_ID, "membership_id": "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b", "role": "admin",
        "display_name": "Ada Lovelace", "email": "Ada@Example.com", "joined_at": "2026-01-05T09:00:00Z",
    }]})

    user_id: uuid.UUID
    membership_id: uuid.UUID
    role: WorkspaceRole
    display_name: str
    email: str = Field(description="The member's account email, as typed")
    joined_at: datetime


class MemberUpdate(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"role": "admin"}]})

    role: WorkspaceRole


class OwnershipTransfer(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"user_id": _USER_ID}]})

    user_id: uuid.UUID = Field(description="An active member who is not an owner yet")


class InvitationCreate(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"email": "Ada.Lovelace@example.com", "role": "member"}]})

    email: EmailText = Field(description="Compared as email-v1 (trimmed, NFKC, lower-cased); kept as typed")
    role: InvitationRole = Field(InvitationRole.MEMBER, description="admin (owners only) or member")


class InvitationRead(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "id": _INV_ID, "workspace_id": _WS_ID, "email": "Ada.Lovelace@example.com", "role": "member",
        "status": "PENDING", "invited_by": _USER_ID, "created_at": "2026-01-05T09:00:00Z",
        "expires_at": "2026-01-12T09:00:00Z", "last_sent_at": "2026-01-05T09:00:00Z", "accepted_at": None,
        "accepted_by": None, "revoked_at": None, "expired_at": None,
    }]})

    id: uuid.UUID
    workspace_id: uuid.UUID
    email: str = Field(description="As typed by the inviter")
    role: InvitationRole
    status: InvitationStatus
    invited_by: uuid.UUID
    created_at: datetime
    expires_at: datetime
    last_sent_at: datetime
    accepted_at: datetime | None
    accepted_by: uuid.UUID | None
    revoked_at: datetime | None
    expired_at: datetime | None


class InvitationAccept(Strict):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [{"token": "wsi_9f8e7d6c5b4a..."}]})

    token: InvitationToken = Field(description="The code from the invitation mail (also in its link)")


class InvitationAccepted(BaseModel):
    model_config = ConfigDict(json_schema_extra={"examples": [{
        "invitation_id": _INV_ID, "membership_id": "0e1f2a3b-4c5d-4e6f-8a9b-0c1d2e3f4a5b",
        "workspace": WORKSPACE_EXAMPLE | {"role": "member"},
    }]})

    invitation_id: uuid.UUID
    membership_id: uuid.UUID
    workspace: WorkspaceRead
