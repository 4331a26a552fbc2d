"""Documents stored without pglz compression or an out-of-line TOAST row for bodies of real size (issue 34).

A 2 KB issue's row is about 3.7 KB (body, the issue's other fields as `raw`, `meta`): past PostgreSQL's
default 2 KB TOAST threshold, so every imported row had its body and raw JSON compressed with pglz, and the
body still moved to the TOAST table (a second heap row and index entry). That was a quarter of the server's
CPU for an import (pglz_compress alone, in `perf`). Rows up to 4 KB now stay in the table as they are, and
larger ones are compressed with lz4, several times cheaper than pglz to write and to read. The cost is disk:
about 1.4x the heap for 2 KB bodies. Values already stored keep their form until rewritten.
"""

import logging

from django.db import DatabaseError, migrations, transaction

log = logging.getLogger(__name__)
COLUMNS = ("body", "raw", "meta", "search")


def forward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE annotate_document SET (toast_tuple_target = 4096)")
    try:
        with transaction.atomic(using=schema_editor.connection.alias):
            schema_editor.execute(
                "ALTER TABLE annotate_document " + ", ".join(f"ALTER COLUMN {c} SET COMPRESSION lz4" for c in COLUMNS)
            )
    except DatabaseError:  # a server built without lz4 keeps pglz
        log.warning("PostgreSQL without lz4: document columns keep pglz compression")


def backward(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute("ALTER TABLE annotate_document RESET (toast_tuple_target)")
    schema_editor.execute(
        "ALTER TABLE annotate_document " + ", ".join(f"ALTER COLUMN {c} SET COMPRESSION default" for c in COLUMNS)
    )


class Migration(migrations.Migration):
    dependencies = [("annotate", "0020_suggestion_language_capped")]

    operations = [migrations.RunPython(forward, backward)]
