"""Card definitions as the API shows them (no database: the provider answers)."""

from __future__ import annotations

from tenet.reservations.cards.definitions import CardDefinition, FieldDefinition
from tenet.reservations.cards.provider import PROVIDER, TaskCardFieldDefinitionProvider
from tenet.reservations.schemas import (
    CardRuleRead,
    FieldDefinitionRead,
    TaskCardDefinitionList,
    TaskCardDefinitionRead,
    TaskCardDefinitionSummary,
)


def _field(definition: FieldDefinition) -> FieldDefinitionRead:
    return FieldDefinitionRead(
        key=definition.key, label=definition.label, type=definition.type.value, required=definition.required,
        editable=definition.editable, max_length=definition.max_length,
        min=None if definition.min is None else str(definition.min),
        max=None if definition.max is None else str(definition.max), pattern=definition.pattern,
        enum_values=list(definition.enum_values), item_fields=[_field(f) for f in definition.item_fields],
        min_items=definition.min_items, max_items=definition.max_items, source_path=definition.source_path,
        default=definition.default, description=definition.description)


def as_read(definition: CardDefinition, provider: TaskCardFieldDefinitionProvider = PROVIDER) -> TaskCardDefinitionRead:
    return TaskCardDefinitionRead(
        task_card_type=definition.task_card_type, field_contract_version=definition.field_contract_version,
        current=definition.field_contract_version == provider.current_version(definition.task_card_type),
        confirmable=definition.confirmable, fields=[_field(f) for f in definition.fields],
        rules=[CardRuleRead(code=r.code.value, fields=list(r.fields), description=r.description)
               for r in definition.rules])


def read(task_card_type: str, version: str | None,
         provider: TaskCardFieldDefinitionProvider = PROVIDER) -> TaskCardDefinitionRead:
    return as_read(provider.definition(task_card_type, version), provider)


def listing(provider: TaskCardFieldDefinitionProvider = PROVIDER) -> TaskCardDefinitionList:
    items = []
    for card_type in provider.card_types():
        current = provider.definition(card_type)
        items.append(TaskCardDefinitionSummary(task_card_type=card_type,
                                               field_contract_version=current.field_contract_version,
                                               versions=list(provider.versions(card_type)),
                                               confirmable=current.confirmable))
    return TaskCardDefinitionList(items=items)
