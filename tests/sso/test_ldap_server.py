"""The test directory behaves as the site's LDAP sign-in will use it: a real slapd, python-ldap.

What django-auth-ldap does with a service account is checked here by hand: find the user by
uid, bind as the DN found with the password typed, list the groups that have the user as a
``member``. And what the admin changes (groups, deletions, passwords) is visible at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sso.ldap_server import PASSWORDS, LDAPServer, ldap, running_slapd

pytestmark = pytest.mark.integration


@pytest.fixture
def directory(tmp_path: Path) -> Iterator[LDAPServer]:
    with running_slapd(tmp_path) as server:
        yield server


def service(server: LDAPServer) -> ldap.ldapobject.LDAPObject:
    return server.connect(server.bind_dn, server.bind_password)


def find_user(server: LDAPServer, uid: str) -> tuple[str, dict[str, list[bytes]]] | None:
    """The service account's search, as AUTH_LDAP_USER_SEARCH runs it."""
    query = f"(uid={ldap.filter.escape_filter_chars(uid)})"
    found = service(server).search_s(server.users_dn, ldap.SCOPE_SUBTREE, query)
    return found[0] if found else None


def group_names(server: LDAPServer, user_dn: str) -> set[str]:
    """The groups that have ``user_dn`` as a member, as GroupOfNamesType searches them."""
    query = f"(&(objectClass=groupOfNames)(member={ldap.filter.escape_filter_chars(user_dn)}))"
    found = service(server).search_s(server.groups_dn, ldap.SCOPE_SUBTREE, query, ["cn"])
    return {attrs["cn"][0].decode() for _, attrs in found}


def can_bind(server: LDAPServer, dn: str, password: str) -> bool:
    try:
        server.connect(dn, password).unbind_s()
    except ldap.INVALID_CREDENTIALS:
        return False
    return True


def test_a_user_binds_with_their_password_and_not_with_a_wrong_one(directory: LDAPServer) -> None:
    alice = directory.user_dn("alice")
    assert can_bind(directory, alice, PASSWORDS["alice"])
    assert not can_bind(directory, alice, "wrong")
    assert not can_bind(directory, alice, PASSWORDS["bob"])
    assert not can_bind(directory, directory.user_dn("nobody"), PASSWORDS["alice"])


def test_the_service_account_finds_a_user_and_her_groups(directory: LDAPServer) -> None:
    found = find_user(directory, "alice")
    assert found is not None
    dn, attrs = found
    assert dn == directory.user_dn("alice")
    assert attrs["mail"] == [b"alice@example.org"]
    assert attrs["givenName"] == [b"Alice"]
    assert attrs["sn"] == [b"Liddell"]
    assert group_names(directory, dn) == {"engineers", "agents-users"}
    assert group_names(directory, directory.user_dn("bob")) == {"agents-users"}


def test_the_service_account_cannot_read_passwords(directory: LDAPServer) -> None:
    found = find_user(directory, "alice")
    assert found is not None
    assert "userPassword" not in found[1]
    # Filtering on it would leak the hash one guess at a time: it matches nothing.
    query = "(userPassword=*)"
    assert service(directory).search_s(directory.base_dn, ldap.SCOPE_SUBTREE, query) == []


def test_users_and_anonymous_read_nothing(directory: LDAPServer) -> None:
    """Not even that the base exists: slapd answers noSuchObject rather than disclose it."""
    alice = directory.connect(directory.user_dn("alice"), PASSWORDS["alice"])
    for conn in (alice, directory.connect()):
        with pytest.raises(ldap.NO_SUCH_OBJECT):
            conn.search_s(directory.users_dn, ldap.SCOPE_SUBTREE, "(uid=alice)")


def test_membership_changes_are_visible(directory: LDAPServer) -> None:
    bob = directory.user_dn("bob")
    directory.add_to_group("bob", "engineers")
    assert group_names(directory, bob) == {"engineers", "agents-users"}
    directory.remove_from_group("bob", "agents-users")
    assert group_names(directory, bob) == {"engineers"}

    directory.create_group("admins")
    assert directory.members("admins") == []
    directory.add_to_group("bob", "admins")
    assert group_names(directory, bob) == {"engineers", "admins"}
    directory.remove_from_group("bob", "admins")
    assert directory.members("admins") == []


def test_new_users_and_password_changes_take_effect(directory: LDAPServer) -> None:
    dn = directory.add_user("carol", "carol-1", "carol@example.org", "Carol", "Danvers")
    found = find_user(directory, "carol")
    assert found is not None and found[0] == dn
    assert found[1]["cn"] == [b"Carol Danvers"]
    assert can_bind(directory, dn, "carol-1")

    directory.set_password("carol", "carol-2")
    assert can_bind(directory, dn, "carol-2")
    assert not can_bind(directory, dn, "carol-1")


def test_a_deleted_user_is_gone_and_cannot_bind(directory: LDAPServer) -> None:
    alice = directory.user_dn("alice")
    directory.delete_user("alice")
    assert find_user(directory, "alice") is None
    assert not can_bind(directory, alice, PASSWORDS["alice"])
    assert group_names(directory, alice) == set()
    # engineers had only her: it stays a valid, empty group.
    assert directory.members("engineers") == []
    assert directory.members("agents-users") == [directory.user_dn("bob")]
