"""What the legacy SQLite import (issue 20, docs/legacy-meeting-attendance.md) remembers between runs.

`legacy_import_rows` maps each legacy row to the Tenet row it became (meeting ids are kept when they fit
MA-INV-01, every other key is Tenet's own), with two fingerprints: of the legacy row as mapped (a newer file
that changed the row updates it) and of the Tenet row as the import left it (a Tenet-side change since is a
conflict, reported and never overwritten). `owned` is false for accounts that existed before the import (and
for a second legacy user merged into one account): the import never changes or removes those.
`legacy_import_runs` keeps each committed run's report.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, CheckConstraint, Identity, Text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from tenet.db.base import Base

SCHEMA = "meeting_attendance"
LEGACY_TABLES = ("users", "meeting_series", "meetings", "meeting_required_attendees", "attendances", "templates",
                 "template_attendees", "audit_logs")


class LegacyImportRow(Base):
    __tablename__ = "legacy_import_rows"
    __table_args__ = (
        CheckConstraint("source_table IN ('" + "', '".join(LEGACY_TABLES) + "')", name="source_table"),
        CheckConstraint("source_digest ~ '^sha256:[0-9a-f]{64}$'", name="source_digest_shape"),
        CheckConstraint("row_digest IS NULL OR row_digest ~ '^sha256:[0-9a-f]{64}$'", name="row_digest_shape"),
        {"schema": SCHEMA},
    )

    source_table: Mapped[str] = mapped_column(Text, primary_key=True)
    legacy_key: Mapped[str] = mapped_column(Text, primary_key=True)
    target_key: Mapped[str] = mapped_column(Text)
    owned: Mapped[bool] = mapped_column(Boolean)
    source_digest: Mapped[str] = mapped_column(Text)
    row_digest: Mapped[str | None] = mapped_column(Text)
    imported_at: Mapped[datetime]
    updated_at: Mapped[datetime]


class LegacyImportRun(Base):
    __tablename__ = "legacy_import_runs"
    __table_args__ = (
        CheckConstraint("file_sha256 ~ '^[0-9a-f]{64}$'", name="file_sha256_shape"),
        {"schema": SCHEMA},
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(always=True), primary_key=True)
    file_name: Mapped[str] = mapped_column(Text)
    file_sha256: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime]
    report: Mapped[dict] = mapped_column(JSONB)
