"""The legacy system's tables as its Prisma schema (SQLite provider) creates them: models mapped to the spec's
snake_case table names (§数据迁移与同步), fields in Prisma's camelCase, ids `cuid()` text (meetings VarChar(32)),
`DateTime` stored as integer milliseconds since the epoch (Prisma's SQLite encoding). The spec names the tables,
the roles and `qrCodeOnline` / `qrCodeOffline`; the other columns are the assumption written down in
docs/legacy-meeting-attendance.md. Foreign keys are declared, but SQLite enforces them only with
`PRAGMA foreign_keys = ON`, which a Prisma dev.db edited by hand or by scripts did not always have: the
importer trusts none of them.
"""

from __future__ import annotations

# Per table: the columns the importer needs (a file without one is refused as a whole) and those it reads when
# present.
REQUIRED: dict[str, tuple[str, ...]] = {
    "users": ("id", "email", "role"),
    "meeting_series": ("id", "title", "recurrenceRule", "startTime", "endTime"),
    "meetings": ("id", "title", "startTime", "endTime"),
    "meeting_required_attendees": ("id", "meetingId", "userId"),
    "attendances": ("id", "meetingId", "userId", "status"),
    "templates": ("id", "name", "title"),
    "template_attendees": ("id", "templateId", "userId"),
    "audit_logs": ("id", "action", "entityType", "createdAt"),
}
OPTIONAL: dict[str, tuple[str, ...]] = {
    "users": ("name", "createdAt", "updatedAt"),
    "meeting_series": ("description", "location", "city", "timezone", "lateGraceMinutes", "organizerId",
                       "createdById", "deletedAt", "createdAt", "updatedAt"),
    "meetings": ("description", "location", "onlineLink", "city", "timezone", "status", "lateGraceMinutes",
                 "seriesId", "templateId", "organizerId", "createdById", "qrCodeOnline", "qrCodeOffline",
                 "cancelledAt", "cancelReason", "deletedAt", "createdAt", "updatedAt"),
    "meeting_required_attendees": ("email", "name", "createdAt"),
    "attendances": ("guestName", "guestEmail", "guestPhone", "guestOrganization", "checkInTime", "checkInMode",
                    "deviceId", "note", "createdAt", "updatedAt"),
    "templates": ("description", "location", "city", "timezone", "durationMinutes", "lateGraceMinutes",
                  "createdById", "deletedAt", "createdAt", "updatedAt"),
    "template_attendees": ("email", "createdAt"),
    "audit_logs": ("entityId", "userId", "meetingId", "changes", "ipAddress", "userAgent"),
}

# What `prisma migrate` wrote for the schema above (the sample generator creates files with it).
DDL = """
CREATE TABLE "users" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "email" TEXT NOT NULL,
    "name" TEXT,
    "role" TEXT NOT NULL DEFAULT 'EMPLOYEE',
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL
);
CREATE UNIQUE INDEX "users_email_key" ON "users"("email");
CREATE TABLE "meeting_series" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "title" TEXT NOT NULL,
    "description" TEXT,
    "location" TEXT,
    "city" TEXT,
    "timezone" TEXT,
    "recurrenceRule" TEXT NOT NULL,
    "startTime" DATETIME NOT NULL,
    "endTime" DATETIME NOT NULL,
    "lateGraceMinutes" INTEGER NOT NULL DEFAULT 5,
    "organizerId" TEXT,
    "createdById" TEXT,
    "deletedAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "meeting_series_organizerId_fkey" FOREIGN KEY ("organizerId") REFERENCES "users" ("id")
);
CREATE TABLE "meetings" (
    "id" VARCHAR(32) NOT NULL PRIMARY KEY,
    "title" TEXT NOT NULL,
    "description" TEXT,
    "location" TEXT,
    "onlineLink" TEXT,
    "city" TEXT,
    "startTime" DATETIME NOT NULL,
    "endTime" DATETIME NOT NULL,
    "timezone" TEXT,
    "status" TEXT NOT NULL DEFAULT 'SCHEDULED',
    "lateGraceMinutes" INTEGER NOT NULL DEFAULT 5,
    "seriesId" TEXT,
    "templateId" TEXT,
    "organizerId" TEXT,
    "createdById" TEXT,
    "qrCodeOnline" TEXT,
    "qrCodeOffline" TEXT,
    "cancelledAt" DATETIME,
    "cancelReason" TEXT,
    "deletedAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "meetings_seriesId_fkey" FOREIGN KEY ("seriesId") REFERENCES "meeting_series" ("id"),
    CONSTRAINT "meetings_organizerId_fkey" FOREIGN KEY ("organizerId") REFERENCES "users" ("id")
);
CREATE TABLE "meeting_required_attendees" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "meetingId" VARCHAR(32) NOT NULL,
    "userId" TEXT,
    "email" TEXT,
    "name" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "meeting_required_attendees_meetingId_fkey" FOREIGN KEY ("meetingId") REFERENCES "meetings" ("id"),
    CONSTRAINT "meeting_required_attendees_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users" ("id")
);
CREATE TABLE "attendances" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "meetingId" VARCHAR(32) NOT NULL,
    "userId" TEXT,
    "guestName" TEXT,
    "guestEmail" TEXT,
    "guestPhone" TEXT,
    "guestOrganization" TEXT,
    "status" TEXT NOT NULL,
    "checkInTime" DATETIME,
    "checkInMode" TEXT,
    "deviceId" TEXT,
    "note" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL,
    CONSTRAINT "attendances_meetingId_fkey" FOREIGN KEY ("meetingId") REFERENCES "meetings" ("id"),
    CONSTRAINT "attendances_userId_fkey" FOREIGN KEY ("userId") REFERENCES "users" ("id")
);
CREATE TABLE "templates" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "name" TEXT NOT NULL,
    "title" TEXT NOT NULL,
    "description" TEXT,
    "location" TEXT,
    "city" TEXT,
    "timezone" TEXT,
    "durationMinutes" INTEGER NOT NULL DEFAULT 60,
    "lateGraceMinutes" INTEGER NOT NULL DEFAULT 5,
    "createdById" TEXT,
    "deletedAt" DATETIME,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    "updatedAt" DATETIME NOT NULL
);
CREATE TABLE "template_attendees" (
    "id" TEXT NOT NULL PRIMARY KEY,
    "templateId" TEXT NOT NULL,
    "userId" TEXT,
    "email" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    CONSTRAINT "template_attendees_templateId_fkey" FOREIGN KEY ("templateId") REFERENCES "templates" ("id")
);
CREATE TABLE "audit_logs" (
    "id" INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    "action" VARCHAR(100) NOT NULL,
    "entityType" TEXT NOT NULL,
    "entityId" TEXT,
    "userId" TEXT,
    "meetingId" TEXT,
    "changes" TEXT,
    "ipAddress" TEXT,
    "userAgent" TEXT,
    "createdAt" DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP
);
"""
