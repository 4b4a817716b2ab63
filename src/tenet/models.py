"""Imports every domain's tables and invariants so the metadata and registries are complete.

Alembic's env and the invariant tooling import this module; add a domain here when it arrives.
"""

import tenet.iam.invariants  # noqa: F401
import tenet.iam.models  # noqa: F401
import tenet.kernel.models  # noqa: F401
import tenet.kernel.rules  # noqa: F401
