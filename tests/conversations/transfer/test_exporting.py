"""Export (Markdown, JSON of the branch or the tree) and import of a JSON export."""

from __future__ import annotations

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from conversations import selectors, services
from conversations.history.tree import RunTree
from conversations.models import Conversation, Message, Run, RunEvent
from conversations.transfer import exporting, importing
from core.errors import ApplicationError
from tests.conversations.branches.trees import TOOL_RESULT, build_tree

pytestmark = pytest.mark.django_db


@pytest.fixture
def tree(user):
    return build_tree(user)


def _contents(conversation: Conversation) -> list[tuple[str, str]]:
    messages = selectors.branch_messages(conversation=conversation)
    return [(m.role, m.content) for m in messages]


def _counts() -> tuple[int, int, int]:
    return Conversation.objects.count(), Message.objects.count(), Run.objects.count()


# --------------------------------------------------------------------------- export


def test_markdown_export_is_the_selected_branch_with_its_tool_call(tree):
    text = exporting.export_markdown(conversation=tree.conversation)

    assert text.startswith("# Trip plan\n")
    assert "## User\n\nWhat is 17*3?" in text
    assert "## User\n\nAnd **why**?" in text
    # The answer as its markdown source, after its tool call (arguments and result).
    assert "## Assistant\n\nNew answer two: **because**.\n\n- one\n- two" in text
    tool = text.index("**Tool call:** `calculator`")
    assert tool < text.index("New answer two")
    assert '"expression": "17*3"' in text[tool:]
    assert f"Result:\n\n```text\n{TOOL_RESULT}\n```" in text
    # Not the other branches.
    assert "Old answer two" not in text
    assert "And how, instead?" not in text
    assert "Answer to the edit" not in text


def test_markdown_fences_survive_backticks_in_a_result(user):
    from tests.conversations.branches.trees import tool_events

    tree = build_tree(user)
    tool_events(tree.runs["r3"], {"code": "x"}, "```\nfenced\n```", tool="python")
    text = exporting.export_markdown(conversation=tree.conversation)
    assert "````text\n```\nfenced\n```\n````" in text


def test_json_export_of_the_branch(tree):
    document = exporting.export_json(conversation=tree.conversation)

    assert (document["format"], document["version"], document["scope"]) == (
        "agentsite.conversation",
        1,
        "branch",
    )
    assert [r["id"] for r in document["runs"]] == [tree.runs["r1"].pk, tree.runs["r3"].pk]
    assert [r["parent_id"] for r in document["runs"]] == [None, tree.runs["r1"].pk]
    assert all(r["selected"] for r in document["runs"])
    assert document["runs"][1]["trigger_message_id"] == tree.messages["q2"].pk
    assert document["runs"][1]["usage"] == {"total_tokens": 42}
    contents = [(m["role"], m["content"]) for m in document["messages"]]
    assert contents == _contents(tree.conversation)
    # The question saved under the first answer's run belongs to the branch's run.
    question = next(m for m in document["messages"] if m["id"] == tree.messages["q2"].pk)
    assert question["run_id"] == tree.runs["r3"].pk
    assert set(question) >= {"id", "role", "kind", "content", "pinned", "seq", "created_at"}


def test_json_export_of_the_whole_tree(tree):
    document = exporting.export_json(conversation=tree.conversation, tree=True)

    runs = {r["id"]: r for r in document["runs"]}
    assert len(runs) == 4
    selected = {name for name, run in tree.runs.items() if runs[run.pk]["selected"]}
    assert selected == {"r1", "r3"}
    assert {runs[tree.runs[n].pk]["parent_id"] for n in ("r2", "r3", "r4")} == {tree.runs["r1"].pk}
    assert len(document["messages"]) == 7
    assert json.loads(json.dumps(document)) == document  # plain JSON


def test_export_file_names_come_from_the_title(user):
    tree = build_tree(user, title="Plan: Tokyo / Kyoto?")
    assert exporting.export_filename(tree.conversation, "md") == "plan-tokyo-kyoto.md"
    tree.conversation.title = ""
    name = exporting.export_filename(tree.conversation, "json")
    assert name == f"conversation-{tree.conversation.pk}.json"


def test_export_page_downloads_and_is_404_for_another_user(client, user, other_user, tree):
    client.force_login(user)
    response = client.get(f"/c/{tree.conversation.pk}/export/?format=markdown")
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="trip-plan.md"'
    assert "New answer two" in response.content.decode()
    response = client.get(f"/c/{tree.conversation.pk}/export/?format=json&tree=1")
    assert response["Content-Disposition"] == 'attachment; filename="trip-plan.json"'
    assert len(json.loads(response.content)["runs"]) == 4

    client.force_login(other_user)
    assert client.get(f"/c/{tree.conversation.pk}/export/?format=json").status_code == 404


# --------------------------------------------------------------------------- import


def test_tree_import_round_trip_keeps_the_shape_and_the_selected_branch(tree, other_user):
    raw = json.dumps(exporting.export_json(conversation=tree.conversation, tree=True)).encode()

    imported = importing.conversation_import(owner=other_user, raw=raw)

    assert imported.owner == other_user and imported.pk != tree.conversation.pk
    assert imported.title == "Trip plan"
    assert _contents(imported) == _contents(tree.conversation)
    shape = RunTree.load(imported.pk)
    assert len(shape.nodes) == 4
    (root,) = shape.children[None]
    assert len(shape.children[root.run_id]) == 3  # the regenerated answer and the edit
    # Every run is a finished record without events; the messages are numbered anew.
    assert not RunEvent.objects.filter(conversation=imported).exists()
    assert not imported.runs.filter(status__in=Run.ACTIVE_STATUSES).exists()
    assert imported.last_message_seq == imported.messages.count() == 7
    # Exported again, it is the same document but for ids and times.
    again = exporting.export_json(conversation=imported, tree=True)
    original = exporting.export_json(conversation=tree.conversation, tree=True)
    strip = {"id", "run_id", "parent_id", "trigger_message_id", "created_at", "seq", "model"}

    def shape_of(doc):
        return [
            [{k: v for k, v in row.items() if k not in strip} for row in doc[part]]
            for part in ("messages", "runs")
        ]

    assert shape_of(again) == shape_of(original)


def test_branch_import_is_a_linear_conversation(tree, user):
    raw = json.dumps(exporting.export_json(conversation=tree.conversation)).encode()
    imported = importing.conversation_import(owner=user, raw=raw)
    assert _contents(imported) == _contents(tree.conversation)
    assert imported.runs.count() == 2
    assert exporting.export_markdown(conversation=imported).count("## Assistant") == 2


def _document(tree) -> dict:
    return exporting.export_json(conversation=tree.conversation, tree=True)


def _broken(tree, change) -> bytes:
    document = _document(tree)
    change(document)
    return json.dumps(document).encode()


@pytest.mark.parametrize(
    ("change", "says"),
    [
        (lambda d: d.update(format="chatgpt"), "not an agentsite conversation export"),
        (lambda d: d.update(version=2), "version 2"),
        (lambda d: d.update(version=True), "version"),
        (lambda d: d.pop("runs"), "lacks the field(s): runs"),
        (lambda d: d["messages"][0].update(role="robot"), "'role' must be one of"),
        (lambda d: d["messages"][0].update(content=7), "'content' has the wrong type"),
        (lambda d: d["messages"][0].update(extra=1), "unknown field(s): extra"),
        (lambda d: d["messages"][-1].update(run_id=10**9), "names a run the file does not hold"),
        (lambda d: d["messages"][1].update(seq=d["messages"][0]["seq"]), "same number"),
        (lambda d: d["runs"][0].update(parent_id=d["runs"][1]["id"]), "do not form a tree"),
        (lambda d: d["runs"][1].update(parent_id=10**9), "continues a run the file does not"),
        (lambda d: d["runs"][1].update(selected=True), "Two runs are selected"),
        (lambda d: d["runs"][1].update(status="exploded"), "'status' must be one of"),
    ],
)
def test_a_bad_file_is_refused_and_nothing_is_saved(tree, other_user, change, says):
    before = _counts()
    with pytest.raises(ApplicationError) as refused:
        importing.conversation_import(owner=other_user, raw=_broken(tree, change))
    assert says in refused.value.message
    assert _counts() == before


HEADER = b'{"format": "agentsite.conversation", "version": 1, '


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"format": "agentsite.conversation", "version": NaN}', "not JSON"),
        (HEADER + b'"messages": [], "runs": [], "x": ' + b"[" * 40 + b"]" * 40 + b"}", "nested"),
        (b"\xff\xfe", "not JSON"),
        (HEADER + b'"messages": [{"usage": {"total_tokens": 1e999}}], "runs": []}', "too large"),
        (HEADER + b'"messages": [], "runs": [], "x": -1e400}', "too large"),
    ],
)
def test_a_file_that_is_not_an_export_is_refused(user, raw, says):
    before = _counts()
    with pytest.raises(ApplicationError) as refused:
        importing.conversation_import(owner=user, raw=raw)
    assert says in refused.value.message
    assert _counts() == before


def test_limits_message_length_and_file_size(tree, user, settings):
    raw = json.dumps(_document(tree)).encode()
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 10
    with pytest.raises(ApplicationError, match="too long"):
        importing.conversation_import(owner=user, raw=raw)
    settings.AGENTSITE_MESSAGE_MAX_CHARS = 100_000
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(raw) - 1
    with pytest.raises(ApplicationError, match="too large") as refused:
        importing.conversation_import(owner=user, raw=raw)
    assert refused.value.code == "too_large"
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = len(raw)
    assert importing.conversation_import(owner=user, raw=raw).messages.count() == 7


def test_a_run_exported_while_working_is_imported_as_failed(tree, user):
    raw = _broken(tree, lambda d: d["runs"][-1].update(status="running"))
    imported = importing.conversation_import(owner=user, raw=raw)
    last = imported.runs.order_by("-id").first()
    assert last.status == Run.Status.FAILED
    assert "still working" in last.error


def test_import_page_creates_a_conversation_or_says_why_not(client, user, tree):
    client.force_login(user)
    good = json.dumps(_document(tree)).encode()
    upload = SimpleUploadedFile("trip.json", good, content_type="application/json")
    response = client.post("/c/import/", {"file": upload})
    imported = Conversation.objects.filter(owner=user).order_by("-id").first()
    assert imported.pk != tree.conversation.pk
    assert response.status_code == 302 and response["Location"] == f"/c/{imported.pk}/"

    before = _counts()
    bad = SimpleUploadedFile("x.json", b'{"format": "other"}', content_type="application/json")
    response = client.post("/c/import/", {"file": bad}, follow=True)
    assert "Nothing was imported" in response.content.decode()
    assert "not an agentsite conversation export" in response.content.decode()
    assert _counts() == before


def test_an_imported_follow_up_shows_as_delivered(client, user):
    conversation = services.conversation_create(owner=user, title="Follow-ups")
    question = services.message_create(conversation=conversation, role="user", content="Go")
    run = Run.objects.create(
        conversation=conversation, trigger_message=question, status=Run.Status.SUCCEEDED
    )
    question.run = run
    question.save(update_fields=["run"])
    services.message_create(
        conversation=conversation, role="user", content="Also Rome", run=run,
        kind=Message.Kind.INJECT,
    )  # fmt: skip
    services.message_create(conversation=conversation, role="assistant", content="Done", run=run)
    raw = json.dumps(exporting.export_json(conversation=conversation)).encode()
    imported = importing.conversation_import(owner=user, raw=raw)

    client.force_login(user)
    page = client.get(f"/c/{imported.pk}/").content.decode()
    assert "Also Rome" in page
    assert "delivered to the agent" in page
    assert "will read it" not in page


def test_a_many_run_import_is_bounded_and_written_in_batches(user, settings):
    """A file with more runs or messages than the limits says so (413) and saves
    nothing; one within them is written in a few statements, not one per run."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def chain(count: int) -> bytes:
        messages = [
            {"id": n, "seq": n, "role": "user", "content": f"q{n}", "run_id": n}
            for n in range(1, count + 1)
        ]
        runs = [
            {"id": n, "parent_id": n - 1 if n > 1 else None, "trigger_message_id": n,
             "status": "succeeded", "selected": True}
            for n in range(1, count + 1)
        ]  # fmt: skip
        head = {"format": "agentsite.conversation", "version": 1}
        return json.dumps({**head, "messages": messages, "runs": runs}).encode()

    settings.AGENTSITE_IMPORT_MAX_RUNS = 1000
    before = _counts()
    with pytest.raises(ApplicationError) as refused:
        importing.conversation_import(owner=user, raw=chain(1001))
    assert refused.value.code == "too_large" and "1,000 runs" in refused.value.message
    assert _counts() == before

    with CaptureQueriesContext(connection) as writes:
        imported = importing.conversation_import(owner=user, raw=chain(1000))
    assert imported.runs.count() == 1000 and imported.messages.count() == 1000
    assert RunTree.load(imported.pk).tip().run_id == imported.runs.order_by("-pk")[0].pk
    assert len(writes.captured_queries) < 100  # batches, not a statement per row (2,000)
