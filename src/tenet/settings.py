"""`Settings`: the kernel's section and every domain's, as one class read from the environment (and `.env`).

The names are part of the contract (API.md, "Running it"). Each section lives with its owner
(`tenet.kernel.settings.KernelSettings`, `tenet.iam.settings.IamSettings`, ...) and is declared in the
domain's `Domain`; this module only composes them. Kernel and domain code type against their own section,
never against this class (see `tenet.kernel.settings.section`); only boundaries import it.
"""

from __future__ import annotations

from functools import lru_cache

from tenet.domains import DOMAINS
from tenet.kernel.settings import KernelSettings, Rate, compose, section

Settings = compose([domain.settings for domain in DOMAINS if domain.settings])

__all__ = ["KernelSettings", "Rate", "Settings", "get_settings", "section"]


@lru_cache
def get_settings() -> KernelSettings:
    return Settings()
