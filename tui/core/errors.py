"""The one error the core raises for a value it does not accept."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config value that no BERT class accepts: which field, what value, and the rule it breaks."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        self.field = field
        self.value = value
        self.rule = rule
        super().__init__(f"{field} = {value!r}: {rule}")
