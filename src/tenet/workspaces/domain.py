"""The workspaces domain's declaration to the composition root (tenet.domains)."""

from tenet.kernel.domain import Domain
from tenet.workspaces.settings import WorkspaceSettings

DOMAIN = Domain(
    name="workspaces",
    schema="workspace",
    settings=WorkspaceSettings,
    modules=("tenet.workspaces.models", "tenet.workspaces.invariants", "tenet.workspaces.lifecycles"),
    api="tenet.workspaces.api",
    jobs=("tenet.workspaces.tasks",),
    events="tenet.workspaces.events",
    locks=("workspace.workspace (the serialisation point of one workspace; several in id order)",),
)
