"""A differential probe of blinding over the whole REST API, driven by its OpenAPI schema.

For an observer, it calls every GET endpoint under /api/v1/ that lists a study's
rows (every path whose only parameter is the study's slug, or none), once with no
query and once for every query parameter the schema offers with every candidate
value, and records status and body bytes. Between snapshots another coder codes
or changes a coding; any response that changes is a leak, because it tells the
observer something about another coder's work that blinding hides.

Parameters come from the schema, so a filter added later is probed without
anyone remembering to add it here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

_PATH_PARAM = re.compile(r"{([^}]+)}")


@dataclass(frozen=True)
class Probe:
    method: str
    path: str
    query: tuple[tuple[str, str], ...]

    def __str__(self) -> str:
        q = "&".join(f"{k}={v}" for k, v in self.query)
        return f"GET {self.path}{'?' + q if q else ''}"


def list_operations(slug: str) -> list[tuple[str, list[dict]]]:
    """(path with the slug filled in, query parameters) for every GET under /api/v1/ with no id in its path."""
    schema = SchemaGenerator().get_schema(request=None, public=True)
    out = []
    for path, ops in sorted(schema["paths"].items()):
        op = ops.get("get")
        if op is None or not path.startswith("/api/v1/"):
            continue
        names = set(_PATH_PARAM.findall(path))
        if names - {"slug"}:
            continue  # a detail endpoint of one row by id
        params = [p for p in op.get("parameters", []) if p.get("in") == "query"]
        out.append((path.replace("{slug}", slug), params))
    return out


def candidate_values(param: dict, pools: dict[str, list[str]]) -> list[str]:
    """Values worth trying for one parameter, by its schema type (not by its name)."""
    schema = param.get("schema", {})
    if schema.get("type") == "array":
        schema = schema.get("items", {})
    if "enum" in schema:
        return [str(v) for v in schema["enum"] if v is not None]
    kind, fmt = schema.get("type"), schema.get("format")
    if kind == "boolean":
        return ["true", "false"]
    if fmt == "date-time":
        return pools["times"]
    if kind in ("integer", "number"):
        return pools["ids"]
    return pools["strings"]


def probes(slug: str, pools: dict[str, list[str]]) -> list[Probe]:
    found = []
    for path, params in list_operations(slug):
        found.append(Probe("GET", path, ()))
        for param in params:
            for value in candidate_values(param, pools):
                found.append(Probe("GET", path, ((param["name"], value),)))
    return found


def snapshot(client: APIClient, all_probes: Iterable[Probe]) -> dict[Probe, tuple[int, bytes]]:
    out = {}
    for probe in all_probes:
        response = client.get(probe.path, dict(probe.query))
        body = b"".join(response.streaming_content) if response.streaming else response.content
        out[probe] = (response.status_code, body)
    return out


def leaks(observers: dict[str, APIClient], all_probes: list[Probe], steps: list[Callable[[], None]]) -> list[str]:
    """Run `steps` one after another; report every probe whose answer to an observer changed."""
    before = {name: snapshot(client, all_probes) for name, client in observers.items()}
    found = []
    for i, step in enumerate(steps, 1):
        step()
        for name, client in observers.items():
            after = snapshot(client, all_probes)
            for probe in all_probes:
                if before[name][probe] != after[probe]:
                    found.append(f"step {i}, {name}: {probe} changed")
            before[name] = after
    return found
