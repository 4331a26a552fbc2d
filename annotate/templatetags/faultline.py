from django import template

from annotate.documents.render import render_markdown, safe_link

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text):
    """Render imported Markdown/HTML as sanitised HTML: {{ document.body|markdown }}."""
    return render_markdown(text)


@register.filter(name="safe_link")
def safe_link_filter(url):
    """An imported link, only if it is http(s): {% with link=document.url|safe_link %}{% if link %}..."""
    return safe_link(url)


# What each job kind (annotate.jobs.registry) does, as its page and the Jobs list name it.
JOB_LABELS = {
    "import": "Import",
    "import_traces": "Trace import",
    "export_parquet": "Parquet export",
    "suggest": "Suggestions",
    "retrain": "Suggester training",
    "audit": "Suggester audit",
    "bootstrap": "Analysis",
    "recount": "Recount",
}


@register.filter(name="job_label")
def job_label_filter(kind):
    """import_traces → "Trace import"; a kind not listed reads with spaces."""
    text = JOB_LABELS.get(kind) or str(kind).replace("_", " ")
    return text[:1].upper() + text[1:]
