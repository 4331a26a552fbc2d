"""Upload handlers: Django's own two, reading the request body 1 MB at a time instead of 64 KB.

gunicorn reads a body of known length up to 1 MB per recv() and keeps what the application has not
asked for yet in a buffer that every read copies whole twice (gunicorn.http.unreader.Unreader.read):
read 64 KB at a time, a 32 MB upload of 10,000 issues copied about 1 GB, a third of the web
worker's CPU for the import. Read 1 MB at a time, each read takes what one recv() gave. The
multipart parser keeps one chunk in memory, so 1 MB per upload in flight."""

from __future__ import annotations

from django.core.files.uploadhandler import MemoryFileUploadHandler, TemporaryFileUploadHandler

CHUNK = 1 << 20


class MemoryUpload(MemoryFileUploadHandler):
    chunk_size = CHUNK


class TemporaryUpload(TemporaryFileUploadHandler):
    chunk_size = CHUNK
