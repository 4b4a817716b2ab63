"""What /metrics tells an operator beyond request counts (issue 21, "Also"): how long checkouts wait for a pooled
connection, the pool's overflow, the job queue's ready depth and oldest age, the outbox's due backlog and its age,
all on the real database; and that the scrape's database part is bounded and its gauges appear once per scrape in
multi-process mode."""

from __future__ import annotations

import os
import subprocess
import sys


def test_scrape_gauges_appear_once_per_scrape_in_multi_process_mode(tmp_path):
    """`tenet serve --workers N`: gauges computed at scrape time must not be kept in the processes' shared files,
    where the next scrape would read them back (with a pid label, frozen) beside the fresh ones."""
    script = ("from tenet.observability import render_metrics\n"
              "for up in (0.0, 1.0):\n"
              "    text = render_metrics({'tenet_database_up': ('help', [({}, up)])}).decode()\n"
              "print(text)\n")
    env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(tmp_path)}
    second = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60,
                            check=True).stdout
    assert second.count("# TYPE tenet_database_up gauge") == 1, second
    assert [line for line in second.splitlines() if line.startswith("tenet_database_up")] == ["tenet_database_up 1.0"]
