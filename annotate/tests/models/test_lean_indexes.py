"""Migrations 0009 and 0010 (and taxonomy 0002): no table keeps a single-column index that an index or unique
constraint led by the same column already covers (each cost every import, save and lease a write for
nothing); the assignee keeps a partial index, and the migration reverses."""

from __future__ import annotations

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from annotate.models import Document, Episode

COVERED = [(Document, "study_id"), (Document, "assignee_id"), (Episode, "study_id"), (Episode, "document_id")]


def single_column_indexes(model, column: str) -> list[str]:
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return sorted(
        name
        for name, info in found.items()
        if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] == [column]
    )


def leading(model, column: str) -> list[str]:
    """Indexes and unique constraints of `model` whose first column is `column`, other than single-column ones."""
    with connection.cursor() as cursor:
        found = connection.introspection.get_constraints(cursor, model._meta.db_table)
    return sorted(n for n, i in found.items() if i["columns"][:1] == [column] and len(i["columns"]) > 1)


@pytest.mark.django_db
def test_no_table_of_ours_has_a_single_column_index_that_another_index_covers():
    """Every table of the annotate and taxonomy apps, as migrated, whatever new model or field comes."""
    redundant = []
    for model in [*apps.get_app_config("annotate").get_models(), *apps.get_app_config("taxonomy").get_models()]:
        with connection.cursor() as cursor:
            found = connection.introspection.get_constraints(cursor, model._meta.db_table)
        led = {tuple(i["columns"][:1]) for i in found.values() if len(i["columns"] or ()) > 1 and not i["check"]}
        for name, info in found.items():
            single = info["index"] and not info["unique"] and not info["primary_key"] and len(info["columns"]) == 1
            if single and tuple(info["columns"]) in led:
                redundant.append((model._meta.db_table, name))
    assert redundant == []


@pytest.mark.django_db
def test_each_covered_column_leads_another_index_and_has_none_of_its_own():
    for model, column in COVERED:
        if column == "assignee_id":
            assert single_column_indexes(model, column) == ["document_assignee_idx"]
        else:
            assert single_column_indexes(model, column) == [], (model, column)
            assert leading(model, column), f"{model.__name__}.{column} would be left without any index"


@pytest.mark.django_db
def test_the_assignee_index_is_partial():
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'document_assignee_idx'")
        else:
            cursor.execute("SELECT sql FROM sqlite_master WHERE name = 'document_assignee_idx'")
        (sql,) = cursor.fetchone()
    assert "IS NOT NULL" in sql.upper()


@pytest.mark.django_db
def test_deleting_an_assignee_still_unassigns_their_incidents(study):
    user = get_user_model().objects.create_user(username="leaving", password="x")
    doc = Document.objects.create(
        study=study, kind="incident", external_id="i-1", cluster="svc", title="t", assignee=user
    )
    user.delete()
    doc.refresh_from_db()
    assert doc.assignee_id is None


@pytest.mark.django_db(transaction=True)
def test_the_migration_reverses_and_reapplies():
    executor = MigrationExecutor(connection)
    try:
        executor.migrate([("annotate", "0008_bulk_document_study_id")])
        for model, column in COVERED:
            assert len(single_column_indexes(model, column)) == 1, (model, column)
        executor.loader.build_graph()
        executor.migrate([("annotate", "0009_scale18_lean_indexes")])
    finally:
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())
    test_each_covered_column_leads_another_index_and_has_none_of_its_own()
