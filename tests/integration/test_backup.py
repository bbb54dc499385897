"""``manage.py backup`` and ``restore``: a populated SQLite instance moved to PostgreSQL.

Every step runs as its own process, as an operator would run it, each instance with its
own ``AGENTSITE_VAR_DIR`` (its SQLite file, its media root) and ``DATABASE_URL``. The
source is populated through the services (a user in a group, a provider with a key and a
secret header, a model, a conversation whose runs wrote event logs, an edited question
and a regenerated answer, a pinned answer, an artifact file, an API token, audit events),
backed up, and restored into a fresh PostgreSQL database; then both are read the same way
and compared, and the restored instance goes on (new rows, the token authenticates).
"""

from __future__ import annotations

import io
import json
import subprocess
import tarfile
import textwrap
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from tests.integration.stack import PYTHON, REPO, _base_env, provide_postgres

pytestmark = pytest.mark.integration

API_KEY = "sk-backup-test-PLAINTEXT-4f1c9a"
HEADER_SECRET = "hdr-backup-test-PLAINTEXT-77ab"
SECRET_KEY = "backup-test-secret-key-" + "x" * 40
ARTIFACT = bytes(range(256)) * 9 + b"\x89PNG tail"

NO_LAUNCH = """
import django

django.setup()

from conversations import services

services._launch = lambda run: None  # the runs are closed below, as a worker would
"""

# The state compared before and after: one JSON document, read the same way on both.
SNAPSHOT = """
import hashlib

from django.apps import apps
from django.contrib.auth import get_user_model

from audit.models import AuditEvent
from conversations.history.tree import RunTree
from conversations.models import APIToken, Conversation, Message, Run, RunEvent
from llms.models import LLMModel, Provider
from tools.models import Artifact


def iso(value):
    return value.isoformat() if value is not None else None


def snapshot():
    users = get_user_model().objects.order_by("pk")
    conversations = Conversation.objects.order_by("pk")
    return {
        "users": [
            [u.pk, u.username, u.password, sorted(u.groups.values_list("name", flat=True))]
            for u in users
        ],
        "providers": [
            [p.pk, p.name, p.base_url, p.api_key, p.extra_headers]
            for p in Provider.objects.order_by("pk")
        ],
        "models": [[m.pk, m.provider_id, m.model_id, m.is_default] for m in
                   LLMModel.objects.order_by("pk")],
        "conversations": [
            [c.pk, c.owner_id, c.title, c.model_id, c.mode, iso(c.created_at)]
            for c in conversations
        ],
        "messages": [
            [m.pk, m.conversation_id, m.seq, m.role, m.kind, m.content, m.pinned, m.run_id]
            for m in Message.objects.order_by("pk")
        ],
        "runs": [
            [r.pk, r.conversation_id, r.parent_id, r.trigger_message_id, r.status,
             iso(r.selected_at), r.model_id, r.iterations, r.usage]
            for r in Run.objects.order_by("pk")
        ],
        "events": [
            [e.conversation_id, e.run_id, e.seq, e.channel, e.payload]
            for e in RunEvent.objects.order_by("conversation_id", "seq")
        ],
        "branches": {
            str(c.pk): [
                [n.run_id, n.parent_id] for n in
                sorted(RunTree.load(c.pk).nodes.values(), key=lambda n: n.run_id)
            ] + [["tip", getattr(RunTree.load(c.pk).tip(), "run_id", None)]]
            for c in conversations
        },
        "artifacts": [
            [a.pk, a.conversation_id, a.run_id, a.name, a.mime_type, a.size, a.file.name,
             hashlib.sha256(a.file.open("rb").read()).hexdigest()]
            for a in Artifact.objects.order_by("pk")
        ],
        "tokens": [
            [t.pk, t.user_id, t.name, t.prefix, t.token_hash, iso(t.revoked_at)]
            for t in APIToken.objects.order_by("pk")
        ],
        "audit": [
            [a.pk, iso(a.occurred_at), a.actor_id, a.actor_name, a.action, a.target_type,
             a.target_id, a.target_label, a.changes]
            for a in AuditEvent.objects.order_by("pk")
        ],
        "rows": {
            m._meta.label_lower: m._base_manager.count()
            for m in apps.get_models() if m._meta.app_label in
            ("audit", "conversations", "llms", "tools", "core", "auth")
        },
    }
"""

POPULATE = (
    NO_LAUNCH
    + SNAPSHOT
    + textwrap.dedent(
        f"""
        import json

        from django.contrib.auth.models import Group

        from audit.services import record
        from conversations import services
        from conversations.branches import branching
        from conversations.history.numbering import last_event_seq
        from conversations.http.tokens import token_create
        from conversations.models import Run
        from conversations.runs import lifecycle
        from engine.tools import Artifact as ToolArtifact
        from llms import services as llm_services
        from tools.artifacts import artifact_save

        user = get_user_model().objects.create_user(username="alice", password="pw-alice-123")
        user.groups.add(Group.objects.create(name="team"))  # audited: group.joined
        provider, _ = llm_services.provider_upsert(
            name="acme", base_url="https://llm.example.invalid/v1", api_key={API_KEY!r},
            extra_headers={{"X-Secret": {HEADER_SECRET!r}}},
        )
        model, _ = llm_services.model_upsert(provider=provider, model_id="acme-1")
        conversation = services.conversation_create(owner=user, title="Moving", model=model)


        def finish(run, answer):
            claimed = lifecycle.run_claim(run_id=run.pk, task_id=f"task-{{run.pk}}")
            seq = last_event_seq(conversation.pk)
            events = [
                (seq + 1, run.pk, "step", {{"tool": "python", "args": {{"x": [1, None]}}}}),
                (seq + 2, run.pk, "answer", {{"status": "delta", "content": answer}}),
            ]
            message, _ = lifecycle.run_close_with_answer(
                run=claimed, model=model, answer=answer, events=events, taken_in=[],
                outcome={{"status": Run.Status.SUCCEEDED, "iterations": 2,
                          "usage": {{"total_tokens": 12}}, "elapsed": 0.25}},
            )
            return message


        question, first, _ = services.message_post(
            conversation=conversation, user=user, content="Où est la clé ? <b>1</b>"
        )
        answer = finish(first, "Under the mat. \\u00e9 \\"quoted\\"")
        services.message_set_pinned(message=answer, pinned=True)
        artifact_save(
            conversation_id=conversation.pk, run_id=first.pk, tool_name="python",
            artifact=ToolArtifact(name="chart.png", mime_type="image/png",
                                  size={len(ARTIFACT)}, content={ARTIFACT!r}),
        )
        edited, second = branching.message_edit(
            message=question, user=user, content="Where is the key, really?"
        )
        finish(second, "In the drawer.")
        third = branching.run_regenerate(run=second, user=user)
        finish(third, "In the drawer, left side.")
        branching.branch_select_run(run=second)  # the branch shown is not the newest
        token, raw = token_create(user=user, name="cli")
        record("backup.tested", actor=user, target=conversation,
               changes={{"api_key": ["old", "new"], "title": ["a", "b"]}})
        other = services.conversation_create(owner=user, title="Second", model=model)
        services.message_create(conversation=other, role="user", content="hello")
        print(json.dumps({{"snapshot": snapshot(), "token": raw}}))
        """
    )
)

READ = (
    NO_LAUNCH
    + SNAPSHOT
    + textwrap.dedent(
        """
        import json
        import sys

        from django.db import connection

        from conversations import services
        from conversations.http.tokens import token_verify

        state = snapshot()
        user = token_verify(sys.argv[1]).user if sys.argv[1:] else None
        made = None
        if user is not None:  # the restored instance goes on: new rows, no collisions
            conversation = services.conversation_create(owner=user, title="After")
            message, run, _ = services.message_post(
                conversation=conversation, user=user, content="after the move"
            )
            from audit.services import record
            from conversations.http.tokens import token_create
            event = record("backup.after", actor=user, target=conversation)
            token, _ = token_create(user=user, name="after")
            made = {
                "conversation": conversation.pk, "message": message.pk, "run": run.pk,
                "event": event.pk, "token": token.pk, "seq": message.seq,
            }
        print(json.dumps({
            "snapshot": state, "user": user.username if user else None, "made": made,
            "vendor": connection.vendor,
        }))
        """
    )
)


def run(env: dict[str, str], *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [PYTHON, *args], cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-5000:]
    return result.stdout


def manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return run(env, "manage.py", *args)


def last_json(output: str) -> dict:
    return json.loads(output.strip().splitlines()[-1])


def instance(work: Path, keys: str, database_url: str | None = None) -> dict[str, str]:
    env = _base_env(work, {"SECRET_KEY": SECRET_KEY, "ENCRYPTION_KEYS": keys})
    if database_url:
        env["DATABASE_URL"] = database_url
    work.mkdir(parents=True, exist_ok=True)
    ok(manage(env, "prepare_instance"))
    ok(manage(env, "migrate", "--no-input", "-v", "0"))
    return env


def test_move_a_populated_sqlite_instance_to_postgresql(tmp_path):
    key = Fernet.generate_key().decode()
    source = instance(tmp_path / "source", key)
    populated = last_json(ok(run(source, "-c", POPULATE)))
    before, raw_token = populated["snapshot"], populated["token"]
    archive = tmp_path / "agentsite-backup.tar.gz"
    ok(manage(source, "backup", str(archive)))

    # One private file; no secret in plain text anywhere in it.
    assert archive.stat().st_mode & 0o777 == 0o600
    with tarfile.open(archive) as tar:
        names = tar.getnames()
        contents = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}
    assert names[:2] == ["manifest.json", "data.json"]
    assert [n for n in names if n.startswith("media/")] == ["media/" + before["artifacts"][0][6]]
    for name, content in contents.items():
        for secret in (API_KEY, HEADER_SECRET, raw_token, key, SECRET_KEY):
            assert secret.encode() not in content, (name, secret[:6])
    manifest = json.loads(contents["manifest.json"])
    assert manifest["database_engine"] == "sqlite"
    assert manifest["encryption_key_from"] == "ENCRYPTION_KEYS"
    assert manifest["media_files"] == 1
    assert manifest["counts"]["conversations.runevent"] == len(before["events"]) == 6
    assert manifest["counts"]["audit.auditevent"] == len(before["audit"])
    assert "contenttypes.contenttype" not in manifest["counts"]
    assert b"fernet:" in contents["data.json"]

    database = provide_postgres(tmp_path)
    try:
        target = instance(tmp_path / "target", key, database.url)
        migrated = last_json(ok(run(target, "-c", READ)))["snapshot"]["rows"]

        # A key that cannot read the backup's secrets: stopped, naming the setting.
        wrong = dict(target, ENCRYPTION_KEYS=Fernet.generate_key().decode())
        refused = manage(wrong, "restore", str(archive))
        assert refused.returncode != 0
        assert "cannot be decrypted with the configured ENCRYPTION_KEYS" in refused.stderr
        assert "Nothing was restored" in refused.stderr

        # A check failing after the rows were loaded: the transaction rolls them back.
        tampered = tmp_path / "tampered.tar.gz"
        with tarfile.open(archive) as tar, tarfile.open(tampered, "w:gz") as out:
            for member in tar.getmembers():
                data = tar.extractfile(member).read() if member.isfile() else None
                if member.name == "manifest.json":
                    changed = json.loads(data)
                    changed["counts"]["conversations.message"] += 1
                    data = json.dumps(changed).encode()
                    member.size = len(data)
                out.addfile(member, io.BytesIO(data) if data is not None else None)
        mismatch = manage(target, "restore", str(tampered))
        assert mismatch.returncode != 0
        messages = len(before["messages"])
        assert f"conversations.message: {messages} rows, the backup has {messages + 1}" in (
            mismatch.stderr
        )
        assert last_json(ok(run(target, "-c", READ)))["snapshot"]["rows"] == migrated
        assert not list((tmp_path / "target" / "var" / "media").rglob("*.png"))

        restored = manage(target, "restore", str(archive))
        ok(restored)
        assert "restored" in restored.stdout
        # Into a database that holds users: refused.
        again = manage(target, "restore", str(archive))
        assert again.returncode != 0 and "already holds users and conversations" in again.stderr

        # Backed up again from PostgreSQL: the same rows.
        second = tmp_path / "from-postgresql.tar.gz"
        ok(manage(target, "backup", str(second)))
        with tarfile.open(second) as tar:
            again_manifest = json.loads(tar.extractfile("manifest.json").read())
        assert again_manifest["database_engine"] == "postgresql"
        assert again_manifest["counts"] == manifest["counts"]

        after = last_json(ok(run(target, "-c", READ, raw_token)))
    finally:
        database.cleanup()

    assert after["vendor"] == "postgresql"
    moved = after["snapshot"]
    for part in before:
        assert moved[part] == before[part], part
    assert moved["providers"][0][3] == API_KEY  # decrypted with the same key
    assert moved["providers"][0][4] == {"X-Secret": HEADER_SECRET}
    assert after["user"] == "alice"  # the token still authenticates
    made = after["made"]
    assert made["conversation"] > max(c[0] for c in before["conversations"])
    assert made["message"] > max(m[0] for m in before["messages"])
    assert made["run"] > max(r[0] for r in before["runs"])
    assert made["event"] > max(a[0] for a in before["audit"])
    assert made["token"] > max(t[0] for t in before["tokens"])
    assert made["seq"] == 1
    # The group membership restored is not audited again as a new event.
    assert [a[4] for a in moved["audit"]].count("group.joined") == 1
