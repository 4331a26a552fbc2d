"""Querysets compiled once and run many times: the lookups every request makes, without the compile.

Django turns a queryset into SQL each time it is evaluated. For the few lookups that every API request
makes (its token, the study membership, the episode a coding names), that compile step costs more CPU
than sending the query and reading the answer: 0.3-0.6 ms each on a 2-core server, against ~0.15 ms.

A `Prepared` builds its queryset once per process and database vendor, from stand-in values, and keeps:
- the SQL;
- where each stand-in sits among the parameters;
- the converters and the populators that `QuerySet.__iter__` would use to turn rows into instances.

After that, each call only swaps in the real values and executes. The instances come out exactly as
the queryset's own would: the same fields, `select_related` objects and annotations. The tests hold
every prepared lookup to its queryset, on both databases.

Only plain querysets can be prepared: no prefetch_related, values() or related-manager querysets. Every
parameter is an int, a str or an aware datetime (compared with a DateTimeField), and must reach the SQL as
it was given, once or more. A lookup that rewrites it, such as `contains`, is refused when the queryset is
first built, not at a request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.core.exceptions import ImproperlyConfigured
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import QuerySet
from django.db.models.query import ModelIterable, get_related_populators

_STAND_IN_INT = -7_310_000_000_000  # far from any id; each parameter gets its own
# Ids are 64-bit. A larger one names no row: the ORM answers so without asking, the database would refuse the
# value. Callers that take an id from a request check it against this before they ask.
MAX_ID = 2**63 - 1


@dataclass(frozen=True)
class _Compiled:
    sql: str
    params: tuple
    positions: dict[str, list[int]]
    model: type
    fields_start: int
    fields_end: int
    init_list: list[str]
    converters: dict
    related_populators: list
    annotation_col_map: dict


class Prepared:
    """`Prepared(build, name=int, other=str)`: `build(name=..., other=...)` returns the queryset;
    `.all(name=1, other="x")` runs it with those values, `.first(...)` returns its first row or None."""

    def __init__(self, build: Callable[..., QuerySet], **kinds: type) -> None:
        for name, kind in kinds.items():
            if kind not in (int, str, datetime):
                raise ImproperlyConfigured(f"prepared parameter {name!r}: only int, str and datetime can be swapped in")
        self._build = build
        self._kinds = kinds
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def _compile(self, connection) -> _Compiled:
        stand_ins = {name: _stand_in(kind, name, i) for i, (name, kind) in enumerate(self._kinds.items())}
        queryset = self._build(**stand_ins)
        if (
            queryset._iterable_class is not ModelIterable
            or queryset._prefetch_related_lookups
            or queryset._known_related_objects
        ):
            raise ImproperlyConfigured("only a plain model queryset can be prepared")
        compiler = queryset.query.get_compiler(connection=connection)
        sql, params = compiler.as_sql()
        positions = {}
        for name, value in stand_ins.items():
            value = _as_sent(value, connection)
            positions[name] = [i for i, p in enumerate(params) if type(p) is type(value) and p == value]
            if not positions[name]:
                raise ImproperlyConfigured(f"prepared parameter {name!r} must reach the SQL unchanged; it did not")
        select, klass_info = compiler.select, compiler.klass_info
        start, end = klass_info["select_fields"][0], klass_info["select_fields"][-1] + 1
        return _Compiled(
            sql=sql,
            params=tuple(params),
            positions=positions,
            model=klass_info["model"],
            fields_start=start,
            fields_end=end,
            init_list=[f[0].target.attname for f in select[start:end]],
            converters=compiler.get_converters([s[0] for s in select[0 : compiler.col_count]]),
            related_populators=get_related_populators(klass_info, select, connection.alias),
            annotation_col_map=dict(compiler.annotation_col_map),
        )

    def all(self, **values: Any) -> list:
        if values.keys() != self._kinds.keys():
            raise TypeError(f"prepared query takes {sorted(self._kinds)}, got {sorted(values)}")
        connection = connections[DEFAULT_DB_ALIAS]
        key = (connection.alias, connection.vendor)
        compiled = self._compiled.get(key)
        if compiled is None:
            compiled = self._compiled[key] = self._compile(connection)
        params = list(compiled.params)
        for name, value in values.items():
            if type(value) is not self._kinds[name]:
                raise TypeError(f"prepared parameter {name!r} must be {self._kinds[name].__name__}")
            value = _as_sent(value, connection)
            for i in compiled.positions[name]:
                params[i] = value
        with connection.cursor() as cursor:
            cursor.execute(compiled.sql, params)
            rows = cursor.fetchall()
        db = connection.alias
        out = []
        for row in rows:
            if compiled.converters:
                row = list(row)
                for pos, (converters, expression) in compiled.converters.items():
                    value = row[pos]
                    for converter in converters:
                        value = converter(value, expression, connection)
                    row[pos] = value
            obj = compiled.model.from_db(db, compiled.init_list, row[compiled.fields_start : compiled.fields_end])
            for populator in compiled.related_populators:
                populator.populate(row, obj)
            for attr, pos in compiled.annotation_col_map.items():
                setattr(obj, attr, row[pos])
            out.append(obj)
        return out

    def first(self, **values: Any):
        rows = self.all(**values)
        return rows[0] if rows else None


def _stand_in(kind: type, name: str, i: int) -> Any:
    if kind is int:
        return _STAND_IN_INT - i
    if kind is str:
        return f"\x1fprepared {name} {i}\x1f"
    return datetime(1901, 2, 3, 4, 5, 6, 700_000 + i, tzinfo=UTC)


def _as_sent(value: Any, connection) -> Any:
    """A value as the ORM sends it for its field: a datetime as a DateTimeField prepares it for this database
    (aware and unchanged on PostgreSQL, UTC text on SQLite); a naive one is refused rather than guessed."""
    if type(value) is not datetime:
        return value
    if value.tzinfo is None or value.utcoffset() is None:
        raise TypeError("a prepared datetime must be aware")
    return connection.ops.adapt_datetimefield_value(value)
