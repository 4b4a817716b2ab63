"""The read switch as a gateway or the old app asks it (issue 20, spec 000 §G phase 3): which side one user reads
from while the social app is cut over (docs/legacy-social.md). API clients need the scope
`social:cutover:read`; a signed-in user may ask about themselves (anyone else answers 404)."""

from __future__ import annotations

import uuid
from typing import Literal

from fastapi import Path
from pydantic import BaseModel

from tenet.deps import SessionDep
from tenet.iam.auth import CurrentPrincipal
from tenet.iam.errors import UserNotFound
from tenet.iam.permissions import Scope
from tenet.kernel.errors import PermissionDenied, ValidationFailed
from tenet.kernel.http import problem_responses
from tenet.social.api._common import social_router
from tenet.social.legacy import cutover

router = social_router()


class CutoverSide(BaseModel):
    user_id: uuid.UUID | None  # the Tenet account (None: a legacy user never migrated)
    legacy_user_id: int | None
    bucket: int | None  # 0..99, stable: the user reads from Tenet when bucket < read_percent
    read_percent: int
    reads_from: Literal["tenet", "legacy"]


@router.get("/cutover/users/{user}", response_model=CutoverSide, summary="Which side a user reads from",
            description="`user` is a Tenet account id or a legacy user id (digits). The answer follows the read "
                        "switch (`tenet social legacy cutover --percent N`) at once, no restart.",
            responses=problem_responses(422))
async def cutover_side(principal: CurrentPrincipal, session: SessionDep,
                       user: str = Path(max_length=64)) -> CutoverSide:
    try:
        asked = cutover.parse_user(user)
    except ValueError:
        raise ValidationFailed("user is a Tenet account id (UUID) or a legacy user id (digits)",
                               errors=[{"loc": ["path", "user"], "msg": "not a user id", "type": "value_error"}]
                               ) from None
    if not principal.is_user and not principal.has_scope(Scope.SOCIAL_CUTOVER_READ):
        raise PermissionDenied(f"Requires the scope {Scope.SOCIAL_CUTOVER_READ}", scope=str(Scope.SOCIAL_CUTOVER_READ))
    side = await cutover.side_of(session, asked)
    if side is None or (principal.is_user and side.user_id != principal.id):
        raise UserNotFound()
    return CutoverSide(user_id=side.user_id, legacy_user_id=side.legacy_user_id, bucket=side.bucket,
                       read_percent=side.read_percent, reads_from=side.reads_from)
