from django import template

from annotate.render import render_markdown

register = template.Library()


@register.filter(name="markdown")
def markdown_filter(text):
    """Render imported Markdown/HTML as sanitised HTML: {{ document.body|markdown }}."""
    return render_markdown(text)
