from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.views.decorators.http import require_GET

from taxonomy.models import Axis
from taxonomy.selectors import TypeFilter, axis_values, codebooks_for, failure_types, filter_types, group_by_category
from taxonomy.services import codebook_diff


@require_GET
def codebook_list(request: HttpRequest) -> HttpResponse:
    codebooks = codebooks_for(request.user).select_related("parent").order_by("name", "-created_at")
    return render(request, "taxonomy/codebook_list.html", {"codebooks": codebooks})


@require_GET
def codebook_detail(request: HttpRequest, pk: int) -> HttpResponse:
    codebook = get_object_or_404(codebooks_for(request.user), pk=pk)
    g = request.GET
    f = TypeFilter(
        q=g.get("q", "").strip()[:200],
        source=g.get("source", ""),
        stage=g.get("stage", ""),
        capability=g.get("capability", ""),
        category=g.get("category", ""),
    )
    all_types = list(failure_types(codebook))
    shown = filter_types(all_types, f)
    axes = axis_values(codebook)
    names = {(v.axis, v.code): v.name for values in axes.values() for v in values}
    for t in shown:  # the typical codes as readers know them; an unknown code shows as it is
        t.typical_names = [
            ("source", names.get((Axis.SOURCE, t.typical_source), t.typical_source)),
            *(("stage", names.get((Axis.STAGE, c), c)) for c in t.typical_stages),
            *(("capability", names.get((Axis.CAPABILITY, c), c)) for c in t.typical_capabilities),
        ]
    context = {
        "codebook": codebook,
        "filter": f,
        "groups": group_by_category(shown),
        "shown": len(shown),
        "total": len(all_types),
    }
    if request.htmx:
        return render(request, "taxonomy/partials/_type_list.html", context)
    context["axes"] = axes
    context["categories"] = codebook.categories.all()
    return render(request, "taxonomy/codebook_detail.html", context)


@require_GET
def type_detail(request: HttpRequest, pk: int, code: str) -> HttpResponse:
    codebook = get_object_or_404(codebooks_for(request.user), pk=pk)
    ftype = get_object_or_404(failure_types(codebook), code=code)
    values = {(v.axis, v.code): v for values in axis_values(codebook).values() for v in values}
    context = {
        "codebook": codebook,
        "type": ftype,
        "source": values.get((Axis.SOURCE, ftype.typical_source)),
        "stages": [values[(Axis.STAGE, c)] for c in ftype.typical_stages if (Axis.STAGE, c) in values],
        "capabilities": [
            values[(Axis.CAPABILITY, c)] for c in ftype.typical_capabilities if (Axis.CAPABILITY, c) in values
        ],
        "rules": [r for r in codebook.rules.all() if ftype.code in r.applies_to],
    }
    return render(request, "taxonomy/type_detail.html", context)


@require_GET
def codebook_diff_view(request: HttpRequest, pk: int) -> HttpResponse:
    new = get_object_or_404(codebooks_for(request.user), pk=pk)
    against = request.GET.get("against") or new.parent_id
    if against and not (str(against).isascii() and str(against).isdigit() and int(against) < 2**63):
        message = "'against' must be the number of a codebook to compare with, e.g. ?against=3."
        return render(request, "400.html", {"message": message}, status=400)
    old = get_object_or_404(codebooks_for(request.user), pk=against) if against else None
    context = {
        "new": new,
        "old": old,
        "diffs": codebook_diff(old=old, new=new) if old else [],
        "others": codebooks_for(request.user).exclude(pk=new.pk),
    }
    return render(request, "taxonomy/codebook_diff.html", context)
