"""`TaskCardFieldDefinitionProvider` (spec §9): the one place that knows card fields.

Services and routes ask the provider; nothing else holds field lists. The code provider serves the
contracts of `contract.py`; a provider reading database configuration implements the same protocol and
replaces it (`PROVIDER`) without touching the task flow.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from tenet.reservations.cards.contract import CURRENT_VERSION, DEFINITIONS
from tenet.reservations.cards.definitions import CardDefinition
from tenet.reservations.errors import TaskCardContractVersionUnknown, TaskCardTypeUnknown


class TaskCardFieldDefinitionProvider(Protocol):
    def card_types(self) -> Sequence[str]: ...

    def current_version(self, task_card_type: str) -> str: ...

    def versions(self, task_card_type: str) -> Sequence[str]:
        """Every version a stored card of this type may still carry (the current one included)."""
        ...

    def definition(self, task_card_type: str, version: str | None = None) -> CardDefinition:
        """The definition of a version (None: the current one); 404 errors for unknown types and versions."""
        ...


class CodeTaskCardFieldDefinitionProvider:
    def __init__(self, definitions: dict[tuple[str, str], CardDefinition], current: str) -> None:
        self._definitions = definitions
        self._current = current

    def card_types(self) -> Sequence[str]:
        return sorted({card_type for card_type, _ in self._definitions})

    def current_version(self, task_card_type: str) -> str:
        if (task_card_type, self._current) not in self._definitions:
            raise TaskCardTypeUnknown(task_card_type=task_card_type[:64])
        return self._current

    def versions(self, task_card_type: str) -> Sequence[str]:
        return sorted(v for t, v in self._definitions if t == task_card_type)

    def definition(self, task_card_type: str, version: str | None = None) -> CardDefinition:
        wanted = version or self.current_version(task_card_type)
        found = self._definitions.get((task_card_type, wanted))
        if found is None:
            self.current_version(task_card_type)  # an unknown type answers TASK_CARD_TYPE_UNKNOWN first
            raise TaskCardContractVersionUnknown(task_card_type=task_card_type, field_contract_version=wanted[:64])
        return found

    def known_pairs(self) -> list[tuple[str, str]]:
        return sorted(self._definitions)


PROVIDER = CodeTaskCardFieldDefinitionProvider(DEFINITIONS, CURRENT_VERSION)
