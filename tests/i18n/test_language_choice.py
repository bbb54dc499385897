"""Which language a page is in: the browser's Accept-Language, the language cookie, and
the signed-in user's own choice (their settings, or the header's language menu), which
wins everywhere they sign in."""

from __future__ import annotations

import zoneinfo

import pytest
from django.conf import settings
from django.test import Client
from django.utils import timezone, translation

from conversations import user_settings
from conversations.models import UserSettings

pytestmark = pytest.mark.django_db(transaction=True)

LANGUAGES = ("en", "zh-hans", "ja")


@pytest.fixture
def no_launch(monkeypatch):
    monkeypatch.setattr("conversations.runs.launcher.launch", lambda run_id: None)


def html_lang(response) -> str:
    head = response.content.decode().split(">", 2)[1]
    return head.split('lang="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize(
    ("accept", "language"),
    [("ja", "ja"), ("zh-CN,zh;q=0.9", "zh-hans"), ("zh-Hans", "zh-hans"), ("fr", "en"), ("", "en")],
)
def test_a_signed_out_page_follows_accept_language(client, accept, language) -> None:
    response = client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE=accept)
    assert response.status_code == 200
    assert html_lang(response) == language
    assert response.headers["Content-Language"] == language
    assert "Accept-Language" in response.headers["Vary"]


def test_the_users_own_choice_wins_over_the_browser(user_client, user) -> None:
    user_settings.settings_update(user, language="zh-hans")
    response = user_client.get("/settings/", HTTP_ACCEPT_LANGUAGE="ja")
    assert html_lang(response) == "zh-hans"
    assert response.headers["Content-Language"] == "zh-hans"


def test_without_a_choice_a_signed_in_page_follows_the_browser(user_client) -> None:
    response = user_client.get("/settings/", HTTP_ACCEPT_LANGUAGE="ja")
    assert html_lang(response) == "ja"


def test_the_language_menu_saves_the_choice_and_returns_to_the_page(user_client, user) -> None:
    response = user_client.post("/settings/language/", {"language": "ja", "next": "/usage/"})
    assert response.status_code == 302 and response["Location"] == "/usage/"
    assert UserSettings.objects.get(user=user).language == "ja"
    assert response.cookies[settings.LANGUAGE_COOKIE_NAME].value == "ja"
    other_browser = Client()
    other_browser.force_login(user)
    assert html_lang(other_browser.get("/usage/", HTTP_ACCEPT_LANGUAGE="en")) == "ja"


def test_the_language_menu_is_on_every_page_with_the_current_language_chosen(
    user_client, client
) -> None:
    for page in (user_client.get("/", HTTP_ACCEPT_LANGUAGE="ja"), client.get("/accounts/login/")):
        html = page.content.decode()
        assert 'action="/settings/language/"' in html
        assert '<option value="zh-hans" lang="zh-hans">简体中文</option>' in html
        assert 'lang="ja" selected' in html or 'lang="en" selected' in html


def test_signed_out_the_menu_sets_the_cookie_the_sign_in_page_reads(client) -> None:
    response = client.post(
        "/settings/language/", {"language": "zh-hans", "next": "/accounts/login/"}
    )
    assert response.status_code == 302
    assert html_lang(client.get("/accounts/login/", HTTP_ACCEPT_LANGUAGE="ja")) == "zh-hans"


@pytest.mark.parametrize("target", ["https://evil.example/", "//evil.example/x", ""])
def test_the_menu_never_sends_anyone_to_another_site(user_client, target) -> None:
    response = user_client.post("/settings/language/", {"language": "ja", "next": target})
    assert response["Location"] == "/"


def test_an_unknown_language_is_refused_and_nothing_is_saved(user_client, user) -> None:
    response = user_client.post("/settings/language/", {"language": "xx", "next": "/"})
    assert response.status_code == 400
    assert not UserSettings.objects.filter(user=user, language="xx").exists()
    assert user_client.get("/settings/language/").status_code == 405


def test_the_javascript_catalogue_is_served_to_everyone_in_their_language(client) -> None:
    response = client.get("/jsi18n/?lang=ja", HTTP_ACCEPT_LANGUAGE="ja")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/javascript")
    assert "django.gettext" in response.content.decode()
    assert "max-age" in response.headers["Cache-Control"]


def test_pages_load_the_catalogue_of_their_language_before_other_scripts(user_client) -> None:
    html = user_client.get("/", HTTP_ACCEPT_LANGUAGE="ja").content.decode()
    catalogue = html.index('<script src="/jsi18n/?lang=ja">')
    assert catalogue < html.index("htmx-2.min.js") < html.index("js/sidebar.js")


def test_dates_and_numbers_are_written_the_languages_way(user_client, user, chat_model) -> None:
    from tests.usage.conftest import spend

    spend(user, chat_model, 12_000, 345)
    today = timezone.localdate()
    pages = {code: user_client.get("/usage/", HTTP_ACCEPT_LANGUAGE=code) for code in LANGUAGES}
    day_of = {code: page.content.decode() for code, page in pages.items()}
    assert f"{today.year}年{today.month}月{today.day}日" in day_of["ja"]
    assert f"{today.year}年{today.month}月{today.day}日" in day_of["zh-hans"]
    assert f"{today:%b}. {today.day}, {today.year}" in day_of["en"] or (
        f"{today:%B} {today.day}, {today.year}" in day_of["en"]
    )
    # Django's formats: Chinese groups no thousands, English and Japanese by commas.
    assert "12,345" in day_of["en"] and "12,345" in day_of["ja"]
    assert "12345" in day_of["zh-hans"] and "12,345" not in day_of["zh-hans"]


def test_the_users_time_zone_makes_the_pages_times_local(user_client, user) -> None:
    from conversations.http.tokens import token_create

    token, _raw = token_create(user=user, name="t")
    user_settings.settings_update(user, timezone="Asia/Tokyo")
    html = user_client.get("/settings/tokens/").content.decode()
    tokyo = timezone.localtime(token.created_at, zoneinfo.ZoneInfo("Asia/Tokyo"))
    assert f">{tokyo:%Y-%m-%d %H:%M}</time>" in html


async def test_a_runs_words_are_in_the_language_it_was_asked_in(
    user, chat_model, llm_server, no_launch
) -> None:
    from asgiref.sync import sync_to_async

    from conversations import services
    from conversations.models import Run
    from tests.conversations.running import execute

    conversation = await sync_to_async(services.conversation_create)(owner=user)
    llm_server.push({"status": 401, "error_body": {"error": {"message": "bad key"}}})
    with translation.override("ja"):
        _message, run, _started = await sync_to_async(services.message_post)(
            conversation=conversation, user=user, content="こんにちは"
        )
    assert await execute(run.pk) == Run.Status.FAILED
    failed = await Run.objects.aget(pk=run.pk)
    assert failed.language == "ja"
    with translation.override("ja"):
        expected = translation.gettext(
            "The model's provider refused its API key. "
            "An administrator needs to check the provider's settings."
        )
    assert failed.error == expected and expected.isascii() is False


async def test_the_owners_own_choice_wins_for_a_runs_words(
    user, chat_model, llm_server, no_launch
) -> None:
    from asgiref.sync import sync_to_async

    from conversations import services
    from conversations.models import Run
    from tests.conversations.running import execute

    await sync_to_async(user_settings.settings_update)(user, language="zh-hans")
    conversation = await sync_to_async(services.conversation_create)(owner=user)
    llm_server.push({"status": 401, "error_body": {"error": {"message": "bad key"}}})
    _message, run, _started = await sync_to_async(services.message_post)(
        conversation=conversation, user=user, content="你好"
    )
    assert await execute(run.pk) == Run.Status.FAILED
    failed = await Run.objects.aget(pk=run.pk)
    with translation.override("zh-hans"):
        assert failed.error == translation.gettext(
            "The model's provider refused its API key. "
            "An administrator needs to check the provider's settings."
        )
