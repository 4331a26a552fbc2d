"""Full-text search of a study's documents: one function, two engines.

PostgreSQL keeps a `tsvector` column (`annotate_document.search`: the title
weighted A, the first SEARCH_BODY_CHARS of the body weighted B, english
configuration) with a GIN index, filled by a trigger on every write of a title or
body (migrations 0002 and 0016). An import defers it (`search_defer`): its
documents are written with no vector, codable at once, and the `search_index`
job fills their vectors in batches afterwards (search_vectors_fill); until then
the search page does not find them and says how many are still being indexed
(search_pending), while exports and API lists filtered by words compute the
vectors of those documents for the query (document_matches). A job that failed
is started again by beat's sweep (annotate.documents.services.search_index_sweep).
The embedded SQLite default keeps an FTS5 table
(`annotate_document_fts`, porter stemmer) in step with triggers, never deferred.

The query language is the same on both and is parsed here, never by the engine:
words (all must match, stemmed), "quoted phrases", and -word or -"phrase" to
exclude. English stop words are dropped from the words, as PostgreSQL does, so a
query means the same thing on both engines. Results are ranked (title matches
first: `ts_rank` with weights on PostgreSQL, `bm25` with a heavier title on
SQLite) and come with highlighted snippets whose markup is escaped here.

Ranking reads every row it ranks, so it is bounded: the index finds the newest
matches (highest id; the same set on both engines), SEARCH_CANDIDATES of them
and one more that tells whether there were more, and only those are ranked. A
word that half of a million documents contain then costs what a rare one does;
the page says when the matches were cut.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Count, Expression, FloatField, Func, Q, QuerySet, Subquery, Value, Window
from django.db.models.expressions import RawSQL
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from annotate.models import Document

# The job kind of the follow-up that makes an import's documents searchable (stored in Job.kind: never rename).
SEARCH_INDEX_JOB = "search_index"
SEARCH_BODY_CHARS = 100_000  # what is indexed of a body (the SQL below spells it out)
SEARCH_CANDIDATES = 1000  # the newest matches that are ranked (see the module docstring)
FTS_TABLE = "annotate_document_fts"
MAX_TERMS = 12
_MARK_OPEN, _MARK_CLOSE = "\x02", "\x03"  # the engine's match markers (made well-formed in _highlight)
_TOKEN = re.compile(r"[^\W_]+", re.UNICODE)
_PART = re.compile(r'(-?)"([^"]*)"|(-?)(\S+)')

# PostgreSQL's english stop words (snowball): the same words are ignored on both engines.
_STOP_TEXT = """i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she her hers
    herself it its itself they them their theirs themselves what which who whom this that these those am is are
    was were be been being have has had having do does did doing a an the and but if or because as until while of
    at by for with about against between into through during before after above below to from up down in out on
    off over under again further then once here there when where why how all any both each few more most other
    some such no nor not only own same so than too very s t can will just don should now"""
STOP_WORDS = frozenset(_STOP_TEXT.split())


# The SQLite triggers and fill, as migration 0002 created them (search_index_ensure repairs them).
SQLITE_TRIGGERS = {
    "annotate_document_fts_insert": """
        CREATE TRIGGER annotate_document_fts_insert AFTER INSERT ON annotate_document BEGIN
            INSERT INTO annotate_document_fts(rowid, title, body)
            VALUES (new.id, new.title, substr(new.body, 1, 100000));
        END""",
    "annotate_document_fts_delete": """
        CREATE TRIGGER annotate_document_fts_delete AFTER DELETE ON annotate_document BEGIN
            DELETE FROM annotate_document_fts WHERE rowid = old.id;
        END""",
    "annotate_document_fts_update": """
        CREATE TRIGGER annotate_document_fts_update AFTER UPDATE OF title, body ON annotate_document BEGIN
            UPDATE annotate_document_fts SET title = new.title, body = substr(new.body, 1, 100000)
            WHERE rowid = new.id;
        END""",
}
SQLITE_FILL = """INSERT INTO annotate_document_fts(rowid, title, body)
    SELECT id, title, substr(body, 1, 100000) FROM annotate_document"""


@dataclass(frozen=True)
class SearchQuery:
    """A parsed query: each term is a tuple of tokens (one token: a word; several: a phrase)."""

    include: tuple[tuple[str, ...], ...]
    exclude: tuple[tuple[str, ...], ...]

    @property
    def empty(self) -> bool:
        return not self.include


def search_parse(text: str) -> SearchQuery:
    """Words, "phrases" and -exclusions; punctuation splits words (tool_call is the phrase "tool call")."""
    include: list[tuple[str, ...]] = []
    exclude: list[tuple[str, ...]] = []
    for neg_phrase, phrase, neg_word, word in _PART.findall(text or ""):
        negative = bool(neg_phrase or neg_word)
        tokens = tuple(t.lower() for t in _TOKEN.findall(phrase if phrase or neg_phrase else word))
        if len(tokens) == 1 and tokens[0] in STOP_WORDS:
            continue
        if not tokens or all(t in STOP_WORDS for t in tokens):
            continue
        target = exclude if negative else include
        if tokens not in target and len(include) + len(exclude) < MAX_TERMS:
            target.append(tokens)
    return SearchQuery(tuple(include), tuple(exclude))


# ---------------------------------------------------------------- PostgreSQL

# The setting migration 0016's trigger reads: "on" leaves the vector of each document written meanwhile to the
# search_index job. Set with set_config(..., true), so it never outlives the transaction, and put back at once.
_DEFER_SQL = "SELECT set_config('faultline.search_deferred', %s, true)"
# The same vector the trigger computes, for the follow-up fill.
VECTOR_SQL = "annotate_document_search_vector({doc}.title, {doc}.body)"


@contextmanager
def search_deferred(defer: bool = True) -> Iterator[None]:
    """PostgreSQL: documents written inside the block get no search vector now; the caller queues the
    search_index job (annotate.documents.services.search_index_queue) once they are committed.

    Computing a 2 KB body's vector and its GIN entries cost three quarters of the server's CPU for an
    imported issue (0.30 of 0.40 ms), and none of it is needed to code the document. Only the block's
    writes: whatever else the same transaction writes afterwards gets its vector from the trigger."""
    if not defer or connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cursor:
        cursor.execute(_DEFER_SQL, ["on"])
    yield  # an error aborts the transaction, and the setting with it
    with connection.cursor() as cursor:
        cursor.execute(_DEFER_SQL, ["off"])


def search_pending(study_id: int) -> int:
    """How many of the study's documents search cannot find yet (their vectors wait for the search_index
    job); always 0 on SQLite. An index-only count of a partial index that holds exactly those."""
    if connection.vendor != "postgresql":
        return 0
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM annotate_document WHERE study_id = %s AND search IS NULL", [study_id])
        return cursor.fetchone()[0]


def _pg_tsquery(query: SearchQuery) -> tuple[str, list[str]]:
    """SQL for the tsquery, built from the engine's own normalisers with bound parameters."""
    parts, params = [], []
    for tokens in query.include:
        parts.append("phraseto_tsquery('english', %s)")
        params.append(" ".join(tokens))
    for tokens in query.exclude:
        parts.append("(!! phraseto_tsquery('english', %s))")
        params.append(" ".join(tokens))
    return "(" + " && ".join(parts) + ")", params


# ---------------------------------------------------------------- SQLite FTS5


def _fts_query(query: SearchQuery) -> str:
    def quoted(tokens: tuple[str, ...]) -> str:
        return '"' + " ".join(tokens).replace('"', '""') + '"'

    text = " AND ".join(quoted(t) for t in query.include)
    for tokens in query.exclude:
        text += f" NOT {quoted(tokens)}"
    return text


# ---------------------------------------------------------------- the one function


def document_matches(documents: QuerySet[Document], text: str) -> QuerySet[Document]:
    """`documents` (any filtered queryset) narrowed to all those matching `text`, unranked and unordered.
    An empty query matches nothing.

    Exports and the API's lists filter with it, and they include the documents still waiting for their
    search vectors (search_pending): their vector is computed for the query, exactly as the search_index
    job will store it. A researcher exporting "timeout" right after an import gets every matching document,
    and the same file as an hour later: not a partial set that depends on when the job ran, nor the
    different matches of a plain substring search (no stemming, no phrases), nor a refusal to wait out.
    It costs what indexing them costs (about 0.4 ms per pending 2 KB document), only while they wait."""
    query = search_parse(text)
    if query.empty:
        return documents.none()
    return documents.filter(_matches(query, pending=True))


class _DocumentSQL(Expression):
    """SQL about the document row, written with {doc} for the document table as this query names it:
    inside a subquery Django renames the table (U0), and a literal annotate_document would then
    refer to the outer query's row instead."""

    def __init__(self, template: str, params: list[str], output_field) -> None:
        super().__init__(output_field=output_field)
        self.template, self.params = template, params

    def as_sql(self, compiler, connection):
        doc = compiler.quote_name_unless_alias(compiler.query.base_table)
        return self.template.format(doc=doc), list(self.params)


def _matches(query: SearchQuery, *, pending: bool = False) -> Expression:
    """With `pending` (PostgreSQL), documents whose vector the search_index job has still to fill match too
    when the vector it will store matches: the same answer as once indexing is done, at the cost of computing
    the vectors of the study's pending documents for the query (see document_matches)."""
    if connection.vendor == "postgresql":
        tsquery, params = _pg_tsquery(query)
        if pending:
            sql = ("({doc}.search @@ " + tsquery + " OR ({doc}.search IS NULL AND "
                   + VECTOR_SQL + " @@ " + tsquery + "))")  # fmt: skip
            return _DocumentSQL(sql, [*params, *params], BooleanField())
        return _DocumentSQL("{doc}.search @@ " + tsquery, params, BooleanField())
    sql = "{doc}.id IN (SELECT rowid FROM annotate_document_fts WHERE annotate_document_fts MATCH %s)"
    return _DocumentSQL(sql, [_fts_query(query)], BooleanField())


def _rank(query: SearchQuery) -> Expression:
    """PostgreSQL's rank (SQLite's is bm25 over a join, in document_search)."""
    tsquery, params = _pg_tsquery(query)
    # float8: a real sent as text would not round-trip exactly through the page cursor.
    sql = "ts_rank('{{0.1, 0.2, 0.4, 1.0}}', {doc}.search, " + tsquery + ")::float8"
    return _DocumentSQL(sql, params, FloatField())


def search_study(study_id: int) -> Expression | Q:
    """The condition "in this study" for a queryset given to document_search.

    Its newest matches are the study's highest ids that match. With `study_id = X` PostgreSQL
    reads them by walking the primary key backward, which for any study but the newest first walks
    through every later study's documents (seconds at a million). `study_id = ANY(ARRAY[X])` is not
    an equality to the planner, so the ordering by (study, id) stays, and only the (study, id)
    index serves it."""
    if connection.vendor == "postgresql":
        return _DocumentSQL("{doc}.study_id = ANY(%s::bigint[])", [[study_id]], BooleanField())
    return Q(study_id=study_id)


def document_search(documents: QuerySet[Document], text: str, *, candidates: int | None = None) -> QuerySet[Document]:
    """`documents` (any filtered queryset) narrowed to those matching `text`, annotated with `search_rank`
    (higher is better) and ordered by it, best first, then by id. An empty query matches nothing.

    Only the newest `candidates` + 1 matches (default SEARCH_CANDIDATES) are ranked, all of them if
    there are fewer; each row also carries `search_pool`, how many of those are left at or after this
    page's cursor, so the first page can tell (`search_pool > candidates`) that the matches were cut.
    """
    query = search_parse(text)
    if query.empty:
        return documents.none()
    candidates = candidates or SEARCH_CANDIDATES
    pool = documents.filter(_matches(query)).order_by("-study_id", "-pk").values("pk")[: candidates + 1]
    ranked = documents.filter(pk__in=pool)
    if connection.vendor == "postgresql":
        return ranked.annotate(search_rank=_rank(query), search_pool=Window(Count("pk"))).order_by("-search_rank", "pk")
    # SQLite: bm25 in a subquery per row would re-read each word's whole doclist for every row (seconds
    # for a common word at 100,000 documents), so the FTS table is joined once; Django has no join to a
    # table without a model, hence extra() (the ranked query is never a subquery). bm25 may not run
    # beside a window function, so the pool is counted by a subquery that SQLite evaluates once.
    fts = _fts_query(query)
    ranked = ranked.extra(  # noqa: S610 - our SQL; the user's words are a bound parameter
        tables=[FTS_TABLE],
        where=[f"{FTS_TABLE}.rowid = annotate_document.id", f"{FTS_TABLE} MATCH %s"],
        params=[fts],
    )
    counted = Subquery(Document.objects.filter(pk__in=pool).values(n=Func(Value(1), function="COUNT"))[:1])
    # bm25 is lower for better matches; title hits count ten times body hits.
    rank = RawSQL(f"-bm25({FTS_TABLE}, 10.0, 1.0)", [], output_field=FloatField())  # noqa: S611
    return ranked.annotate(search_rank=rank, search_pool=counted).order_by("-search_rank", "pk")


def search_after(documents: QuerySet[Document], cursor: str) -> QuerySet[Document]:
    """Keyset paging of ranked results: the rows after `cursor` ("rank:id", from `search_cursor`)."""
    from django.db.models import Q

    try:
        rank_text, pk_text = cursor.split(":", 1)
        rank, pk = float(rank_text), int(pk_text)
    except ValueError:
        return documents
    return documents.filter(Q(search_rank__lt=rank) | Q(search_rank=rank, pk__gt=pk))


def search_cursor(document: Document) -> str:
    return f"{document.search_rank!r}:{document.pk}"


def search_snippets(ids: list[int], text: str) -> dict[int, SafeString]:
    """Highlighted extracts of the given documents' bodies (or titles), for one page of results.

    The engine marks the matches with control characters; the text around them
    is escaped here, so a body's markup is never rendered.
    """
    query = search_parse(text)
    if query.empty or not ids:
        return {}
    marks = ", ".join(["%s"] * len(ids))
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            tsquery, params = _pg_tsquery(query)
            options = (f"StartSel={_MARK_OPEN}, StopSel={_MARK_CLOSE}, MaxWords=30, MinWords=12, "
                       'MaxFragments=2, FragmentDelimiter=" … "')  # fmt: skip
            cursor.execute(
                "SELECT id, ts_headline('english', left(body, 100000), " + tsquery + ", %s) "
                "FROM annotate_document WHERE id IN (" + marks + ")",
                [*params, options, *ids],
            )
        else:
            sql = "SELECT rowid, snippet(annotate_document_fts, 1, %s, %s, ' … ', 24) FROM annotate_document_fts "
            sql += "WHERE annotate_document_fts MATCH %s AND rowid IN (" + marks + ")"
            cursor.execute(sql, [_MARK_OPEN, _MARK_CLOSE, _fts_query(query), *ids])
        rows = cursor.fetchall()
    return {pk: _highlight(snippet) for pk, snippet in rows if snippet and _MARK_OPEN in snippet}


def _highlight(snippet: str) -> SafeString:
    """Escaped text with <mark> around the matches; a marker character that was in the body
    itself can only open or close a mark, never leave one unbalanced."""
    out, open_ = [], False
    for piece in re.split(f"([{_MARK_OPEN}{_MARK_CLOSE}])", " ".join(snippet.split())):
        if piece in (_MARK_OPEN, _MARK_CLOSE):
            want_open = piece == _MARK_OPEN
            if want_open != open_:
                out.append("<mark>" if want_open else "</mark>")
                open_ = want_open
        else:
            out.append(escape(piece))
    if open_:
        out.append("</mark>")
    return mark_safe("".join(out))  # noqa: S308 - every piece of text was escaped above


def search_index_ensure(*, using: str = "default") -> bool:
    """Recreate SQLite's search triggers, and refill the FTS table, if a table rebuild dropped them.

    Django alters a SQLite table by copying it into a new one, and the copy has
    no triggers; the FTS table would then silently miss every later change.
    Returns True if it had to repair. PostgreSQL keeps its generated column.
    """
    from django.db import connections

    conn = connections[using]
    if conn.vendor != "sqlite":
        return False
    with conn.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name LIKE 'annotate_document_fts%%'")
        present = {row[0] for row in cursor.fetchall()}
        if FTS_TABLE not in present or present >= set(SQLITE_TRIGGERS):
            return False  # not migrated yet, or intact
        for name, sql in SQLITE_TRIGGERS.items():
            if name not in present:
                cursor.execute(sql)
        cursor.execute("DELETE FROM annotate_document_fts")
        cursor.execute(SQLITE_FILL)
    return True
