"""A real SMTP server for tests (aiosmtpd on 127.0.0.1), collecting what it receives.

`delay` makes it slow (seconds per message, before it answers DATA), as a distant or loaded server is;
`smtputf8` makes it offer SMTPUTF8 (RFC 6531). Each message is kept with its envelope.
"""

from __future__ import annotations

import asyncio
import email
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message

from aiosmtpd.controller import Controller


@dataclass(frozen=True)
class Received:
    message: Message
    mail_from: str
    rcpt_tos: list[str]
    mail_options: list[str]


class _Collector:
    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.received: list[Received] = []
        self._lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):
        if self.delay:
            await asyncio.sleep(self.delay)
        with self._lock:
            self.received.append(Received(email.message_from_bytes(envelope.content), envelope.mail_from,
                                          list(envelope.rcpt_tos), list(envelope.mail_options)))
        return "250 OK"


class SmtpServer:
    def __init__(self, *, delay: float = 0.0, smtputf8: bool = False) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._collector = _Collector(delay)
        self._controller = Controller(self._collector, hostname="127.0.0.1", port=self.port,
                                      enable_SMTPUTF8=smtputf8)

    @property
    def received(self) -> list[Received]:
        return list(self._collector.received)

    @property
    def messages(self) -> list[Message]:
        return [r.message for r in self._collector.received]

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Message]:
        deadline = time.monotonic() + timeout
        while len(self._collector.received) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.messages


def running_smtp_server(**options) -> Iterator[SmtpServer]:
    server = SmtpServer(**options)
    server.start()
    try:
        yield server
    finally:
        server.stop()
