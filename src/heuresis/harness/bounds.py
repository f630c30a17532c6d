"""The total memory (and processes, CPU) of one sandbox: a cgroup of its own, else seccomp and a per-process share.

:func:`sandbox_bound` sets up the bound of one sandbox (the code tool's run, an external agent's
command) before it starts:

* ``cgroup-v2`` or ``cgroup-v1`` -- a cgroup of its own under the harness's (cgroup v2 where the
  memory controller is delegated to it, else the v1 memory hierarchy where it may create one, as
  root can): ``memory_mb`` bounds everything the sandbox's processes hold, their tmpfs and memfd
  pages included (no swap), ``pids`` its tasks, and with ``cpus`` the cpu controller its CPU
  share.  The sandbox's first process joins it before it executes anything
  (:meth:`Bound.preexec`); the kernel's OOM killer stops the sandbox at the bound.
* ``seccomp`` -- where no cgroup can be created: a seccomp filter (bwrap ``--seccomp FD``)
  refuses ``memfd_create``, ``memfd_secret`` and ``shmget`` (memory no address space counts), and
  the per-process address space is lowered so that the writable tmpfs folders (``tmpfs_mb`` in
  all, at their full size) plus the processes allowed times each one's share fit ``memory_mb``; a
  bound that leaves less than :data:`MIN_SHARE_MB` for each of two processes is refused.

``required="cgroup"`` refuses the fallback (fail closed).  What was used is recorded with the
result (:meth:`Bound.record`).
"""

from __future__ import annotations

import os
import platform
import secrets
import struct
import time
from dataclasses import dataclass, field

__all__ = ["BOUNDS", "MIN_PROCESS_MB", "MIN_SHARE_MB", "Bound", "BoundUnavailable", "sandbox_bound", "seccomp_program"]

#: Values of a ``memory_bound`` config key: ``cgroup`` demands one; ``any`` falls back to seccomp (recorded).
BOUNDS = ("any", "cgroup")
#: Under seccomp, the least address space a process gets: below it, fewer processes are allowed instead.
MIN_SHARE_MB = 256
#: Under seccomp, the least share of two processes a bound may leave (refused below: no Python starts in less).
MIN_PROCESS_MB = 128
#: Tasks a sandbox's cgroup allows beyond its ``max_processes``: bwrap's own and the setup's (setpriv, prlimit).
_PIDS_SLACK = 8
#: Environment variable: ``off`` makes :func:`sandbox_bound` act as where no cgroup can be created (for tests).
CGROUP_ENV = "HEURESIS_CGROUP"


class BoundUnavailable(RuntimeError):
    """The bound asked for cannot be set up here."""


# --- seccomp: a classic BPF program, assembled by hand -------------------------------------------------------------
_ARCH = {  # machine: (AUDIT_ARCH, {syscall: number})
    "x86_64": (0xC000003E, {"memfd_create": 319, "memfd_secret": 447, "shmget": 29}),
    "aarch64": (0xC00000B7, {"memfd_create": 279, "memfd_secret": 447, "shmget": 194}),
}
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_RET_ALLOW, _RET_KILL_PROCESS, _RET_ERRNO = 0x7FFF0000, 0x80000000, 0x00050000
_EPERM = 1


def seccomp_program(machine: str | None = None) -> bytes:
    """The seccomp filter of the fallback: ``struct sock_filter`` entries for bwrap ``--seccomp``.

    A system call of another architecture (x32 included) kills the process; ``memfd_create``,
    ``memfd_secret`` and ``shmget`` fail with ``EPERM``; everything else is allowed.  Raises
    :class:`BoundUnavailable` on a machine it has no numbers for.
    """
    machine = machine or platform.machine()
    if machine not in _ARCH:
        raise BoundUnavailable(f"no seccomp filter for the machine {machine!r} (known: {sorted(_ARCH)})")
    arch, numbers = _ARCH[machine]
    denied = sorted(numbers.values())
    prog = [(_LD_W_ABS, 0, 0, 4),                       # seccomp_data.arch
            (_JEQ_K, 1, 0, arch),
            (_RET_K, 0, 0, _RET_KILL_PROCESS),
            (_LD_W_ABS, 0, 0, 0)]                       # seccomp_data.nr
    if machine == "x86_64":
        prog += [(_JGE_K, 0, 1, 0x40000000), (_RET_K, 0, 0, _RET_KILL_PROCESS)]   # the x32 ABI
    for k, nr in enumerate(denied):
        # to the ERRNO return after the remaining comparisons and the ALLOW return
        prog.append((_JEQ_K, len(denied) - k, 0, nr))
    prog += [(_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, _RET_ERRNO | _EPERM)]
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


# --- cgroups -------------------------------------------------------------------------------------------------------
def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, super options) of every cgroup mount."""
    out: list[tuple[str, str, set[str]]] = []
    try:
        lines = open("/proc/self/mountinfo").read().splitlines()
    except OSError:
        return out
    for line in lines:
        left, _, right = line.partition(" - ")
        parts, rparts = left.split(), right.split()
        if len(rparts) >= 3 and rparts[0] in ("cgroup", "cgroup2"):
            out.append((parts[4], rparts[0], set(rparts[2].split(","))))
    return out


def _own_cgroups() -> dict[str, str]:
    """The harness's cgroup per v1 controller, and under ``""`` its v2 cgroup."""
    out: dict[str, str] = {}
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return out
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for c in (ctrls.split(",") if ctrls else [""]):
            out[c] = path
    return out


def _write(path: str, value: str) -> None:
    with open(path, "w") as f:
        f.write(value)


def _read(path: str) -> str:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def _rmdir(path: str) -> None:
    for _ in range(50):   # the sandbox's last processes may still be exiting
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            time.sleep(0.02)


@dataclass
class Bound:
    """The bound of one sandbox: what it is (``kind``), what it allows, and its cgroups (if any).

    ``limit_mb`` is the address space each process gets (``RLIMIT_AS``), ``max_processes`` its
    ``RLIMIT_NPROC``; under a cgroup these are the configured values and the cgroup bounds the
    total; under seccomp ``tmpfs_mb + max_processes × limit_mb`` is at most ``memory_mb``.
    """

    kind: str                      # "cgroup-v2", "cgroup-v1", "seccomp"
    memory_mb: int
    limit_mb: int
    max_processes: int
    cpus: float | None = None
    tmpfs_mb: int = 0              # the sandbox's writable tmpfs folders, at their full size
    dirs: list[str] = field(default_factory=list)   # the cgroup folders the sandbox joins (one per v1 hierarchy)
    seccomp: bytes | None = None
    _oom: int = 0
    _peak_mb: float | None = None

    def preexec(self) -> None:
        """Join the cgroups (in the sandbox's first process, before it executes anything)."""
        pid = str(os.getpid())
        for d in self.dirs:
            _write(os.path.join(d, "cgroup.procs"), pid)

    def seccomp_fd(self) -> int | None:
        """A pipe holding the filter, to pass to bwrap as ``--seccomp FD`` (None: no filter); the caller closes it."""
        if self.seccomp is None:
            return None
        r, w = os.pipe()
        os.write(w, self.seccomp)
        os.close(w)
        return r

    def _read_events(self) -> None:
        for d in self.dirs:
            if self.kind == "cgroup-v2" and os.path.exists(os.path.join(d, "memory.events")):
                for line in _read(os.path.join(d, "memory.events")).splitlines():
                    if line.startswith("oom_kill "):
                        self._oom = max(self._oom, int(line.split()[1]))
                peak = _read(os.path.join(d, "memory.peak")).strip()
                if peak.isdigit():
                    self._peak_mb = int(peak) / 2**20
            elif os.path.exists(os.path.join(d, "memory.oom_control")):
                for line in _read(os.path.join(d, "memory.oom_control")).splitlines():
                    if line.startswith("oom_kill "):
                        self._oom = max(self._oom, int(line.split()[1]))
                fail = _read(os.path.join(d, "memory.failcnt")).strip()
                if not self._oom and fail.isdigit() and int(fail) > 0 and not any(
                        ln.startswith("oom_kill ") for ln in _read(os.path.join(d, "memory.oom_control")).splitlines()):
                    self._oom = int(fail)   # an older kernel without the count: the limit was hit
                peak = _read(os.path.join(d, "memory.max_usage_in_bytes")).strip()
                if peak.isdigit():
                    self._peak_mb = int(peak) / 2**20

    def close(self) -> None:
        """Read what the cgroups saw, then remove them (the sandbox has ended)."""
        if self.dirs:
            self._read_events()
        for d in self.dirs:
            _rmdir(d)

    @property
    def oom_killed(self) -> bool:
        """Whether the cgroup's bound killed a process of the sandbox (read by :meth:`close`)."""
        return self._oom > 0

    def record(self) -> dict:
        """What was used, for the result's record."""
        out: dict = {"memory_bound": self.kind, "memory_mb": self.memory_mb, "per_process_mb": self.limit_mb,
                     "max_processes": self.max_processes, "tmpfs_mb": self.tmpfs_mb}
        if self.kind.startswith("cgroup"):
            out["cpus"] = self.cpus
            out["oom_kills"] = self._oom
            out["peak_mb"] = None if self._peak_mb is None else round(self._peak_mb, 1)
        else:
            out["denied"] = ["memfd_create", "memfd_secret", "shmget"]
        return out

    def describe(self) -> str:
        """One line for the notes."""
        if self.kind == "seccomp":
            return (f"memory bound seccomp (no cgroup here): memfd_create, memfd_secret and shmget refused, "
                    f"{self.tmpfs_mb} MB of tmpfs + {self.max_processes} processes × {self.limit_mb} MB ≤ "
                    f"{self.memory_mb} MB")
        cpu = f", {self.cpus:g} CPUs" if self.cpus else ""
        return f"memory bound {self.kind}: {self.memory_mb} MB in all, tmpfs and memfd included{cpu}"


def _v2(memory: int, pids: int, cpus: float | None) -> list[str]:
    own = _own_cgroups().get("")
    mounts = [m for m, t, _ in _mounts() if t == "cgroup2"]
    if own is None or not mounts:
        return []
    parent = os.path.join(mounts[0], own.lstrip("/"))
    child = os.path.join(parent, f"heuresis-{secrets.token_hex(6)}")
    try:
        os.mkdir(child)
    except OSError:
        return []
    try:
        ctrls = set(_read(os.path.join(child, "cgroup.controllers")).split())
        if not {"memory", "pids"} <= ctrls:
            try:   # a delegated subtree whose controllers are not yet enabled for its children
                _write(os.path.join(parent, "cgroup.subtree_control"), "+memory +pids")
            except OSError:
                pass
            ctrls = set(_read(os.path.join(child, "cgroup.controllers")).split())
        if not {"memory", "pids"} <= ctrls:
            raise OSError("no memory controller delegated")
        _write(os.path.join(child, "memory.max"), str(memory))
        if os.path.exists(os.path.join(child, "memory.swap.max")):
            _write(os.path.join(child, "memory.swap.max"), "0")
        _write(os.path.join(child, "pids.max"), str(pids))
        if cpus:
            if "cpu" not in ctrls:
                try:
                    _write(os.path.join(parent, "cgroup.subtree_control"), "+cpu")
                except OSError:
                    pass
            if "cpu" not in set(_read(os.path.join(child, "cgroup.controllers")).split()):
                raise OSError("no cpu controller delegated")
            _write(os.path.join(child, "cpu.max"), f"{int(cpus * 100000)} 100000")
        return [child]
    except OSError:
        _rmdir(child)
        return []


def _v1(memory: int, pids: int, cpus: float | None) -> list[str]:
    own = _own_cgroups()
    made: list[str] = []
    name = f"heuresis-{secrets.token_hex(6)}"
    try:
        for ctrl in ("memory", "pids", *(["cpu"] if cpus else [])):
            mount = next((m for m, t, opts in _mounts() if t == "cgroup" and ctrl in opts), None)
            if mount is None or ctrl not in own:
                raise OSError(f"no v1 {ctrl} hierarchy")
            child = os.path.join(mount, own[ctrl].lstrip("/"), name)
            os.mkdir(child)
            made.append(child)
            if ctrl == "memory":
                _write(os.path.join(child, "memory.limit_in_bytes"), str(memory))
                if os.path.exists(os.path.join(child, "memory.memsw.limit_in_bytes")):
                    _write(os.path.join(child, "memory.memsw.limit_in_bytes"), str(memory))
                _write(os.path.join(child, "memory.swappiness"), "0")
            elif ctrl == "pids":
                _write(os.path.join(child, "pids.max"), str(pids))
            else:
                period = int(_read(os.path.join(child, "cpu.cfs_period_us")).strip() or 100000)
                _write(os.path.join(child, "cpu.cfs_quota_us"), str(int(cpus * period)))  # type: ignore[operator]
        return made
    except (OSError, ValueError):
        for d in reversed(made):
            _rmdir(d)
        return []


def _joinable(dirs: list[str]) -> bool:
    """Whether a process can join ``dirs`` (a short shell tries)."""
    import subprocess

    script = 'for d in "$@"; do echo $$ > "$d/cgroup.procs" || exit 1; done'
    try:
        return subprocess.run(["/bin/sh", "-c", script, "sh", *dirs], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def sandbox_bound(memory_mb: int, max_processes: int, *, cpus: float | None = None, required: str = "any",
                  key: str = "memory_bound", tmpfs_mb: int = 0) -> Bound:
    """The bound of one sandbox of ``memory_mb`` in all (see the module); the caller :meth:`Bound.close` s it.

    ``required`` ``cgroup`` raises :class:`BoundUnavailable` (naming ``key``) where no cgroup
    can be created.  ``cpus`` (a CPU quota) holds under a cgroup only; the caller sets
    ``RLIMIT_CPU`` besides.  ``tmpfs_mb``: the sandbox's writable tmpfs folders in all, which a
    cgroup charges as they fill and the seccomp fallback sets aside at their full size.
    """
    if required not in BOUNDS:
        raise ValueError(f"{key} must be one of {list(BOUNDS)}, got {required!r}")
    memory, pids = int(memory_mb) << 20, int(max_processes) + _PIDS_SLACK
    if os.environ.get(CGROUP_ENV) != "off":
        for kind, make in (("cgroup-v2", _v2), ("cgroup-v1", _v1)):
            dirs = make(memory, pids, cpus)
            if dirs and _joinable(dirs):
                return Bound(kind, int(memory_mb), int(memory_mb), int(max_processes), cpus, int(tmpfs_mb), dirs)
            for d in dirs:
                _rmdir(d)
    if required == "cgroup":
        raise BoundUnavailable(f"{key} is 'cgroup' but no memory cgroup can be created here (neither a cgroup v2 "
                               "subtree with the memory controller delegated to the harness nor a writable v1 memory "
                               "hierarchy); set it to 'any' for the seccomp fallback (docs/sandbox.md)")
    left = int(memory_mb) - int(tmpfs_mb)          # what the processes may hold once the tmpfs folders are full
    nproc = max(2, min(int(max_processes), left // MIN_SHARE_MB))
    if left // nproc < MIN_PROCESS_MB:
        raise BoundUnavailable(f"{key}: no cgroup here, and under the seccomp bound memory_mb {int(memory_mb)} MB less "
                               f"the tmpfs folders' {int(tmpfs_mb)} MB (disk_mb each) leaves {left} MB, below the "
                               f"{MIN_PROCESS_MB} MB each of two processes needs at least: raise memory_mb or lower "
                               "disk_mb (docs/sandbox.md, 'Total memory')")
    return Bound("seccomp", int(memory_mb), left // nproc, nproc, None, int(tmpfs_mb), [], seccomp_program())
