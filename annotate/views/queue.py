"""The coder's queue: "next episode" and "skip"."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.html import format_html
from django.views.decorators.http import require_GET, require_http_methods, require_POST
from django_htmx.http import HttpResponseClientRedirect

from annotate.coding.queue import episode_next, lease_end, lease_held, lease_release
from annotate.coding.selectors import coded_since, coder_queue_left, study_progress
from annotate.models import Episode, Lease, Study
from annotate.views.access import study_view

# Skipped episodes are remembered per study in the session, so "next" does not
# hand the same one straight back; they come round again once nothing else is left.
SKIP_MEMORY = 50


def _skipped_key(study: Study) -> str:
    return f"faultline:skipped:{study.pk}"


@require_GET
@study_view("write")
def coding_progress(request: HttpRequest, study: Study) -> HttpResponse:
    """The workspace header's "k of n left for you" and "coded this session" (htmx; reloaded after each save)."""
    context = {
        "study": study, "queue": coder_queue_left(study, request.user),
        "session_coded": coded_since(study, request.user, request.user.last_login),
    }  # fmt: skip
    return render(request, "annotate/partials/_workspace_progress.html", context)


def next_url(request: HttpRequest, study: Study, *, resume: bool = True) -> str:
    """Claim the coder's next episode (for a POST) and return its coding page, or the empty queue's page."""
    skipped = request.session.get(_skipped_key(study), [])
    episode = episode_next(study=study, coder=request.user, skipped=skipped, resume=resume)
    if episode is None:
        return reverse("coding_next", args=[study.slug]) + "?empty=1"
    return reverse("coding_page", args=[study.slug, episode.pk])


@require_http_methods(["GET", "POST"])
@study_view("write")
def coding_next(request: HttpRequest, study: Study) -> HttpResponse:
    """POST claims the next episode and goes to it. GET claims nothing: it returns to the episode the
    coder holds, or shows the button that claims one."""
    if request.method == "POST":
        episode = episode_next(study=study, coder=request.user, skipped=request.session.get(_skipped_key(study), []))
        if episode is None:
            context = {"study": study, "progress": study_progress(study, request.membership)}
            return render(request, "annotate/queue_empty.html", context)
        return redirect("coding_page", slug=study.slug, pk=episode.pk)
    held = lease_held(study=study, coder=request.user)
    if held is not None:
        return redirect("coding_page", slug=study.slug, pk=held.pk)
    if request.GET.get("empty"):  # where a POST that found nothing sent the coder
        context = {"study": study, "progress": study_progress(study, request.membership)}
        return render(request, "annotate/queue_empty.html", context)
    return render(request, "annotate/queue_next.html", {"study": study})


@require_POST
@study_view("write")
def coding_skip(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Give the episode back to the queue and move on."""
    episode = get_object_or_404(Episode, pk=pk, study=study)
    lease_release(episode=episode, coder=request.user)
    key = _skipped_key(study)
    request.session[key] = [pk, *[i for i in request.session.get(key, []) if i != pk]][:SKIP_MEMORY]
    back = reverse("coding_page", args=[study.slug, pk])
    messages.info(
        request,
        format_html(
            'Skipped episode {}: it went back to the queue, and comes back to you last. <a href="{}">Undo</a>',
            pk, back,
        ),
    )  # fmt: skip
    url = next_url(request, study)
    return HttpResponseClientRedirect(url) if request.htmx else redirect(url)


@require_POST
@study_view("write")
def coding_leave(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """Back: give the episode back to the queue (end the coder's lease) and return to the study."""
    episode = get_object_or_404(Episode, pk=pk, study=study)
    if lease_release(episode=episode, coder=request.user):
        messages.info(request, f"You left episode {pk}; it went back to the queue.")
    return redirect("study_overview", slug=study.slug)


@require_POST
@study_view("owner")
def lease_release_view(request: HttpRequest, study: Study, pk: int) -> HttpResponse:
    """An owner ends a coder's lease; back to the page the button was on (the episode's or the study's)."""
    try:
        lease = lease_end(study=study, lease_id=pk)
    except Lease.DoesNotExist:
        messages.info(request, "That lease had already ended.")
    else:
        who = lease.coder.get_username()
        messages.success(request, f"Released {who}'s lease on episode {lease.episode_id}; it is back in the queue.")
    if request.POST.get("next") == "episode" and request.POST.get("episode", "").isdigit():
        return redirect("episode_detail", slug=study.slug, pk=int(request.POST["episode"]))
    return redirect("study_overview", slug=study.slug)
