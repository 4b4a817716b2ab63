"""A real SMTP server for tests (aiosmtpd on 127.0.0.1), collecting what it receives."""

from __future__ import annotations

import email
import socket
import time
from collections.abc import Iterator
from email.message import Message

from aiosmtpd.controller import Controller


class _Collector:
    def __init__(self) -> None:
        self.messages: list[Message] = []

    async def handle_DATA(self, server, session, envelope):
        self.messages.append(email.message_from_bytes(envelope.content))
        return "250 OK"


class SmtpServer:
    def __init__(self) -> None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._collector = _Collector()
        self._controller = Controller(self._collector, hostname="127.0.0.1", port=self.port)

    @property
    def messages(self) -> list[Message]:
        return self._collector.messages

    def start(self) -> None:
        self._controller.start()

    def stop(self) -> None:
        self._controller.stop()

    def wait_for(self, count: int, timeout: float = 10.0) -> list[Message]:
        deadline = time.monotonic() + timeout
        while len(self.messages) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.messages


def running_smtp_server() -> Iterator[SmtpServer]:
    server = SmtpServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()
