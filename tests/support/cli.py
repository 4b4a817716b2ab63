"""The `tenet` command as a test runs it: a real subprocess (`run_cli`), and the demo loaded twice on a fresh
database (`demo_loaded_twice`), as the demo tests of every domain start."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tenet.demo import load_demo


def run_cli(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """`python -m tenet <args>` with this environment (and `env_extra`); its output captured, never raising."""
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run([sys.executable, "-m", "tenet", *args], capture_output=True, text=True, env=env,
                          timeout=120, check=False)


def demo_loaded_twice(migrated_database: Callable[[str], str], tmp_path: Path,
                      name: str) -> tuple[str, list[str], list[str]]:
    """A new database `name` migrated to head, `tenet demo` loaded on it twice: (its URL, the first run's report
    lines, the second's). Synchronous: alembic and the loader run their own event loops."""
    from tests.conftest import test_settings

    url = migrated_database(name)
    settings = test_settings(data_dir=tmp_path)
    first = asyncio.run(load_demo(settings, url))
    second = asyncio.run(load_demo(settings, url))
    return url, first, second
