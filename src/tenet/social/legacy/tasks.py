"""The worker's side of the dual write (issue 20): every minute, while `TENET_SOCIAL_LEGACY_SYNC` is on, the legacy
change log is applied as `tenet social legacy sync` applies it (one sync at a time across workers and the
command: a busy log is skipped until the next minute)."""

from __future__ import annotations

import secrets

import procrastinate
import psycopg

from tenet.db.database import libpq_url
from tenet.iam.passwords import Passwords
from tenet.iam.settings import IamSettings
from tenet.kernel.jobs import JobScope, job
from tenet.kernel.settings import KernelSettings, section
from tenet.social.legacy import sync
from tenet.social.legacy.engine import Context
from tenet.social.settings import SocialSettings

blueprint = procrastinate.Blueprint()


@job(blueprint, name="social_legacy_sync", cron="* * * * *", unit_of_work=False, history=True)
async def social_legacy_sync(scope: JobScope, timestamp: int) -> dict[str, int]:
    own = section(scope.settings, SocialSettings)
    if not own.social_legacy_sync:
        return {"off": 1}
    iam, kernel = section(scope.settings, IamSettings), section(scope.settings, KernelSettings)
    url = own.social_legacy_url or scope.db.engine.url.render_as_string(hide_password=False)
    passwords = Passwords(time_cost=iam.password_hash_time_cost, memory_kib=iam.password_hash_memory_kib)
    ctx = Context(now=scope.now, password_hash=await passwords.hash(secrets.token_urlsafe(32)),
                  default_timezone=kernel.default_timezone)
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as legacy:
        try:
            applied, refused = await sync.apply_log(scope.db, legacy, ctx)
        except sync.SyncBusy:
            return {"busy": 1}
    return {"applied": applied, "refused": refused}
