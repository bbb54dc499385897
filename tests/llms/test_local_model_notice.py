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
    link = reverse("admin:llms_provider_connect")  # one screen: URL, key, models
    assert (f'href="{link}"' in html) is staff
    assert (f'href="{reverse("admin:llms_llmmodel_discover")}"' in html) is staff
    if not staff:
        assert "Ask an administrator" in html


def test_no_notice_for_other_providers():
    html = render_to_string(
        "llms/local_model_notice.html",
        {"model": model_of("openai"), "user": SimpleNamespace(is_staff=True)},
    )
    assert "offline" not in html
    assert "offline" not in render_to_string("llms/local_model_notice.html", {"model": None})


def test_the_notice_shows_the_recorded_score_and_what_it_is_good_at(tmp_path):
    """The numbers come from benchmarks/agent_tasks.py --record, not from the template."""
    from llms.bundled_score import bundled_score

    path = tmp_path / "score.json"
    path.write_text(
        '{"passed": 7, "tasks": 26, "measured_on": "2026-12-03", "median_first_word_s": 4.6,'
        ' "by_category": {"arithmetic": "3/6", "time": "2/2", "no tool": "0/3"}}'
    )
    score = bundled_score(path)

    assert score is not None and (score.passed, score.tasks) == (7, 26)
    assert score.good_at == ("arithmetic", "the time in a city") and score.first_word == "5 s"
    assert bundled_score(tmp_path / "missing.json") is None
    (tmp_path / "broken.json").write_text("{")
    assert bundled_score(tmp_path / "broken.json") is None


def test_the_shipped_score_is_rendered_for_the_bundled_model_only():
    from llms.bundled_score import bundled_score

    score = bundled_score()
    assert score is not None, "record it: benchmarks/agent_tasks.py --serve --record ..."
    html = render_to_string(
        "llms/local_model_notice.html",
        {"model": model_of("local"), "user": SimpleNamespace(is_staff=False)},
    )
    assert f"{score.passed} of {score.tasks} first-day tasks answered correctly" in html
    assert f"Measured on {score.measured_on}" in html
    assert all(kind in html for kind in score.good_at)
    other = LLMModel(provider=model_of("local").provider, model_id="other-gguf")
    html = render_to_string("llms/local_model_notice.html", {"model": other})
    assert "first-day tasks" not in html
