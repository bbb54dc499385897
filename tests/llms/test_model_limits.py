"""A model's sampling limits (what its chats may set, issue 46) are checked when an admin
saves them: a range must run upwards, top_p's within 0 to 1."""

from __future__ import annotations

import re

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from tests.llms.test_admin import form_data

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("limits", "field"),
    [
        ({"temperature_min": 1.5, "temperature_max": 1.0}, "temperature_max"),
        ({"temperature_min": -0.1}, "temperature_max"),
        ({"top_p_max": 1.2}, "top_p_max"),
        ({"top_p_min": 0.8, "top_p_max": 0.5}, "top_p_max"),
    ],
)
def test_a_range_that_does_not_run_upwards_is_refused(chat_model, limits, field) -> None:
    for name, value in limits.items():
        setattr(chat_model, name, value)
    with pytest.raises(ValidationError) as refused:
        chat_model.full_clean()
    assert list(refused.value.message_dict) == [field]


def test_the_defaults_and_a_narrowed_range_are_fine(chat_model) -> None:
    chat_model.full_clean()
    chat_model.temperature_min, chat_model.temperature_max = 0.2, 0.2
    chat_model.full_clean()


def test_the_admin_sets_a_models_prompt_and_limits(admin_client, chat_model) -> None:
    url = reverse("admin:llms_llmmodel_change", args=[chat_model.pk])
    page = admin_client.get(url)
    assert re.search(r'<h2 [^>]*class="fieldset-heading">In chats</h2>', page.content.decode())
    data = form_data(page) | {
        "system_prompt": "Answer in British English.",
        "temperature_min": "0.1",
        "temperature_max": "1.2",
    }
    assert admin_client.post(url, data).status_code == 302
    chat_model.refresh_from_db()
    assert chat_model.system_prompt == "Answer in British English."
    assert (chat_model.temperature_min, chat_model.temperature_max) == (0.1, 1.2)

    refused = admin_client.post(url, data | {"top_p_min": "0.9", "top_p_max": "0.2"})
    assert refused.status_code == 200
    assert "The top_p range must lie within 0 to 1, its lowest first." in refused.content.decode()
