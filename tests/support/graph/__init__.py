"""A Microsoft Graph emulator (placeholder docstring, replaced below)."""

from tests.support.graph.server import GraphEmulator, running_emulator

__all__ = ["GraphEmulator", "running_emulator"]
