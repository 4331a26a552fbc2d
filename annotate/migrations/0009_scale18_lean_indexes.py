"""Drop four single-column indexes that other indexes already cover, which every import paid for.

Document.study and Episode.study lead every composite index of their table, and
Episode.document leads episode_document_order_unique, so the planner never needs
their own index; Document.assignee is NULL except on assigned incidents, so a
partial index holds only those (deleting a user still finds their incidents).

The fields change in the migration state only; the database drops the indexes
by their introspected names, so SQLite does not rebuild either table (a rebuild
would also drop the full-text triggers until post_migrate repaired them).
"""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

COVERED = [("document", "study_id"), ("document", "assignee_id"), ("episode", "study_id"), ("episode", "document_id")]


def _indexes(schema_editor, model, column):
    """Names of the single-column, non-unique indexes on `column` (Django named them by a hash)."""
    with schema_editor.connection.cursor() as cursor:
        found = schema_editor.connection.introspection.get_constraints(cursor, model._meta.db_table)
    return [
        name
        for name, info in found.items()
        if info["index"] and not info["unique"] and not info["primary_key"] and info["columns"] == [column]
    ]


def drop_covered(apps, schema_editor):
    for model_name, column in COVERED:
        model = apps.get_model("annotate", model_name)
        for name in _indexes(schema_editor, model, column):
            schema_editor.execute(schema_editor._delete_index_sql(model, name))


def restore_covered(apps, schema_editor):
    for model_name, column in COVERED:
        model = apps.get_model("annotate", model_name)
        if not _indexes(schema_editor, model, column):
            field = next(f for f in model._meta.concrete_fields if f.column == column)
            schema_editor.execute(schema_editor._create_index_sql(model, fields=[field]))


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0008_bulk_document_study_id"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[migrations.RunPython(drop_covered, restore_covered)],
            state_operations=[
                migrations.AlterField(
                    model_name="document",
                    name="assignee",
                    field=models.ForeignKey(
                        blank=True,
                        db_index=False,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="assigned_incidents",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                migrations.AlterField(
                    model_name="document",
                    name="study",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="documents",
                        to="annotate.study",
                    ),
                ),
                migrations.AlterField(
                    model_name="episode",
                    name="document",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="episodes",
                        to="annotate.document",
                    ),
                ),
                migrations.AlterField(
                    model_name="episode",
                    name="study",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="episodes",
                        to="annotate.study",
                    ),
                ),
            ],
        ),
        migrations.AddIndex(
            model_name="document",
            index=models.Index(
                condition=models.Q(("assignee__isnull", False)), fields=["assignee"], name="document_assignee_idx"
            ),
        ),
    ]
