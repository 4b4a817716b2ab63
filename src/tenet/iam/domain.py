"""Identity's declaration to the composition root (tenet.domains)."""

from tenet.iam.permissions import POINTS
from tenet.iam.settings import IamSettings
from tenet.kernel.domain import Domain

DOMAIN = Domain(
    name="iam",
    schema="iam",
    settings=IamSettings,
    modules=("tenet.iam.models", "tenet.iam.invariants", "tenet.iam.lifecycles"),
    api="tenet.iam.api",
    permissions=POINTS,
    locks=("iam.user_account (an account, FOR UPDATE to change its state, FOR SHARE to rely on it being active)",
           "iam.role Administrator (every change that could remove the last Administrator)"),
)
