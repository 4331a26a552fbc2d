"""Document.raw as PostgreSQL `json`, not `jsonb` (issue 34).

`raw` keeps an imported item's fields besides its body, to be read back whole (an incident's trace, the
admin); nothing queries inside it. `jsonb` parsed those 1.1 KB of a GitHub issue into a binary tree on every
import, 8.5 µs of server CPU per issue; `json` keeps the text as given, checked to be JSON, for 2.3 µs
(lib/db/fields.py). The column is rewritten once: about a second per 100,000 documents. On other databases
nothing changes.
"""

from django.db import DatabaseError, migrations, transaction

import lib.db.fields


def compression_keep(apps, schema_editor):
    """A new column type drops the column's compression: lz4 again, as 0021 set it."""
    if schema_editor.connection.vendor != "postgresql":
        return
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute("ALTER TABLE annotate_document ALTER COLUMN raw SET COMPRESSION lz4")
    except DatabaseError:  # a server built without lz4 keeps pglz, as 0021 does
        pass


class Migration(migrations.Migration):
    dependencies = [
        ("annotate", "0021_document_storage"),
    ]

    operations = [
        migrations.AlterField(
            model_name="document",
            name="raw",
            field=lib.db.fields.StoredJSONField(blank=True, default=dict),
        ),
        migrations.RunPython(compression_keep, migrations.RunPython.noop),
    ]
