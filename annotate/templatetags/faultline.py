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
