"""A real OpenID Connect provider for tests: django-oauth-toolkit in OIDC mode, in its own
process with its own settings and SQLite database.

The app signs users in through OIDC; its tests need an identity provider that speaks the
protocol for real (discovery, RS256 ID tokens, JWKS, userinfo, refresh, RP-initiated
logout) and that a test can steer: users, groups, disabled accounts, clients, and ID
tokens that must be refused. Run it with::

    OIDC_PROVIDER_CONTROL_TOKEN=secret python -m testing.oidc_provider --port 8300 --data-dir DIR

The issuer is ``http://127.0.0.1:PORT/o``; discovery answers at
``<issuer>/.well-known/openid-configuration`` (with or without a trailing slash). The login
form is ``/accounts/login/``. Control endpoints (``POST /_control/<action>``, a JSON body,
header ``X-Control-Token``; see :mod:`testing.oidc_provider.control`):

- ``user``: ``{"username", "password"?, "email"?, "name"?, "groups"?: [...], "active"?,
  "email_verified"?}`` creates or updates a user; answers ``{"sub"}``
- ``client``: ``{"client_id", "client_secret", "redirect_uris": [...],
  "post_logout_redirect_uris"?: [...]}`` registers or updates a confidential client
- ``misbehave``: ``{"id_token": "normal" | "tamper" | "expired" | "wrong_audience"}``
  for the ID tokens issued from then on

The pytest side is tests/sso/oidc.py. Nothing here is imported by the tests' own process:
this package configures Django differently from agentsite.
"""
