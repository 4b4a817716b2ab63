"""The one declarative base: every domain's tables share this MetaData so Alembic sees them all."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, MetaData
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

# Constraint names are derived, never hand-typed, so that invariants can name them (INVARIANTS.md)
# and Alembic's autogenerate compares like with like.
NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

# The PostgreSQL schemas owned by Tenet, one per package (ARCHITECTURE.md). Migrations create them; the
# tests empty them. (The RLS baseline, KERNEL-INV-03, walks every schema, not only these.)
APP_SCHEMAS = ("kernel", "iam", "workspace")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {
        datetime: DateTime(timezone=True),
        uuid.UUID: UUID(as_uuid=True),
    }


def uuid_pk() -> Mapped[uuid.UUID]:
    return mapped_column(primary_key=True, default=uuid.uuid4)
