"""The meeting agenda v1.0 (spec 001 §议程能力架构, issue 11): sections, items, upload tasks, item- and meeting-level
attachments, their storage, purge and restore. Same schema and audit log as the meetings core."""
