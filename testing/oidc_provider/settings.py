"""Settings of the test OIDC provider; never loaded next to agentsite's.

``python -m testing.oidc_provider`` sets the ``OIDC_PROVIDER_*`` variables read here.
"""

from __future__ import annotations

import os
from pathlib import Path

DATA_DIR = Path(os.environ["OIDC_PROVIDER_DATA_DIR"])
ISSUER = os.environ["OIDC_PROVIDER_ISSUER"]
CONTROL_TOKEN = os.environ["OIDC_PROVIDER_CONTROL_TOKEN"]

# A test double on loopback: a fixed key is enough (sessions survive a restart).
SECRET_KEY = "oidc-provider-test-double-not-a-secret-" + "x" * 30
DEBUG = False
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]"]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "oauth2_provider",
    "testing.oidc_provider",
]
MIDDLEWARE = [
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
]
ROOT_URLCONF = "testing.oidc_provider.urls"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "APP_DIRS": True,  # ours (templates/oidc_provider/) and DOT's logout confirmation
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
            ]
        },
    }
]
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": DATA_DIR / "provider.sqlite3",
        "OPTIONS": {"timeout": 20},
    }
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
USE_TZ = True
TIME_ZONE = "UTC"

# Cookies are per host, not per port: the app under test on 127.0.0.1 uses Django's
# default names, so the provider's must differ or the two would overwrite each other.
SESSION_COOKIE_NAME = "idp_sessionid"
CSRF_COOKIE_NAME = "idp_csrftoken"
LOGIN_URL = "/accounts/login/"
LOGIN_REDIRECT_URL = "/"
# PBKDF2's deliberate slowness buys nothing here (passwords and hashed client secrets).
PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

OAUTH2_PROVIDER = {
    "OIDC_ENABLED": True,
    "OIDC_ISS_ENDPOINT": ISSUER,
    "OIDC_RSA_PRIVATE_KEY": (DATA_DIR / "signing-key.pem").read_text(),
    "OAUTH2_VALIDATOR_CLASS": "testing.oidc_provider.validators.ProviderValidator",
    "SCOPES": {
        "openid": "OpenID Connect",
        "email": "Email address",
        "profile": "Name and username",
        "groups": "Group names",
    },
    "DEFAULT_SCOPES": ["openid"],
    # Clients are registered for the authorization-code grant only.
    "OIDC_RESPONSE_TYPES_SUPPORTED": ["code"],
    # Accept clients with and without PKCE (a code_challenge sent is still verified).
    "PKCE_REQUIRED": False,
    "OIDC_RP_INITIATED_LOGOUT_ENABLED": True,
    # No confirmation page when the id_token_hint belongs to the signed-in user.
    "OIDC_RP_INITIATED_LOGOUT_ALWAYS_PROMPT": False,
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"stderr": {"class": "logging.StreamHandler"}},
    "loggers": {
        "django": {"handlers": ["stderr"], "level": "INFO"},
        "oauth2_provider": {"handlers": ["stderr"], "level": "DEBUG"},
    },
}
