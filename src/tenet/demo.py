"""`tenet demo`: demo data for every system that has landed. Safe to run again."""

from __future__ import annotations

from tenet.db.database import Database
from tenet.iam import service as iam_service
from tenet.iam.passwords import Passwords
from tenet.iam.permissions import Role
from tenet.iam.settings import IamSettings
from tenet.kernel.audit import Actor
from tenet.kernel.clock import SystemClock
from tenet.kernel.outbox import install_delivery
from tenet.kernel.pagination import MAX_LIMIT, PageParams
from tenet.kernel.settings import KernelSettings, section
from tenet.kernel.statements import statements
from tenet.reservations import demo as reservations_demo
from tenet.workspaces import invitations, workspaces
from tenet.workspaces import queries as workspace_queries
from tenet.workspaces.permissions import InvitationRole

DEMO_PASSWORD = "demo-password-1"
DEMO_USERS = [
    ("manager@demo.example.com", "Mina Manager", [Role.MEETING_MANAGER]),
    ("leader@demo.example.com", "Leo Leader", [Role.LEADER]),
    ("employee@demo.example.com", "Emil Employee", [Role.EMPLOYEE]),
    ("agent@demo.example.com", "Rita Reservations", [Role.RESERVATION_AGENT]),
]
DEMO_WORKSPACE = "Demo workspace"
# Joined through invitations they accepted, as a real team would.
DEMO_WORKSPACE_MEMBERS = [("leader@demo.example.com", InvitationRole.ADMIN),
                          ("employee@demo.example.com", InvitationRole.MEMBER)]
DEMO_PENDING_INVITATION = "guest@demo.example.com"


async def load_demo(settings: KernelSettings, url: str) -> list[str]:
    db = Database.from_url(url, pool_size=1, max_overflow=0, watch_outages=False, prepare=settings.server_side_prepare)
    iam = section(settings, IamSettings)
    passwords = Passwords(time_cost=iam.password_hash_time_cost, memory_kib=iam.password_hash_memory_kib)
    now = SystemClock().now()
    lines = []
    try:
        # A CLI boundary: the pending invitation mail is logged only where SMTP is not configured.
        with install_delivery(settings.mail()):
            async with db.unit_of_work() as session:
                for email, name, roles in DEMO_USERS:
                    if await iam_service.find_user_by_email(session, email) is None:
                        await iam_service.create_user(session, passwords=passwords, email=email, password=DEMO_PASSWORD,
                                                      display_name=name, now=now, actor=Actor.system(), roles=roles)
                        lines.append(f"created {email} ({', '.join(roles)}) with password {DEMO_PASSWORD}")
                    else:
                        lines.append(f"kept {email}")
                lines.append(await _load_workspace_demo(session, settings, now))
                lines.append(await _load_meetings_demo(session, settings, now))
                lines.append(await _load_social_demo(session, settings, now))
            lines.extend(await reservations_demo.load(db, now=now))
    finally:
        await db.dispose()
    return lines


async def _load_workspace_demo(session, settings: KernelSettings, now) -> str:
    """A workspace owned by the demo manager, with an admin and a member who joined by invitation and one
    pending invitation (its mail waits in the outbox)."""
    manager = await iam_service.find_user_by_email(session, DEMO_USERS[0][0])
    assert manager is not None
    mine, _ = await workspace_queries.workspaces(await statements(session), principal_id=manager.id,
                                                 page=PageParams(limit=MAX_LIMIT))
    if any(workspace["name"] == DEMO_WORKSPACE for workspace in mine):
        return f"kept workspace {DEMO_WORKSPACE!r}"
    policy = invitations.InvitationPolicy.from_settings(settings)
    workspace = await workspaces.create_workspace(session, name=DEMO_WORKSPACE, principal_id=manager.id, now=now)
    for email, role in DEMO_WORKSPACE_MEMBERS:
        person = await iam_service.find_user_by_email(session, email)
        assert person is not None
        _, token = await invitations.create_invitation(
            session, workspace_id=workspace.id, principal_id=manager.id, email=email, role=role, policy=policy,
            now=now)
        await invitations.accept_invitation(session, token=token, principal_id=person.id, now=now)
    await invitations.create_invitation(session, workspace_id=workspace.id, principal_id=manager.id,
                                        email=DEMO_PENDING_INVITATION, role=InvitationRole.MEMBER, policy=policy,
                                        now=now)
    return (f"created workspace {DEMO_WORKSPACE!r} owned by {DEMO_USERS[0][0]} with 2 members and a pending "
            f"invitation to {DEMO_PENDING_INVITATION}")


async def _load_meetings_demo(session, settings: KernelSettings, now) -> str:
    from tenet.meetings import demo as meetings_demo
    from tenet.meetings.service import MeetingPolicy

    found = [await iam_service.find_user_by_email(session, email) for email, _, _ in DEMO_USERS[:3]]
    people = [person for person in found if person is not None]
    assert len(people) == 3
    return await meetings_demo.load_demo(session, manager_id=people[0].id, leader_id=people[1].id,
                                         employee_id=people[2].id, policy=MeetingPolicy.from_settings(settings),
                                         now=now)


async def _load_social_demo(session, settings: KernelSettings, now) -> str:
    """Friends, a group, shared items, an inbox and todos among the demo users (tenet.social.demo)."""
    from tenet.social import demo as social_demo

    people = []
    for email, _, _ in DEMO_USERS:
        person = await iam_service.find_user_by_email(session, email)
        assert person is not None
        people.append(person.id)
    manager, leader, employee, agent = people
    return await social_demo.load(session, manager=manager, leader=leader, employee=employee, agent=agent,
                                  default_timezone=settings.default_timezone, now=now)
