"""Template helpers for artifact previews (``{% load artifacts %}``)."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from tools.artifacts import artifact_read_text
from tools.markdown.render import render_markdown
from tools.models import Artifact

register = template.Library()

INLINE_MARKDOWN_BYTES = 512 * 1024


@register.filter
def artifact_markdown(artifact: Artifact) -> SafeString:
    """The markdown artifact rendered and sanitised (nh3), safe to place in the page; its
    code highlighted by Pygments (the sandboxed document runs no script)."""
    try:
        text = artifact_read_text(artifact, INLINE_MARKDOWN_BYTES)
    except (OSError, ValueError):
        return render_markdown("*" + _("(the file is missing)") + "*", highlight=True)
    return render_markdown(text, highlight=True)
