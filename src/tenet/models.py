"""Imports every domain's tables and invariants so the metadata and registries are complete.

Alembic's env and the invariant tooling import this module; add a domain here when it arrives.
"""

