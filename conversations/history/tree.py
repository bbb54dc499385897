"""A conversation as a tree of runs, and the branch the user is on.

Each run continues the branch ending at its ``parent`` run. Runs sharing a parent are
alternatives: an edited question is a new trigger message (a sibling question), a
regenerated answer reuses the trigger (a sibling answer). At every fork the run chosen
last (``selected_at``) is followed, so switching to a sibling comes back to the branch
the user last saw below it.

A run's messages are its question part (the messages of the run that first answered the
question, up to and including the question: a follow-up run's questions) and its own
part (follow-ups injected into it, its answer, the follow-ups a Stop left unanswered).
Everything here works on rows loaded in one query per table.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from conversations.models import Message, Run


@dataclass(frozen=True)
class RunNode:
    run_id: int
    parent_id: int | None
    trigger_id: int | None
    selected_at: datetime
    trigger_seq: int = 0  # the question's number in the conversation


@dataclass
class Siblings:
    """Where a run sits among its alternatives (for the ``< 2/3 >`` controls)."""

    ids: list[int] = field(default_factory=list)  # message ids (questions) or run ids
    index: int = 0

    @property
    def count(self) -> int:
        return len(self.ids)

    @property
    def position(self) -> int:  # 1-based, as shown
        return self.index + 1

    @property
    def previous(self) -> int | None:
        return self.ids[self.index - 1] if self.index > 0 else None

    @property
    def next(self) -> int | None:
        return self.ids[self.index + 1] if self.index + 1 < len(self.ids) else None

    def as_dict(self) -> dict:
        return {"ids": self.ids, "index": self.index, "count": self.count}


def _chosen(nodes: Iterable[RunNode]) -> RunNode:
    """Of alternatives, the one chosen last (ties: the newest run)."""
    return max(nodes, key=lambda n: (n.selected_at, n.run_id))


class RunTree:
    """The runs of one conversation with their parent links."""

    def __init__(self, nodes: Iterable[RunNode]) -> None:
        self.nodes: dict[int, RunNode] = {}
        self.children: dict[int | None, list[RunNode]] = {}
        self.owners: dict[int, int] = {}  # trigger message id -> the first run answering it
        for node in sorted(nodes, key=lambda n: n.run_id):
            self.nodes[node.run_id] = node
            self.children.setdefault(node.parent_id, []).append(node)
            if node.trigger_id is not None:
                self.owners.setdefault(node.trigger_id, node.run_id)

    @classmethod
    def load(cls, conversation_id: int) -> RunTree:
        rows = Run.objects.filter(conversation_id=conversation_id).values_list(
            "pk", "parent_id", "trigger_message_id", "selected_at", "trigger_message__seq"
        )
        return cls(RunNode(*row[:4], trigger_seq=row[4] or 0) for row in rows)

    def __contains__(self, run_id: int) -> bool:
        return run_id in self.nodes

    # ----------------------------------------------------------------- branches
    def selected_path(self) -> list[RunNode]:
        """The runs of the branch the user is on, first to last."""
        path: list[RunNode] = []
        parent: int | None = None
        seen: set[int] = set()
        while kids := self.children.get(parent):
            node = _chosen(kids)
            if node.run_id in seen:  # never in valid data; a loop must not hang a page
                break
            seen.add(node.run_id)
            path.append(node)
            parent = node.run_id
        return path

    def followed_ids(self) -> set[int]:
        """The run followed at every fork, on the selected branch or not."""
        return {_chosen(kids).run_id for kids in self.children.values()}

    def tip(self) -> RunNode | None:
        """The last run of the selected branch: a new question continues it."""
        path = self.selected_path()
        return path[-1] if path else None

    def path_to(self, run_id: int) -> list[RunNode]:
        """The runs from the first to ``run_id`` (included)."""
        path: list[RunNode] = []
        node = self.nodes.get(run_id)
        while node is not None and len(path) <= len(self.nodes):
            path.append(node)
            node = self.nodes.get(node.parent_id) if node.parent_id is not None else None
        path.reverse()
        return path

    # ----------------------------------------------------------------- siblings
    def question_siblings(self, run_id: int) -> Siblings:
        """The questions asked at the fork of ``run_id`` (its own and its edits)."""
        node = self.nodes[run_id]
        questions = list(dict.fromkeys(n.trigger_id for n in self.children.get(node.parent_id, ())))
        return Siblings(questions, questions.index(node.trigger_id))

    def answer_siblings(self, run_id: int) -> Siblings:
        """The answers to ``run_id``'s question at its fork (the first and regenerated)."""
        node = self.nodes[run_id]
        answers = [
            n.run_id
            for n in self.children.get(node.parent_id, ())
            if n.trigger_id == node.trigger_id
        ]
        return Siblings(answers, answers.index(run_id))

    def answer_for_question(self, message_id: int) -> RunNode | None:
        """The answer to ``message_id`` chosen last (the one switching to it shows)."""
        runs = [n for n in self.nodes.values() if n.trigger_id == message_id]
        return _chosen(runs) if runs else None

    def question_owner(self, trigger_id: int | None) -> int | None:
        """The run that first answered ``trigger_id``: its question part's messages are
        saved under it."""
        return self.owners.get(trigger_id) if trigger_id is not None else None


def path_filter(tree: RunTree, path: list[RunNode], messages: Iterable[Message]) -> list[Message]:
    """``messages`` (in any order) that belong to the runs of ``path``, by number.

    Messages without a run (none are saved so today) are kept: they belong to every branch.
    """
    wanted: dict[int, list[tuple[str, int]]] = {}  # run id -> [(part, question's number)]
    for node in path:
        owner = tree.question_owner(node.trigger_id)
        if owner is not None:
            wanted.setdefault(owner, []).append(("question", node.trigger_seq))
        wanted.setdefault(node.run_id, []).append(("own", node.trigger_seq))
    kept = []
    for message in messages:
        if message.run_id is None:
            kept.append(message)
            continue
        for part, trigger_seq in wanted.get(message.run_id, ()):
            if (part == "question" and message.seq <= trigger_seq) or (
                part == "own" and message.seq > trigger_seq
            ):
                kept.append(message)
                break
    return sorted(kept, key=lambda m: m.seq)
