"""Whether this context is loading a backup's rows (``manage.py restore``).

``post_save`` tells receivers that a fixture's row is raw; ``m2m_changed`` has no such
flag. Receivers that record changes (the audit log's group memberships) ask
:func:`loading_backup` and leave the restored rows alone: the backup holds the events of
the original changes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_loading: ContextVar[bool] = ContextVar("agentsite_loading_backup", default=False)


@contextlib.contextmanager
def restoring() -> Iterator[None]:
    """The block loads a backup's rows."""
    token = _loading.set(True)
    try:
        yield
    finally:
        _loading.reset(token)


def loading_backup() -> bool:
    return _loading.get()
