from django.contrib import admin

from taxonomy.models import AxisValue, Category, Codebook, CodebookRule, FailureType


class PublishedReadOnly:
    """A published codebook is immutable, in the admin as everywhere else."""

    def _codebook(self, obj):
        return obj if isinstance(obj, Codebook) else getattr(obj, "codebook", None)

    def has_change_permission(self, request, obj=None):
        codebook = self._codebook(obj) if obj else None
        if codebook is not None and codebook.is_published:
            return False
        return super().has_change_permission(request, obj)

    def has_delete_permission(self, request, obj=None):
        codebook = self._codebook(obj) if obj else None
        if codebook is not None and codebook.is_published:
            return False
        return super().has_delete_permission(request, obj)


@admin.register(Codebook)
class CodebookAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["name", "version", "published_at", "parent"]
    readonly_fields = ["published_at", "parent", "created_at"]


@admin.register(AxisValue)
class AxisValueAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["code", "axis", "name", "codebook"]
    list_filter = ["codebook", "axis"]


@admin.register(Category)
class CategoryAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["code", "name", "codebook"]
    list_filter = ["codebook"]


@admin.register(FailureType)
class FailureTypeAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["code", "name", "category", "typical_source", "codebook"]
    list_filter = ["codebook", "category"]
    search_fields = ["code", "name", "definition"]


@admin.register(CodebookRule)
class CodebookRuleAdmin(PublishedReadOnly, admin.ModelAdmin):
    list_display = ["rule_id", "codebook"]
    list_filter = ["codebook"]
