from __future__ import annotations

import json

from django import template

register = template.Library()


@register.filter
def pretty_json(value) -> str:
    """Indented JSON for tool arguments (escaped by the template like any text)."""
    try:
        return json.dumps(value, indent=2, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(value)
