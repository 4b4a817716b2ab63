"""The social domain's declaration to the composition root (tenet.domains)."""

from tenet.kernel.domain import Domain
from tenet.social.settings import SocialSettings

DOMAIN = Domain(
    name="social",
    schema="social",
    settings=SocialSettings,
    modules=("tenet.social.models", "tenet.social.invariants", "tenet.social.lifecycles"),
    api="tenet.social.api",
    jobs=("tenet.social.tasks", "tenet.social.legacy.tasks"),
    events="tenet.social.events",
    locks=(
        "iam.user_account FOR SHARE (the other accounts a command writes for, id order; identity's helper)",
        "social.automation_jobs (one owner's, id order)",
        "social.schedule_items (id order; FOR UPDATE by every item-scoped command)",
        "social.groups (id order; FOR UPDATE by group commands, FOR SHARE by item commands deciding permission)",
        "social.friendships (the pair's row, FOR UPDATE)",
        "social.automation_runs (claim FOR UPDATE SKIP LOCKED; execution FOR UPDATE)",
    ),
)
