"""Log filters: an expected refusal is one line, not a traceback."""

from __future__ import annotations

import logging


class ExpectedRefusals(logging.Filter):
    """On `django.request`: a 4xx answer (PermissionDenied, BadRequest, a refused upload) is logged as
    one line with the reason, without the traceback Django attaches. The code that refused is working
    as meant; a traceback in the log would only bury the real failures (5xx, which keep theirs)."""

    def filter(self, record: logging.LogRecord) -> bool:
        status = getattr(record, "status_code", None)
        if record.exc_info and status is not None and 400 <= status < 500:
            exc = record.exc_info[1]
            reason = str(exc).splitlines()[0][:300] if exc is not None and str(exc) else ""
            record.msg = f"{record.msg} ({type(exc).__name__}{': ' + reason if reason else ''})"
            record.exc_info, record.exc_text = None, None
        return True
