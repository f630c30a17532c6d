"""Sandbox boot (stdlib only): runs as PID 1 of fresh network, mount and PID namespaces.

Called by :mod:`heuresis.harness.sandbox` through ``unshare --net --mount --pid --fork
--kill-child``.  It builds a minimal root (read-only binds of the system and Python trees, the
episode's work folder read-write at ``/sandbox``, a private ``/proc`` and ``/tmp``), chroots into
it, applies resource limits and execs Python on the agent's script.  Nothing else of the host
filesystem (the project, the results, the truth) exists inside.
"""

import ctypes
import json
import os
import resource
import sys

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_void_p]


def _mount(src, target, fstype, flags):
    enc = lambda s: s.encode() if s is not None else None  # noqa: E731
    if _libc.mount(enc(src), enc(target), enc(fstype), flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} -> {target}: {os.strerror(err)}")


def main() -> None:
    spec = json.loads(sys.argv[1])
    root, work = spec["root"], spec["work"]
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    for path in spec["binds"]:
        target = root + path
        if os.path.islink(path):
            os.makedirs(os.path.dirname(target), exist_ok=True)
            if not os.path.lexists(target):
                os.symlink(os.readlink(path), target)
            continue
        if not os.path.exists(path):
            continue
        if os.path.isdir(path):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            open(target, "a").close()
        _mount(path, target, None, MS_BIND | MS_REC)
        _mount(None, target, None, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID)
    for sub in ("sandbox", "proc", "tmp"):
        os.makedirs(os.path.join(root, sub), exist_ok=True)
    _mount(work, root + "/sandbox", None, MS_BIND)
    _mount("proc", root + "/proc", "proc", MS_NOSUID | MS_NODEV)
    _mount("tmpfs", root + "/tmp", "tmpfs", MS_NOSUID | MS_NODEV)
    os.chroot(root)
    os.chdir("/sandbox")
    lim = spec["limits"]
    resource.setrlimit(resource.RLIMIT_CPU, (lim["cpu_seconds"], lim["cpu_seconds"] + 1))
    resource.setrlimit(resource.RLIMIT_AS, (lim["memory_bytes"], lim["memory_bytes"]))
    resource.setrlimit(resource.RLIMIT_FSIZE, (lim["file_bytes"], lim["file_bytes"]))
    resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    py = spec["python"]
    # Not exec: as PID 1 of the namespace we stay the parent, so when the script exits every
    # process it left behind is killed with the namespace.
    pid = os.fork()
    if pid == 0:
        os.execve(py, [py, "-I", "script.py"], spec["env"])
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    os._exit(128 - code if code < 0 else code)


if __name__ == "__main__":
    main()
