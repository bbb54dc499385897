"""Signing in against a real LDAP directory (slapd), as a team's users would (issue 44).

The site's settings are those ``AGENTSITE_LDAP_*`` produce (agentsite/settings.py), pointed
at a slapd the test starts with a seeded directory: alice in ``engineers`` and
``agents-users``, bob in ``agents-users`` only; membership of ``agents-users`` is required.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from audit.models import AuditEvent
from conversations.http.tokens import token_create
from conversations.models import ExternalIdentity
from tests.sso.ldap_server import PASSWORDS, LDAPServer, ldap, running_slapd

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

LOGIN = "/accounts/login/"
API = "/api/conversations"


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[LDAPServer]:
    with running_slapd(tmp_path) as server:
        yield server


@pytest.fixture
def ldap_site(settings, directory: LDAPServer) -> LDAPServer:
    return configure(settings, directory)


def configure(settings, directory: LDAPServer) -> LDAPServer:
    """The settings AGENTSITE_LDAP_* give, for this directory; asked again at each request."""
    from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

    settings.AUTH_LDAP_SERVER_URI = directory.uri
    settings.AUTH_LDAP_BIND_DN = directory.bind_dn
    settings.AUTH_LDAP_BIND_PASSWORD = directory.bind_password
    settings.AUTH_LDAP_USER_SEARCH = LDAPSearch(
        directory.users_dn, ldap.SCOPE_SUBTREE, "(uid=%(user)s)"
    )
    settings.AUTH_LDAP_GROUP_SEARCH = LDAPSearch(
        directory.groups_dn, ldap.SCOPE_SUBTREE, "(objectClass=groupOfNames)"
    )
    settings.AUTH_LDAP_GROUP_TYPE = GroupOfNamesType(name_attr="cn")
    settings.AUTH_LDAP_USER_ATTR_MAP = {
        "first_name": "givenName",
        "last_name": "sn",
        "email": "mail",
    }
    required = directory.group_dn("agents-users")
    settings.AUTH_LDAP_REQUIRE_GROUP = required
    settings.AUTH_LDAP_USER_FLAGS_BY_GROUP = {"is_active": required}
    settings.AUTHENTICATION_BACKENDS = [
        *settings.AUTHENTICATION_BACKENDS,
        "conversations.accounts.ldapauth.DirectoryBackend",
    ]
    settings.AGENTSITE_SSO_RECHECK_MINUTES = 0  # ask the directory at every request
    return directory


def sign_in(client, username: str, password: str):
    return client.post(LOGIN, {"username": username, "password": password})


def groups_of(user) -> set[str]:
    return set(user.groups.values_list("name", flat=True))


def test_first_sign_in_creates_the_user_with_the_directorys_groups(
    ldap_site, client, django_user_model
) -> None:
    response = sign_in(client, "alice", PASSWORDS["alice"])
    assert response.status_code == 302, response.content[:500]
    alice = django_user_model.objects.get(username="alice")
    assert alice.email == "alice@example.org"
    assert groups_of(alice) == {"engineers", "agents-users"}
    assert ExternalIdentity.objects.filter(user=alice, source="ldap", subject="alice").exists()
    assert client.get("/").status_code == 200  # signed in


def test_a_wrong_password_or_an_unknown_user_is_refused(ldap_site, client) -> None:
    assert sign_in(client, "alice", "not-her-password").status_code == 200  # the form again
    assert sign_in(client, "mallory", "anything").status_code == 200
    assert "_auth_user_id" not in client.session


def test_groups_follow_the_directory_but_keep_those_an_admin_gave(
    ldap_site, client, django_user_model
) -> None:
    sign_in(client, "alice", PASSWORDS["alice"])
    alice = django_user_model.objects.get(username="alice")
    alice.groups.add(Group.objects.create(name="given-by-hand"))
    ldap_site.remove_from_group("alice", "engineers")
    ldap_site.create_group("researchers")
    ldap_site.add_to_group("alice", "researchers")

    client.logout()
    sign_in(client, "alice", PASSWORDS["alice"])
    assert groups_of(alice) == {"agents-users", "researchers", "given-by-hand"}
    changed = AuditEvent.objects.filter(action="sso.groups_changed", target_id=str(alice.pk))
    assert changed.count() == 2  # the first sign-in, then this one


def test_a_user_removed_from_the_directory_loses_their_session_and_tokens(
    ldap_site, client, django_user_model
) -> None:
    sign_in(client, "bob", PASSWORDS["bob"])
    bob = django_user_model.objects.get(username="bob")
    _, raw = token_create(user=bob, name="script")
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.get(API, **bearer).status_code == 200

    ldap_site.delete_user("bob")
    refused = client.get(API, **bearer)
    assert refused.status_code == 401
    assert "disabled" in refused.json()["error"]
    bob.refresh_from_db()
    assert not bob.is_active
    assert AuditEvent.objects.filter(action="sso.user_disabled", target_id=str(bob.pk)).exists()
    page = client.get("/")  # the browser's session ends too
    assert page.status_code == 302 and "/accounts/login/" in page["Location"]


def test_leaving_the_required_group_disables_the_user_at_their_next_request(
    ldap_site, client, django_user_model
) -> None:
    sign_in(client, "alice", PASSWORDS["alice"])
    assert client.get("/").status_code == 200
    ldap_site.remove_from_group("alice", "agents-users")

    page = client.get("/")
    assert page.status_code == 302 and page["Location"].endswith("?sso=disabled")
    assert not django_user_model.objects.get(username="alice").is_active
    assert sign_in(client, "alice", PASSWORDS["alice"]).status_code == 200  # refused

    ldap_site.add_to_group("alice", "agents-users")  # let back in by the directory
    assert sign_in(client, "alice", PASSWORDS["alice"]).status_code == 302
    assert django_user_model.objects.get(username="alice").is_active


def test_an_unreachable_directory_locks_nobody_out(
    tmp_path, settings, client, django_user_model
) -> None:
    with running_slapd(tmp_path) as server:
        configure(settings, server)
        sign_in(client, "bob", PASSWORDS["bob"])
        bob = django_user_model.objects.get(username="bob")
        _, raw = token_create(user=bob, name="script")
    # slapd has stopped: the directory cannot say anything about bob.
    assert client.get(API, HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 200
    assert client.get("/").status_code == 200
    bob.refresh_from_db()
    assert bob.is_active
