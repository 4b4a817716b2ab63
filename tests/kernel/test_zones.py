"""IANA zone names: what zoneinfo loads but is no zone in use is refused, and nothing scans the disk per call."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tenet.kernel.zones import is_iana_zone, load_zone, zone_names

SRC = Path(__file__).resolve().parents[2] / "src" / "tenet"
ACCEPTED = ["Asia/Shanghai", "UTC", "America/Argentina/Buenos_Aires", "Europe/Paris", "Asia/Calcutta", "Etc/GMT+5"]
# All of these load with zoneinfo on a Linux host.
REFUSED = ["right/UTC", "posix/Asia/Shanghai", "posix/Europe/Paris", "localtime", "Factory", "posixrules",
           "", "PST", "Mars/Olympus", "../etc/passwd", "/etc/localtime", "asia/shanghai"]


@pytest.mark.parametrize("name", ACCEPTED)
def test_iana_names_are_accepted(name):
    assert is_iana_zone(name) and load_zone(name).key == name


@pytest.mark.parametrize("name", REFUSED)
def test_other_names_are_refused(name):
    assert not is_iana_zone(name)
    with pytest.raises(ValueError):
        load_zone(name)


def test_the_names_are_read_once():
    assert zone_names() is zone_names() and len(zone_names()) > 500


def test_no_module_lists_the_zones_from_disk():
    """`zoneinfo.available_timezones()` walks the zone directories on every call: use kernel.zones."""
    callers = []
    for path in SRC.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom | ast.Attribute | ast.Name) and "available_timezones" in (
                    [a.name for a in node.names] if isinstance(node, ast.ImportFrom)
                    else [getattr(node, "attr", None) or getattr(node, "id", None)]):
                callers.append(str(path.relative_to(SRC)))
    assert callers == []
