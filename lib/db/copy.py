"""Many rows at once through the DB-API: COPY (binary where the column types allow) on PostgreSQL, multi-row
INSERT elsewhere, and one UPDATE for many rows' values. Knows models only through their _meta."""

from __future__ import annotations

import json
from contextlib import closing
from datetime import date, time
from typing import Any, TypeVar

import orjson
from django.db import connection
from django.db.models import JSONField

T = TypeVar("T")


def max_params() -> int:
    """Bound parameters one statement may carry on this database."""
    if connection.vendor == "sqlite":
        import sqlite3

        connection.ensure_connection()
        getlimit = getattr(connection.connection, "getlimit", None)  # Python 3.11+
        return getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER) if getlimit else 999
    return 65535 if connection.vendor == "postgresql" else (connection.features.max_query_params or 999)


def _copy_field(value: Any) -> str:
    """One value in COPY's text format (the caller escapes strings)."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, (date, time)):  # datetime too
        return value.isoformat()
    return str(value)


def _copy_escape(text: str) -> str:
    if "\\" in text:
        text = text.replace("\\", "\\\\")
    if "\n" in text:
        text = text.replace("\n", "\\n")
    if "\r" in text:
        text = text.replace("\r", "\\r")
    if "\t" in text:
        text = text.replace("\t", "\\t")
    return text


def _json_text(value: Any, field: JSONField) -> str:
    """A JSON field's value as text for COPY: orjson, or the field's own encoder for what orjson refuses."""
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return json.dumps(value, cls=field.encoder, ensure_ascii=False)


# The column types RawWriter copies in PostgreSQL's binary format, by db_type without its length, with the
# type OIDs psycopg picks its dumpers by. A JSON column goes as bytea, whose dumper sends bytes as they are:
# jsonb's binary form is a version byte and the JSON text, json's the JSON text alone (_json_binary). Any
# other type keeps the text format.
_BINARY_OIDS = {"bigint": 20, "integer": 23, "smallint": 21, "varchar": 1043, "text": 25, "boolean": 16,
                "timestamp with time zone": 1184, "double precision": 701, "jsonb": 17, "json": 17}  # fmt: skip
_JSON_BINARY_PREFIX = {"jsonb": b"\x01", "json": b""}


def _base_type(db_type: str | None) -> str | None:
    return db_type.split("(", 1)[0] if db_type else None


def _json_binary(value: Any, field: JSONField, prefix: bytes) -> bytes:
    """A JSON field's value in its column's binary COPY form: `prefix` (jsonb's version byte, or nothing for
    json), then the JSON text of _json_text."""
    return prefix + _json_text(value, field).encode()


class RawWriter:
    """Many rows at once, straight through the DB-API: COPY on PostgreSQL, multi-row INSERT elsewhere.

    Django's bulk_create spends ~50 µs per row compiling expressions (and its SQLite
    backend splits statements at 999 parameters), which alone would cap an import
    below 4,000 issues/s. Each value is still prepared by its field, but only JSON
    fields need per-row work; defaults and timestamps are prepared once.

    With `with_pk`, rows carry their primary key (ids the caller drew from the
    table's sequence, see `_ids_draw`), so nothing has to be read back.
    """

    def __init__(self, model, overrides: dict[str, Any], *, with_pk: bool = False):
        self.model = model
        self.fields = [f for f in model._meta.concrete_fields if with_pk or not f.primary_key]
        qn = connection.ops.quote_name
        self.table = qn(model._meta.db_table)
        self.columns = ", ".join(qn(f.column) for f in self.fields)
        self.marks = "(" + ", ".join(["%s"] * len(self.fields)) + ")"
        self.pk = qn(model._meta.pk.column)
        self.constant = {}
        self.constant_text = {}
        for f in self.fields:
            value = overrides[f.attname] if f.attname in overrides else f.get_default()
            self.constant[f.attname] = f.get_db_prep_save(value, connection)
            if isinstance(f, JSONField):
                self.constant_text[f.attname] = _copy_escape(_json_text(value, f))
            else:
                value = self.constant[f.attname]
                self.constant_text[f.attname] = _copy_escape(value) if isinstance(value, str) else _copy_field(value)
        self.json = {f.attname: f for f in self.fields if isinstance(f, JSONField)}
        # PostgreSQL: the type of each column for COPY's binary format, or None (a column of a type not in
        # _BINARY_OIDS) to keep the text format.
        self.binary_types = None
        self.constant_binary: dict[str, Any] = {}
        if connection.vendor == "postgresql":
            base = {f.attname: _base_type(f.db_type(connection)) for f in self.fields}
            types = [_BINARY_OIDS.get(base[f.attname]) for f in self.fields]
            if None not in types:
                self.binary_types = types
                self.json_prefix = {name: _JSON_BINARY_PREFIX[base[name]] for name in self.json}
                for f in self.fields:
                    value = overrides[f.attname] if f.attname in overrides else f.get_default()
                    binary = (
                        _json_binary(value, f, self.json_prefix[f.attname])
                        if f.attname in self.json
                        else self.constant[f.attname]
                    )
                    self.constant_binary[f.attname] = binary

    @property
    def names(self) -> list[str]:
        """The attnames of the columns, in the order `insert(..., prepared=True)` expects each row."""
        return [f.attname for f in self.fields]

    def row(self, values: dict[str, Any]) -> list:
        out = []
        for f in self.fields:
            name = f.attname
            if name not in values:
                out.append(self.constant[name])
            elif name in self.json:
                out.append(self.json[name].get_db_prep_save(values[name], connection))
            else:
                out.append(values[name])
        return out

    def _copy_line(self, values: dict[str, Any]) -> str:
        out = []
        for f in self.fields:
            name = f.attname
            if name not in values:
                out.append(self.constant_text[name])
                continue
            value = values[name]
            if name in self.json:
                out.append(_copy_escape(_json_text(value, self.json[name])))
            elif isinstance(value, str):
                out.append(_copy_escape(value))
            else:
                out.append(_copy_field(value))
        return "\t".join(out)

    def _copy_binary(self, rows: list[dict[str, Any]]) -> None:
        """COPY in PostgreSQL's binary format. psycopg's C dumpers, picked by each column's type, write the
        values, and the server takes them without parsing text: no escapes to undo, no timestamps or ids
        to read from digits (3-5 µs less server CPU per document, and less here than our own text lines)."""
        slots = [(f.attname, self.json.get(f.attname), self.json_prefix.get(f.attname), self.constant_binary[f.attname])
                 for f in self.fields]  # fmt: skip
        connection.ensure_connection()
        sql = f"COPY {self.table} ({self.columns}) FROM STDIN (FORMAT BINARY)"
        with connection.wrap_database_errors, connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
            copy.set_types(self.binary_types)
            write = copy.write_row
            for values in rows:
                write([
                    constant if name not in values
                    else values[name] if json_field is None
                    else _json_binary(values[name], json_field, prefix)
                    for name, json_field, prefix, constant in slots
                ])  # fmt: skip

    def _copy_prepared(self, values) -> str:
        return "\t".join(_copy_escape(v) if isinstance(v, str) else _copy_field(v) for v in values)

    def insert(self, rows: list, *, prepared: bool = False) -> list[int] | None:
        """Insert the rows: dicts by attname, or with `prepared`, sequences of every column's value
        in `names` order (no JSON fields to prepare), which skips the per-value dict lookups.
        Returns their new primary keys (in no particular order), or None when the caller must
        look them up (PostgreSQL's COPY returns none)."""
        if connection.vendor == "postgresql" and not prepared and self.binary_types is not None:
            self._copy_binary(rows)
            return None
        if connection.vendor == "postgresql":
            # COPY in its text format, written by us in one piece: about twice as fast as multi-row INSERTs
            # on the server, and several times faster here than adapting value by value. It takes what the
            # binary format would refuse: `prepared` rows, whose values need only print as their column
            # reads them, and columns of a type _BINARY_OIDS does not know.
            line = self._copy_prepared if prepared else self._copy_line
            data = "".join(line(values) + "\n" for values in rows).encode()
            connection.ensure_connection()
            sql = f"COPY {self.table} ({self.columns}) FROM STDIN"
            # Driver errors (a unique key another import took) as Django's, which callers catch.
            with connection.wrap_database_errors, connection.connection.cursor() as cursor, cursor.copy(sql) as copy:
                copy.write(data)
            return None
        make = (lambda values: values) if prepared else self.row
        per_statement = max(1, min(1000, max_params() // len(self.fields)))
        returning = connection.features.can_return_rows_from_bulk_insert
        ids: list[int] = []
        sqlite = connection.vendor == "sqlite"
        # SQLite's own cursor, with its own placeholders: Django's rewrites every %s of a statement
        # of thousands of them with a regex.
        marks_one = "(" + ", ".join(["?"] * len(self.fields)) + ")" if sqlite else self.marks
        raw = connection.connection if sqlite else connection
        with connection.wrap_database_errors, closing(raw.cursor()) as cursor:
            for i in range(0, len(rows), per_statement):
                chunk = rows[i : i + per_statement]
                marks = ", ".join([marks_one] * len(chunk))
                sql = f"INSERT INTO {self.table} ({self.columns}) VALUES {marks}"  # noqa: S608 - names from the model
                params = [value for values in chunk for value in make(values)]
                if returning:
                    cursor.execute(f"{sql} RETURNING {self.pk}", params)
                    ids.extend(row[0] for row in cursor.fetchall())
                else:
                    cursor.execute(sql, params)
        return ids if returning else None


def column_by_id_update(model, column: str, pg_type: str, pairs: list[tuple[Any, int]]) -> None:
    """Set `column` of many rows of `model`, each to its own value: `pairs` is [(value, id), ...], values already
    prepared for the database. PostgreSQL gets one UPDATE ... FROM (VALUES ...) (executemany would still be one
    UPDATE per row on the server); SQLite runs executemany in-process on one prepared statement."""
    if not pairs:
        return
    table = connection.ops.quote_name(model._meta.db_table)
    name = connection.ops.quote_name(model._meta.get_field(column).column)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            values = ", ".join([f"(%s::{pg_type}, %s::bigint)"] * len(pairs))
            cursor.execute(
                f"UPDATE {table} AS t SET {name} = v.x FROM (VALUES {values}) AS v(x, id) WHERE t.id = v.id",  # noqa: S608
                [x for pair in pairs for x in pair],
            )
        else:
            cursor.executemany(f"UPDATE {table} SET {name} = %s WHERE id = %s", pairs)  # noqa: S608 - model names
