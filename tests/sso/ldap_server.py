"""A real OpenLDAP directory for the LDAP sign-in tests: Debian's slapd on a loopback port.

The config (slapd.conf, read with ``-f``), the mdb database, the pid/args files and the log
all live in the test's temp dir, and slapd runs as the current user: nothing of the system's
slapd (/etc/ldap/slapd.d, /var/lib/ldap) is read or touched. The seed goes in offline with
``slapadd`` before the start, so a running server is already the seeded directory.

Directory (base ``dc=example,dc=org``):

- ``cn=admin``: the rootdn, which :class:`LDAPServer` binds as to change the directory;
- ``cn=agentsite``: the site's read-only service account (reads all but ``userPassword``);
- ``ou=people``: inetOrgPerson ``alice`` and ``bob`` (passwords in :data:`PASSWORDS`);
- ``ou=groups``: groupOfNames ``engineers`` (alice) and ``agents-users`` (alice, bob).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.tools.conftest import free_port

try:
    import ldap
    import ldap.dn
    import ldap.filter
    import ldap.modlist
except ModuleNotFoundError:  # the `ldap` extra: the fixture says how to install it
    ldap = None  # type: ignore[assignment]

BASE_DN = "dc=example,dc=org"
ADMIN_DN = f"cn=admin,{BASE_DN}"
ADMIN_PASSWORD = "admin-secret"
SERVICE_DN = f"cn=agentsite,{BASE_DN}"
SERVICE_PASSWORD = "service-secret"
USERS_DN = f"ou=people,{BASE_DN}"
GROUPS_DN = f"ou=groups,{BASE_DN}"
PASSWORDS = {"alice": "alice-password", "bob": "bob-password"}
SCHEMAS = ("core", "cosine", "inetorgperson", "nis")
# groupOfNames must have a member: an empty group holds the empty DN, which matches no user.
NO_MEMBER = ""
START_TIMEOUT = 20.0

SLAPD_CONF = """\
{includes}
pidfile {work}/slapd.pid
argsfile {work}/slapd.args
modulepath /usr/lib/ldap
moduleload back_mdb
loglevel stats

database mdb
suffix "{base}"
rootdn "{admin}"
rootpw {admin_hash}
directory {work}/data

# Anyone may bind with a password (auth), nobody reads one; the service account reads the
# rest; everyone else, users bound as themselves included, reads nothing.
access to attrs=userPassword
  by anonymous auth
  by * none
access to *
  by dn.exact="{service}" read
  by * none
"""


def ssha(password: str) -> str:
    """A salted SHA-1 userPassword, as slappasswd makes: slapadd stores what it is given."""
    salt = os.urandom(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def _ldif(dn: str, attrs: dict[str, list[str]]) -> str:
    lines = [f"dn: {dn}"]
    for name, values in attrs.items():
        lines += [f"{name}: {value}" if value else f"{name}:" for value in values]
    return "\n".join(lines) + "\n"


def _person(
    uid: str, password: str, mail: str, given_name: str, surname: str
) -> dict[str, list[str]]:
    return {
        "objectClass": ["inetOrgPerson"],
        "uid": [uid],
        "cn": [f"{given_name} {surname}"],
        "sn": [surname],
        "givenName": [given_name],
        "mail": [mail],
        "userPassword": [ssha(password)],
    }


def seed_ldif() -> str:
    """The whole starting directory, parents first (slapadd checks that they exist)."""
    alice = f"uid=alice,{USERS_DN}"
    bob = f"uid=bob,{USERS_DN}"
    entries = [
        (
            BASE_DN,
            {"objectClass": ["dcObject", "organization"], "dc": ["example"], "o": ["Example"]},
        ),
        (
            SERVICE_DN,
            {
                "objectClass": ["organizationalRole", "simpleSecurityObject"],
                "cn": ["agentsite"],
                "userPassword": [ssha(SERVICE_PASSWORD)],
            },
        ),
        (USERS_DN, {"objectClass": ["organizationalUnit"], "ou": ["people"]}),
        (GROUPS_DN, {"objectClass": ["organizationalUnit"], "ou": ["groups"]}),
        (alice, _person("alice", PASSWORDS["alice"], "alice@example.org", "Alice", "Liddell")),
        (bob, _person("bob", PASSWORDS["bob"], "bob@example.org", "Bob", "Builder")),
        (
            f"cn=engineers,{GROUPS_DN}",
            {"objectClass": ["groupOfNames"], "cn": ["engineers"], "member": [alice]},
        ),
        (
            f"cn=agents-users,{GROUPS_DN}",
            {"objectClass": ["groupOfNames"], "cn": ["agents-users"], "member": [alice, bob]},
        ),
    ]
    return "\n".join(_ldif(dn, attrs) for dn, attrs in entries)


def _binary(name: str) -> str:
    """slapd and slapadd live in /usr/sbin, often not on a user's PATH."""
    found = shutil.which(name) or shutil.which(name, path="/usr/sbin:/usr/local/sbin")
    if not found:
        pytest.fail(f"{name} is not installed: run `make system-deps` (Debian's slapd package)")
    return found


def _tail(log: Path, lines: int = 40) -> str:
    text = log.read_text(errors="replace") if log.exists() else ""
    return "\n".join(text.splitlines()[-lines:])


@dataclass
class LDAPServer:
    """The running directory, and the admin's changes to it (as the rootdn, past the ACLs)."""

    uri: str
    log: Path
    base_dn: str = BASE_DN
    bind_dn: str = SERVICE_DN
    bind_password: str = SERVICE_PASSWORD
    users_dn: str = USERS_DN
    groups_dn: str = GROUPS_DN
    admin_dn: str = ADMIN_DN
    admin_password: str = ADMIN_PASSWORD

    def connect(
        self, dn: str | None = None, password: str = "", *, timeout: float = 10.0
    ) -> ldap.ldapobject.LDAPObject:
        """A connection bound as ``dn`` (anonymous without one); raises on a refused bind."""
        conn = ldap.initialize(self.uri)
        conn.set_option(ldap.OPT_PROTOCOL_VERSION, ldap.VERSION3)
        conn.set_option(ldap.OPT_REFERRALS, 0)
        conn.set_option(ldap.OPT_NETWORK_TIMEOUT, timeout)
        conn.set_option(ldap.OPT_TIMEOUT, timeout)
        conn.simple_bind_s(dn or "", password)
        return conn

    @contextlib.contextmanager
    def admin(self) -> Iterator[ldap.ldapobject.LDAPObject]:
        conn = self.connect(self.admin_dn, self.admin_password)
        try:
            yield conn
        finally:
            conn.unbind_s()

    def user_dn(self, uid: str) -> str:
        return f"uid={ldap.dn.escape_dn_chars(uid)},{self.users_dn}"

    def group_dn(self, name: str) -> str:
        return f"cn={ldap.dn.escape_dn_chars(name)},{self.groups_dn}"

    def add_user(
        self,
        uid: str,
        password: str,
        mail: str | None = None,
        given_name: str = "Test",
        surname: str = "User",
    ) -> str:
        """Add an inetOrgPerson under ``ou=people``; returns its DN."""
        person = _person(uid, password, mail or f"{uid}@example.org", given_name, surname)
        entry = {name: [value.encode() for value in values] for name, values in person.items()}
        with self.admin() as conn:
            conn.add_s(self.user_dn(uid), ldap.modlist.addModlist(entry))
        return self.user_dn(uid)

    def delete_user(self, uid: str) -> None:
        """Delete the user and their memberships (slapd leaves dangling ``member`` values)."""
        dn = self.user_dn(uid)
        for group in self.groups_of(uid):
            self.remove_from_group(uid, group)
        with self.admin() as conn:
            conn.delete_s(dn)

    def set_password(self, uid: str, password: str) -> None:
        """The password modify extended operation: slapd hashes it ({SSHA}), as in production."""
        with self.admin() as conn:
            conn.passwd_s(self.user_dn(uid), None, password)

    def create_group(self, name: str) -> str:
        """An empty groupOfNames under ``ou=groups``; returns its DN."""
        entry = {"objectClass": [b"groupOfNames"], "cn": [name.encode()], "member": [b""]}
        with self.admin() as conn:
            conn.add_s(self.group_dn(name), ldap.modlist.addModlist(entry))
        return self.group_dn(name)

    def members(self, group: str) -> list[str]:
        """The member DNs of ``group`` (without the empty-group placeholder)."""
        with self.admin() as conn:
            [(_, attrs)] = conn.search_s(self.group_dn(group), ldap.SCOPE_BASE, attrlist=["member"])
        return [m.decode() for m in attrs.get("member", []) if m.decode() != NO_MEMBER]

    def groups_of(self, uid: str) -> list[str]:
        """The names of the groups that list ``uid`` as a member."""
        member = ldap.filter.escape_filter_chars(self.user_dn(uid))
        query = f"(&(objectClass=groupOfNames)(member={member}))"
        with self.admin() as conn:
            found = conn.search_s(self.groups_dn, ldap.SCOPE_ONELEVEL, query, ["cn"])
        return sorted(attrs["cn"][0].decode() for _, attrs in found)

    def add_to_group(self, uid: str, group: str) -> None:
        self._set_members(group, [*self.members(group), self.user_dn(uid)])

    def remove_from_group(self, uid: str, group: str) -> None:
        user = self.user_dn(uid).lower()
        self._set_members(group, [m for m in self.members(group) if m.lower() != user])

    def _set_members(self, group: str, members: list[str]) -> None:
        values = [m.encode() for m in dict.fromkeys(members)] or [NO_MEMBER.encode()]
        with self.admin() as conn:
            conn.modify_s(self.group_dn(group), [(ldap.MOD_REPLACE, "member", values)])


def _ready(server: LDAPServer) -> bool:
    """True once slapd answers the service account's bind (listening is not enough)."""
    try:
        server.connect(server.bind_dn, server.bind_password, timeout=1.0).unbind_s()
    except (ldap.SERVER_DOWN, ldap.TIMEOUT):
        return False
    return True


@contextlib.contextmanager
def running_slapd(tmp_path: Path) -> Iterator[LDAPServer]:
    """Start a seeded slapd under ``tmp_path``; stopped (SIGTERM, then SIGKILL) on exit."""
    if ldap is None:
        pytest.fail("python-ldap is missing: `make test` installs the `ldap` extra")
    slapd, slapadd = _binary("slapd"), _binary("slapadd")
    work = tmp_path / "slapd"
    (work / "data").mkdir(parents=True)
    conf = work / "slapd.conf"
    includes = "\n".join(f"include /etc/ldap/schema/{name}.schema" for name in SCHEMAS)
    conf.write_text(
        SLAPD_CONF.format(
            includes=includes,
            work=work,
            base=BASE_DN,
            admin=ADMIN_DN,
            admin_hash=ssha(ADMIN_PASSWORD),
            service=SERVICE_DN,
        )
    )
    seed = work / "seed.ldif"
    seed.write_text(seed_ldif())
    loaded = subprocess.run(
        [slapadd, "-f", str(conf), "-l", str(seed)], capture_output=True, text=True, check=False
    )
    if loaded.returncode:
        pytest.fail(f"slapadd failed ({loaded.returncode}):\n{loaded.stderr}")

    port = free_port()
    log = work / "slapd.log"
    server = LDAPServer(uri=f"ldap://127.0.0.1:{port}/", log=log)
    # -d stats: stay in the foreground and write the connection/result lines to the log.
    args = [slapd, "-d", "stats", "-h", server.uri, "-f", str(conf)]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=out, stderr=out)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while not _ready(server):
            if proc.poll() is not None or time.monotonic() > deadline:
                state = "timed out" if proc.poll() is None else f"exited {proc.returncode}"
                pytest.fail(f"slapd did not start ({state}):\n{_tail(log)}")
            time.sleep(0.05)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
