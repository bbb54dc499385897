"""The provider's URLs: DOT's OAuth2 and OIDC endpoints under ``/o/`` (the issuer), a login
form, the control endpoint, and a home page."""

from __future__ import annotations

from django.contrib.auth.views import LoginView
from django.urls import include, path
from oauth2_provider.urls import base_urlpatterns, oidc_urlpatterns

from testing.oidc_provider.control import control
from testing.oidc_provider.views import home

# Not DOT's application/token management pages nor its dynamic registration: clients come
# from the control endpoint.
dot_urls = (base_urlpatterns + oidc_urlpatterns, "oauth2_provider")

LOGIN_TEMPLATE = "oidc_provider/login.html"  # a plain form: ids id_username, id_password

urlpatterns = [
    path("o/", include(dot_urls)),
    path(
        "accounts/login/", LoginView.as_view(template_name="oidc_provider/login.html"), name="login"
    ),
    path("_control/<slug:action>", control, name="control"),
    path("", home, name="home"),
]
