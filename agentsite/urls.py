from __future__ import annotations

from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.urls import include, path
from django.views.decorators.cache import cache_page
from django.views.i18n import JavaScriptCatalog

from conversations import language_pages
from conversations.accounts import oidc
from conversations.accounts.views import SignInView, SignOutView
from conversations.api import token_pages
from core import health, metrics
from knowledge import views as knowledge_views
from llms import views as usage_views
from tools.markdown import views as markdown_views

urlpatterns = [
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("admin/", admin.site.urls),
    # The JavaScript catalogue: base.html asks for it with ?lang=<code>, so a browser's
    # cached copy is never one of another language.
    path(
        "jsi18n/",
        login_not_required(cache_page(3600)(JavaScriptCatalog.as_view())),
        name="javascript-catalog",
    ),
    path("settings/language/", language_pages.set_language, name="set_language"),
    path("accounts/login/", SignInView.as_view(), name="login"),
    path("accounts/logout/", SignOutView.as_view(), name="logout"),
    path("accounts/", include("django.contrib.auth.urls")),
    path(
        "oidc/authenticate/",
        login_not_required(oidc.start_sign_in),
        name="oidc_authentication_init",
    ),
    path(
        "oidc/callback/",
        login_not_required(oidc.SSOCallbackView.as_view()),
        name="oidc_authentication_callback",
    ),
    path("api/", include("conversations.api.urls")),
    path("artifacts/", include("tools.urls")),
    path("knowledge/passages/<id:chunk_id>/", knowledge_views.passage, name="knowledge_passage"),
    path("markdown/mermaid-frame/", markdown_views.mermaid_frame, name="mermaid_frame"),
    path("usage/", usage_views.usage_page, name="usage"),
    path("settings/tokens/", token_pages.token_list, name="token_list"),
    path("settings/tokens/<id:token_id>/revoke/", token_pages.token_revoke, name="token_revoke"),
    path("", include("conversations.urls")),
]

# JSON under /api/, readable pages elsewhere (core/error_views.py).
handler400 = "core.error_views.bad_request"
handler404 = "core.error_views.page_not_found"
handler500 = "core.error_views.server_error"
