"""The codebook data of the coding page's type picker, as a script the browser caches per codebook version.

Every coding page needs the same 50 KB of types, definitions and indicators. Sent
inline it made up two thirds of each page; as a script whose URL names the
published version it is fetched once and then served from the browser's cache
for as long as the codebook exists (a published codebook is immutable).
"""

from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET

from annotate.coding.selectors import codebook_picker
from taxonomy.models import Codebook

YEAR_S = 365 * 24 * 3600


@require_GET
def codebook_data_js(request: HttpRequest, pk: int, stamp: str) -> HttpResponse:
    picker = codebook_picker(get_object_or_404(Codebook, pk=pk))
    if stamp != picker.stamp:
        raise Http404("No such version of this codebook.")
    # JSON is a JavaScript expression; "</" cannot end a script that is a file of its own.
    response = HttpResponse(f"window.FaultlineCodebook = {picker.data_json};\n", content_type="text/javascript")
    if picker.stamp == "draft":
        response["Cache-Control"] = "private, no-cache"
    else:
        response["Cache-Control"] = f"private, max-age={YEAR_S}, immutable"
    return response
