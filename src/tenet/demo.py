"""`tenet demo`: demo data for every system that has landed. Safe to run again."""

from __future__ import annotations

from tenet.db.database import Database
from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.kernel.audit import Actor
from tenet.kernel.clock import SystemClock
from tenet.settings import Settings

DEMO_PASSWORD = "demo-password-1"
DEMO_USERS = [
    ("manager@demo.example.com", "Mina Manager", [Role.MEETING_MANAGER]),
    ("leader@demo.example.com", "Leo Leader", [Role.LEADER]),
    ("employee@demo.example.com", "Emil Employee", [Role.EMPLOYEE]),
    ("agent@demo.example.com", "Rita Reservations", [Role.RESERVATION_AGENT]),
]


async def load_demo(settings: Settings, url: str) -> list[str]:
    db = Database.from_url(url, pool_size=1, max_overflow=0)
    passwords = Passwords(time_cost=settings.password_hash_time_cost, memory_kib=settings.password_hash_memory_kib)
    now = SystemClock().now()
    lines = []
    try:
        async with db.unit_of_work() as session:
            for email, name, roles in DEMO_USERS:
                if await iam_service.find_user_by_email(session, email) is None:
                    await iam_service.create_user(session, passwords=passwords, email=email, password=DEMO_PASSWORD,
                                                  display_name=name, now=now, actor=Actor.system(), roles=roles)
                    lines.append(f"created {email} ({', '.join(roles)}) with password {DEMO_PASSWORD}")
                else:
                    lines.append(f"kept {email}")
    finally:
        await db.dispose()
    return lines
