"""The log's two shapes (tenet.observability): one readable line per record for a person, JSON otherwise."""

from __future__ import annotations

import logging

import pytest

from tenet.observability import ConsoleFormatter, console_wanted


def _record(message: str, **extra) -> logging.LogRecord:
    record = logging.LogRecord("tenet.test", logging.INFO, __file__, 1, message, None, None)
    record.__dict__.update(extra)
    return record


def test_a_message_over_several_lines_is_one_line_with_its_extra_fields():
    line = ConsoleFormatter().format(_record("erased\n   guest data\n", guests=3, request_id="r-1"))
    assert "\n" not in line
    assert line.endswith("INFO    tenet.test: erased guest data  request_id=r-1 guests=3")


def test_a_traceback_follows_its_record_on_lines_of_its_own():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        record = logging.LogRecord("tenet.test", logging.ERROR, __file__, 1, "failed", None, sys.exc_info())
    first, *rest = ConsoleFormatter().format(record).splitlines()
    assert first.endswith("ERROR   tenet.test: failed") and rest[-1] == "ValueError: boom"


@pytest.mark.parametrize(("fmt", "terminal", "console"), [
    ("auto", True, True), ("auto", False, False), ("json", True, False), ("console", False, True)])
def test_auto_is_console_on_a_terminal_only(monkeypatch, fmt, terminal, console):
    monkeypatch.setattr("sys.stdout.isatty", lambda: terminal)
    assert console_wanted(fmt) is console
