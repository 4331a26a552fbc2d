"""Full-text search of documents (annotate/search.py).

PostgreSQL: a generated, stored tsvector column with a GIN index; adding it
fills it for existing rows. SQLite: an FTS5 table kept in step by triggers,
filled from the existing rows here. Other databases get nothing (search then
matches nothing rather than scanning).
"""

from django.db import migrations

# Bodies are indexed up to annotate.search.SEARCH_BODY_CHARS (100,000) characters: a tsvector is limited to 1 MB.
PG_FORWARD = [
    """ALTER TABLE annotate_document ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, left(coalesce(body, ''), 100000)), 'B')
    ) STORED""",
    "CREATE INDEX annotate_document_search_gin ON annotate_document USING gin (search)",
]
PG_BACKWARD = [
    "DROP INDEX IF EXISTS annotate_document_search_gin",
    "ALTER TABLE annotate_document DROP COLUMN IF EXISTS search",
]
SQLITE_FORWARD = [
    "CREATE VIRTUAL TABLE annotate_document_fts USING fts5(title, body, tokenize='porter unicode61')",
    """CREATE TRIGGER annotate_document_fts_insert AFTER INSERT ON annotate_document BEGIN
        INSERT INTO annotate_document_fts(rowid, title, body)
        VALUES (new.id, new.title, substr(new.body, 1, 100000));
    END""",
    """CREATE TRIGGER annotate_document_fts_delete AFTER DELETE ON annotate_document BEGIN
        DELETE FROM annotate_document_fts WHERE rowid = old.id;
    END""",
    """CREATE TRIGGER annotate_document_fts_update AFTER UPDATE OF title, body ON annotate_document BEGIN
        UPDATE annotate_document_fts SET title = new.title, body = substr(new.body, 1, 100000)
        WHERE rowid = new.id;
    END""",
    """INSERT INTO annotate_document_fts(rowid, title, body)
        SELECT id, title, substr(body, 1, 100000) FROM annotate_document""",
]
SQLITE_BACKWARD = [
    "DROP TRIGGER IF EXISTS annotate_document_fts_insert",
    "DROP TRIGGER IF EXISTS annotate_document_fts_delete",
    "DROP TRIGGER IF EXISTS annotate_document_fts_update",
    "DROP TABLE IF EXISTS annotate_document_fts",
]


def _run(statements_by_vendor):
    def run(apps, schema_editor):
        for sql in statements_by_vendor.get(schema_editor.connection.vendor, []):
            schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("annotate", "0001_initial")]

    operations = [
        migrations.RunPython(
            _run({"postgresql": PG_FORWARD, "sqlite": SQLITE_FORWARD}),
            _run({"postgresql": PG_BACKWARD, "sqlite": SQLITE_BACKWARD}),
        )
    ]
