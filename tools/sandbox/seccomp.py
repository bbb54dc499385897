"""The seccomp filter of the Python sandbox, compiled by libseccomp for bubblewrap.

bubblewrap loads a compiled (BPF) filter from a file descriptor (``--seccomp FD``) just
before it runs the sandboxed command; this module produces that program. It denies, with
``EPERM``, every way to create a socket (``socket``, ``socketpair``, and io_uring, which
can create sockets too), so no Unix-domain or network socket exists inside the sandbox
whatever the code does, plus a few kernel interfaces a snippet never needs (``ptrace``,
``bpf``, ``perf_event_open``, ``userfaultfd``, the key rings, mounting and namespaces), and
the ways to hold memory the address-space limit does not see (``memfd_create``,
``memfd_secret``, SysV ``shmget``).

Why libseccomp through ctypes: it is what bubblewrap's own users (Flatpak) compile their
filters with. It knows each architecture's syscall numbers and prepends the architecture
check, so a syscall made through another ABI (32-bit ``int 0x80``, x32) kills the process
instead of slipping past the rules. Its C API is stable and the library is on every
Debian system (apt depends on ``libseccomp2``); Debian's ``python3-seccomp`` binding only
serves the system Python, not this virtualenv.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

__all__ = ["DENIED_SYSCALLS", "SeccompUnavailable", "filter_fd", "socket_filter"]

DENIED_SYSCALLS = (
    "socket",
    "socketpair",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    # Memory outside the address-space limit: memfd pages filled with write() and SysV
    # shared memory are not mapped, so RLIMIT_AS does not count them (300 MiB in memfds
    # got past a 128 MiB bound); mmap'ed shared memory is counted and stays allowed.
    "memfd_create",
    "memfd_secret",
    "shmget",
)

SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_ACT_ERRNO = 0x00050000  # | errno


class SeccompUnavailable(RuntimeError):
    """libseccomp cannot be loaded or refused the filter."""


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError as exc:
        raise SeccompUnavailable(f"libseccomp is not installed ({exc})") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


@functools.cache
def socket_filter() -> bytes:
    """The compiled BPF program (cached: the same for every run of this process)."""
    lib = _library()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise SeccompUnavailable("seccomp_init failed")
    try:
        deny = SCMP_ACT_ERRNO | errno.EPERM
        for name in DENIED_SYSCALLS:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a syscall on this architecture (e.g. no io_uring yet)
                continue
            rc = lib.seccomp_rule_add_array(ctx, deny, number, 0, None)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_rule_add({name}) failed: {os.strerror(-rc)}")
        fd = os.memfd_create("seccomp-export", os.MFD_CLOEXEC)
        try:
            rc = lib.seccomp_export_bpf(ctx, fd)
            if rc < 0:
                raise SeccompUnavailable(f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            os.lseek(fd, 0, os.SEEK_SET)
            return _read_all(fd)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(ctx)


def filter_fd() -> int:
    """A new descriptor holding the program, positioned at its start, for ``--seccomp``.

    bubblewrap reads it to the end; the caller passes it to the child and closes it.
    """
    program = socket_filter()
    fd = os.memfd_create("sandbox-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _read_all(fd: int) -> bytes:
    chunks: list[bytes] = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    return b"".join(chunks)
