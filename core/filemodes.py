"""The app's data is its own user's only: directories 0700, files 0600, whatever the umask.

Called by ``manage.py prepare_instance`` (core/management/commands/, run by ``make run``
and ``make migrate`` before ``migrate``), never by the settings, whose import writes
nothing: a new install is created private and an existing one is tightened the next time
the command runs. Explicit modes rather than a process-wide ``umask(0o077)``: the umask is
global state every library and child process inherits (the llama.cpp server, MCP stdio
servers), it does not fix files that already exist, and any import may reset it.

- Directories: ``mkdir(mode=0o700)`` (cut by the umask, ignored when the directory
  exists), then ``chmod`` to exactly 0700.
- SQLite creates its database ``0644 & ~umask`` but gives the ``-wal``, ``-shm`` and
  ``-journal`` files the mode of the database file (``findCreateFileMode`` in SQLite's
  os_unix.c), so the database is created empty at 0600 before SQLite opens it; an empty
  file is a valid empty database.
- Uploaded and generated media (artifacts): Django's ``FILE_UPLOAD_PERMISSIONS`` and
  ``FILE_UPLOAD_DIRECTORY_PERMISSIONS``, which ``FileSystemStorage`` applies with chmod.

A path owned by another user is left alone (chmod would fail): the site still starts.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "private_dir", "private_file", "private_sqlite"]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600
SQLITE_COMPANIONS = ("-wal", "-shm", "-journal")


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) exists and is 0700."""
    path.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
    _chmod(path, PRIVATE_DIR)
    return path


def private_file(path: Path, create: bool = False) -> None:
    """``path`` is 0600; created empty first when ``create`` and missing."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE))
    _chmod(path, PRIVATE_FILE)


def private_sqlite(name: str | os.PathLike[str]) -> None:
    """The SQLite database file ``name`` and its companions are 0600 (see module doc)."""
    text = os.fspath(name)
    if not text or text == ":memory:" or text.startswith("file:"):
        return
    path = Path(text)
    path.parent.mkdir(parents=True, exist_ok=True)
    private_file(path, create=True)
    for suffix in SQLITE_COMPANIONS:
        private_file(path.with_name(path.name + suffix))


def _chmod(path: Path, mode: int) -> None:
    with contextlib.suppress(FileNotFoundError, PermissionError):
        if path.stat().st_mode & 0o777 != mode:
            os.chmod(path, mode)
