from django import template
from django.conf import settings

register = template.Library()


@register.simple_tag
def max_upload_mb() -> int:
    """FAULTLINE_MAX_UPLOAD_MB, for the upload form's hint and its client-side size check."""
    return settings.FAULTLINE_MAX_UPLOAD_MB


@register.simple_tag
def max_upload_bytes() -> int:
    return settings.FAULTLINE_MAX_UPLOAD_MB * 1024 * 1024


@register.simple_tag
def jobs_run_inline() -> bool:
    """True without a Celery broker (`make run`): jobs run eagerly inside the request that starts them."""
    return bool(settings.CELERY_TASK_ALWAYS_EAGER)
