"""The chat page's notice for the bundled offline demo model (template only)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from llms.models import LLMModel, Provider


def model_of(kind: str) -> LLMModel:
    provider = Provider(name=kind, kind=kind, base_url="http://127.0.0.1/v1")
    return LLMModel(provider=provider, model_id="SmolLM2", display_name="SmolLM2 135M")


@pytest.mark.parametrize("staff", [True, False])
def test_local_model_notice(staff: bool):
    html = render_to_string(
        "llms/local_model_notice.html",
        {"model": model_of("local"), "user": SimpleNamespace(is_staff=staff)},
    )
    assert "tiny offline demo model" in html and "SmolLM2 135M" in html
    link = reverse("admin:llms_provider_add")
    assert (f'href="{link}"' in html) is staff
    if not staff:
        assert "Ask an administrator" in html


def test_no_notice_for_other_providers():
    html = render_to_string(
        "llms/local_model_notice.html",
        {"model": model_of("openai"), "user": SimpleNamespace(is_staff=True)},
    )
    assert "offline" not in html
    assert "offline" not in render_to_string("llms/local_model_notice.html", {"model": None})
