"""Request and response DTOs of identity."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from tenet.iam.permissions import Role, Scope

# No control characters: names end up in mail headers and logs, and PostgreSQL text cannot hold NUL.
DisplayName = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=200,
                                               pattern=r"^[^\x00-\x1f\x7f]+$")]
EmailText = Annotated[str, StringConstraints(min_length=3, max_length=320)]
Password = Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UserRegister(Strict):
    email: EmailText = Field(examples=["Ada.Lovelace@example.com"])
    password: Password = Field(examples=["correct horse battery staple"])
    display_name: DisplayName = Field(examples=["Ada Lovelace"])


class UserCreate(UserRegister):
    roles: list[Role] | None = Field(None, description="Defaults to [Employee]")


class UserRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str = Field(description="As typed at registration")
    display_name: str
    status: Literal["active", "disabled", "deleted"]
    roles: list[str]
    created_at: datetime


class RolesUpdate(Strict):
    roles: list[Role] = Field(max_length=10)


class RoleRead(BaseModel):
    name: str
    description: str
    permissions: list[str]


class TokenResponse(BaseModel):
    """RFC 6749 §5.1."""

    access_token: str
    token_type: Literal["bearer"] = "bearer"
    expires_in: int = Field(description="Seconds until the access token expires")
    refresh_token: str | None = Field(None, description="Only for the password and refresh_token grants")
    scope: str | None = None


class RefreshRequest(Strict):
    refresh_token: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class PasswordResetRequest(Strict):
    email: Annotated[str, StringConstraints(min_length=1, max_length=320)]


class PasswordResetComplete(Strict):
    token: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    password: Annotated[str, StringConstraints(min_length=1, max_length=1024)]


class ApiClientCreate(Strict):
    name: DisplayName
    scopes: list[Scope] = Field(min_length=1, max_length=10)
    hotel_ids: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] | None = Field(
        None, max_length=1000, description="Hotels this client may act for; omitted or empty means none"
    )


class ApiClientRead(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    client_id: str
    name: str
    scopes: list[str]
    hotel_ids: list[str]
    created_at: datetime
    revoked_at: datetime | None


class ApiClientCreated(ApiClientRead):
    client_secret: str = Field(description="Shown once; only a digest is stored")


class MeRead(BaseModel):
    principal_type: Literal["user", "client"]
    user: UserRead | None = None
    client: ApiClientRead | None = None
    roles: list[str]
    permissions: list[str]
    scopes: list[str]
