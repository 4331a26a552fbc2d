"""Model fields for how a value is stored, not what it means."""

from __future__ import annotations

from typing import Any

from django.db import models


class StoredJSONField(models.JSONField):
    """A JSONField kept by PostgreSQL as `json` (the text as given, checked to be JSON) rather than `jsonb`
    (parsed into a binary tree on every write). For JSON that is stored to be read back whole, never
    queried inside: key lookups and JSON containment need `jsonb`, and `json` has no equality operator.

    `jsonb` cost the server 8.5 µs to parse the 1.1 KB of fields a GitHub issue keeps besides its body
    (a tenth of its share of an import), `json` 2.3 µs: COPY of 20,000 issues' fields, 11.5-12.0 µs per
    row against 5.0-5.5 µs (text: 3.0 µs). Other databases store JSON as text either way."""

    def db_type(self, connection) -> str | None:
        if connection.vendor == "postgresql":
            return "json"
        return super().db_type(connection)

    def from_db_value(self, value: Any, expression, connection) -> Any:
        if value is not None and not isinstance(value, str):  # psycopg decodes `json` itself
            return value
        return super().from_db_value(value, expression, connection)
