"""``{% bundled_model_score model as score %}``: the bundled model's measured score, when
``model`` is the bundled one (None otherwise, or when nothing was recorded)."""

from __future__ import annotations

from typing import Any

from django import template

from llms.bundled_score import BundledScore, bundled_score
from llms.local_server import DEFAULT_MODEL_ALIAS

register = template.Library()


@register.simple_tag
def bundled_model_score(model: Any) -> BundledScore | None:
    if getattr(model, "model_id", None) != DEFAULT_MODEL_ALIAS:
        return None
    return bundled_score()
