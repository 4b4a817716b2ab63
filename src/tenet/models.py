"""Imports every domain's tables and invariants so the metadata and registries are complete.

Alembic's env and the invariant tooling import this module; add a domain here when it arrives.
"""

import tenet.iam.invariants
import tenet.iam.lifecycles
import tenet.iam.models
import tenet.kernel.models
import tenet.kernel.rules
import tenet.workspaces.invariants
import tenet.workspaces.lifecycles
import tenet.workspaces.models  # noqa: F401
