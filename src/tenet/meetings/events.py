"""Events of meeting attendance."""

HANDLERS: dict = {}
