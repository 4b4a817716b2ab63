"""The legacy meeting-attendance system's SQLite `dev.db` (spec 001 §数据迁移与同步, issue 20): its assumed Prisma
schema (`schema`), a reader (`source`), a generator of sample files (`sample`), the repeatable import (`importer`)
and the QR regeneration (`qr`). docs/legacy-meeting-attendance.md describes the tables and the mapping."""
