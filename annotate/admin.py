from django.contrib import admin
from simple_history.admin import SimpleHistoryAdmin

from annotate.models import (
    Adjudication,
    ApiToken,
    Artifact,
    Coding,
    Document,
    Episode,
    Job,
    Lease,
    LocalModel,
    Membership,
    Study,
    Suggestion,
    TriageEvent,
    WebhookDelivery,
)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    raw_id_fields = ["user"]


@admin.register(Study)
class StudyAdmin(admin.ModelAdmin):
    list_display = ["slug", "name", "codebook", "coders_per_episode", "blind"]
    inlines = [MembershipInline]
    exclude = ["webhook_secret"]
    # Set on the study's webhook page, which checks the destination and makes the secret.
    readonly_fields = ["webhook_url"]


@admin.register(Document)
class DocumentAdmin(admin.ModelAdmin):
    list_display = ["external_id", "kind", "cluster", "study"]
    list_filter = ["kind", "study"]
    search_fields = ["external_id", "title", "cluster"]
    readonly_fields = ["raw", "content_hash"]


@admin.register(Episode)
class EpisodeAdmin(admin.ModelAdmin):
    list_display = ["id", "document", "split", "status", "n_codings"]
    list_filter = ["split", "status", "study"]
    raw_id_fields = ["document"]


@admin.register(Coding)
class CodingAdmin(SimpleHistoryAdmin):
    list_display = ["id", "episode", "coder", "failure_type", "not_a_failure", "version", "updated_at"]
    raw_id_fields = ["episode", "from_suggestion"]
    list_select_related = ["coder", "failure_type"]


@admin.register(Adjudication)
class AdjudicationAdmin(SimpleHistoryAdmin):
    list_display = ["episode", "adjudicator", "failure_type", "updated_at"]
    raw_id_fields = ["episode"]


@admin.register(Suggestion)
class SuggestionAdmin(admin.ModelAdmin):
    list_display = ["id", "episode", "backend", "model", "failure_type", "confidence", "status", "error"]
    list_filter = ["backend", "status"]
    raw_id_fields = ["episode"]


@admin.register(Job)
class JobAdmin(admin.ModelAdmin):
    list_display = ["id", "kind", "study", "status", "done", "total", "created_at"]
    list_filter = ["kind", "status"]


admin.site.register([Lease, LocalModel, Artifact, TriageEvent, WebhookDelivery])


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["name", "user", "prefix", "created_at", "revoked_at"]
    readonly_fields = ["key_hash", "prefix"]
