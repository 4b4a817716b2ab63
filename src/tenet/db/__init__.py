"""Engine, sessions, the embedded server and migrations."""

from tenet.db.database import Database, after_commit

__all__ = ["Database", "after_commit"]
