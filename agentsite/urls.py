from __future__ import annotations

from django.contrib import admin
from django.urls import include, path

from conversations import token_views

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("conversations.api_urls")),
    path("artifacts/", include("tools.urls")),
    path("settings/tokens/", token_views.token_list, name="token_list"),
    path("settings/tokens/<int:token_id>/revoke/", token_views.token_revoke, name="token_revoke"),
    path("", include("conversations.urls")),
]
