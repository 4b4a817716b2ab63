"""What an import run did, per legacy table: read, inserted, updated, unchanged, removed, skipped, refused (with
the reasons), conflicts (Tenet-side changes kept, with the reasons) and notes (rows imported with an adjustment,
said so). Printed at the end of every run and kept in legacy_import_runs."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from tenet.meetings.legacy.models import LEGACY_TABLES

COUNTS = ("read", "inserted", "updated", "unchanged", "removed", "skipped")
LISTED = 20  # lines of each list printed per table; the run's stored report keeps them all


@dataclass
class TableReport:
    read: int = 0
    inserted: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: int = 0
    refused: list[tuple[str, str]] = field(default_factory=list)
    conflicts: list[tuple[str, str]] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)
    skipped_reasons: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0  # how long the table's pass over the file took

    def skip(self, reason: str) -> None:
        self.skipped += 1
        self.skipped_reasons[reason] = self.skipped_reasons.get(reason, 0) + 1

    def as_dict(self) -> dict[str, Any]:
        return {**{name: getattr(self, name) for name in COUNTS}, "seconds": round(self.seconds, 3),
                "refused": [list(r) for r in self.refused], "conflicts": [list(c) for c in self.conflicts],
                "notes": [list(n) for n in self.notes], "skipped_reasons": self.skipped_reasons}


@dataclass
class Report:
    dry_run: bool = False
    tables: dict[str, TableReport] = field(default_factory=lambda: {t: TableReport() for t in LEGACY_TABLES})
    qr_codes: int = 0
    qr_seconds: float = 0.0

    def __getitem__(self, table: str) -> TableReport:
        return self.tables[table]

    def changed(self) -> int:
        return sum(t.inserted + t.updated + t.removed for t in self.tables.values())

    def as_dict(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run, "qr_codes": self.qr_codes, "qr_seconds": round(self.qr_seconds, 3),
                "tables": {name: table.as_dict() for name, table in self.tables.items()}}

    def lines(self) -> Iterable[str]:
        """The plain-text report (the command prints it; a dry run's is the plan)."""
        yield ("Plan (dry run: nothing was written)" if self.dry_run else "Import report")
        yield f"{'table':<28}" + "".join(f"{c:>10}" for c in (*COUNTS, "refused", "conflicts", "seconds"))
        for name, t in self.tables.items():
            yield (f"{name:<28}" + "".join(f"{getattr(t, c):>10}" for c in COUNTS)
                   + f"{len(t.refused):>10}{len(t.conflicts):>10}{t.seconds:>10.1f}")
        yield (f"QR codes regenerated for {self.qr_codes} meeting(s) in {self.qr_seconds:.1f} s (the others' codes "
               "encode the current address already)")
        for name, t in self.tables.items():
            for title, items in (("refused", t.refused), ("conflict", t.conflicts), ("note", t.notes)):
                for key, reason in items[:LISTED]:
                    yield f"  {name} {key}: {title}: {reason}"
                if len(items) > LISTED:
                    yield f"  {name}: {len(items) - LISTED} more {title} line(s) in legacy_import_runs"
            for reason, count in t.skipped_reasons.items():
                yield f"  {name}: skipped {count}: {reason}"
