"""Memory given back to the system after a large, short-lived job (a 20 MB PDF's text
extraction builds hundreds of MB of objects, many in reference cycles).

Without this, the cycles wait for CPython's rare full collection and the freed memory
stays in the C allocator's heap: the server's resident size steps up by tens of MiB with
each large upload and never comes down. A full collection then glibc's
``malloc_trim(0)`` (a public libc call; absent on other C libraries, where only the
collection runs) bring it back to where it was.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc
from collections.abc import Callable

__all__ = ["release"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        return ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to trim with
        return None


def release() -> None:
    """Collect every generation, then hand the heap's free pages back to the system."""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
