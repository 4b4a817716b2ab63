"""Automations (spec 000 §C.7, §F; SOC-INV-19..21): daily or weekly jobs of a user, runs executed exactly once.

`registry` says what a job can do and when its slots fall, `commands` changes jobs (one unit of work each),
`runs` materialises and executes runs (the scheduler and the drainer), `effects` is what each job type does.
This package answers the names the rest of the service uses.
"""

from tenet.social.automations.commands import (
    create_job,
    delete_job,
    reschedule_owner,
    run_now,
    set_enabled,
    update_job,
)
from tenet.social.automations.effects import EFFECTS, Claim, Effect, PermanentError
from tenet.social.automations.registry import REGISTRY, JobType, Param, next_slot, param, validated_params
from tenet.social.automations.runs import backoff, claim, drain, execute_batch, materialise, recover, schedule

__all__ = [
    "EFFECTS", "REGISTRY", "Claim", "Effect", "JobType", "Param", "PermanentError", "backoff", "claim", "create_job",
    "delete_job", "drain", "execute_batch", "materialise", "next_slot", "param", "recover", "reschedule_owner",
    "run_now", "schedule", "set_enabled", "update_job", "validated_params",
]
