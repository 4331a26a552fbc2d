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
parameter must be an int or a str that reaches the SQL as it was given. A lookup that rewrites it, such
as `contains` or `iexact`, is refused when the queryset is built, not at a request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
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
    positions: dict[str, int]
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
            if kind not in (int, str):
                raise ImproperlyConfigured(f"prepared parameter {name!r}: only int and str can be swapped in")
        self._build = build
        self._kinds = kinds
        self._compiled: dict[tuple[str, str], _Compiled] = {}

    def _compile(self, connection) -> _Compiled:
        stand_ins = {
            name: _STAND_IN_INT - i if kind is int else f"\x1fprepared {name} {i}\x1f"
            for i, (name, kind) in enumerate(self._kinds.items())
        }
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
            at = [i for i, p in enumerate(params) if type(p) is type(value) and p == value]
            if len(at) != 1:
                raise ImproperlyConfigured(
                    f"prepared parameter {name!r} must reach the SQL once, unchanged (it did {len(at)} times)"
                )
            positions[name] = at[0]
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
            params[compiled.positions[name]] = value
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
