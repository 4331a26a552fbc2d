"""Search vectors off the import's critical path (issue 34).

The generated `search` column computed each document's tsvector (and its GIN entries) inside the
INSERT: on 2 KB bodies that was 0.30 of the 0.40 ms of server CPU an imported issue cost. It becomes
a plain column, kept by a trigger for every ordinary write (a form, the API, an incident), which an
import switches off for its own transactions (`faultline.search_deferred`, annotate.documents.search);
its documents are codable at once and get their vectors from the follow-up `search_index` job.
A partial index finds the documents still waiting, so the job and the search page's "still indexing"
never scan the study. The vectors already stored are kept (DROP EXPRESSION keeps the values).
"""

from django.db import migrations

VECTOR = """
CREATE OR REPLACE FUNCTION annotate_document_search_vector(title text, body text) RETURNS tsvector
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
    SELECT setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, left(coalesce(body, ''), 100000)), 'B')
$$"""
FILL = """
CREATE OR REPLACE FUNCTION annotate_document_search_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.search := annotate_document_search_vector(NEW.title, NEW.body);
    RETURN NEW;
END
$$"""
# Fires for every write of title or body, unless the transaction deferred its vectors (an import's).
TRIGGER = """
CREATE TRIGGER annotate_document_search BEFORE INSERT OR UPDATE OF title, body ON annotate_document
FOR EACH ROW WHEN (current_setting('faultline.search_deferred', true) IS DISTINCT FROM 'on')
EXECUTE FUNCTION annotate_document_search_fill()"""

PG_FORWARD = [
    "ALTER TABLE annotate_document ALTER COLUMN search DROP EXPRESSION",
    VECTOR,
    FILL,
    TRIGGER,
    "CREATE INDEX document_search_pending_idx ON annotate_document (study_id, id) WHERE search IS NULL",
]
PG_BACKWARD = [
    "DROP INDEX IF EXISTS document_search_pending_idx",
    "DROP TRIGGER IF EXISTS annotate_document_search ON annotate_document",
    "DROP FUNCTION IF EXISTS annotate_document_search_fill()",
    "DROP FUNCTION IF EXISTS annotate_document_search_vector(text, text)",
    "DROP INDEX IF EXISTS annotate_document_search_gin",
    "ALTER TABLE annotate_document DROP COLUMN IF EXISTS search",
    """ALTER TABLE annotate_document ADD COLUMN search tsvector GENERATED ALWAYS AS (
        setweight(to_tsvector('english'::regconfig, coalesce(title, '')), 'A')
        || setweight(to_tsvector('english'::regconfig, left(coalesce(body, ''), 100000)), 'B')
    ) STORED""",
    "CREATE INDEX annotate_document_search_gin ON annotate_document USING gin (search)",
]


def _run(statements):
    def run(apps, schema_editor):
        if schema_editor.connection.vendor == "postgresql":
            for sql in statements:
                schema_editor.execute(sql)

    return run


class Migration(migrations.Migration):
    dependencies = [("annotate", "0015_step_detail")]

    operations = [migrations.RunPython(_run(PG_FORWARD), _run(PG_BACKWARD))]
