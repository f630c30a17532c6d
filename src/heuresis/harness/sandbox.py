"""The code tool's sandbox: a short numpy/scipy program on a copy of the data, isolated by bubblewrap.

:func:`run_code` writes the data matrix (``data.npy`` and ``data.csv`` with header X1..Xd) and the
program (``script.py``) to a private temporary folder and runs the program under **bubblewrap**
(``bwrap``, the sandbox of Flatpak) — see ``docs/sandbox.md`` for exactly what that promises:

* new user, mount, PID, network, IPC, UTS and cgroup namespaces (``--unshare-all``; no network
  but a loopback of its own), no capabilities, no new privileges, no nested user namespaces,
  a new session, killed with its parent;
* a read-only filesystem holding only ``/usr``, the interpreter and packages of the environment the
  harness runs in (``sys.prefix`` and the base installation it points to: the same numpy/scipy),
  ``/etc/ld.so.cache``, a private ``/proc`` and ``/dev``, and the work folder ``/sandbox``: a
  size-capped tmpfs holding read-only copies of the data and the program;
* output read by the harness through pipes (the child cannot redirect them), capped while read;
* limits set inside the user namespace by ``prlimit``: CPU seconds, address space per process and
  processes (``RLIMIT_NPROC`` counts the sandbox's own user namespace); wall time (the parent
  kills the sandbox; the PID namespace takes every process with it).

On a root host the sandbox never runs as root: an outer ``bwrap`` (mount namespace only) shows the
same trees, ``setpriv`` drops to the unprivileged uid :data:`SANDBOX_UID`, and the inner ``bwrap``
builds the sandbox above as that user.

The isolation used is chosen by the config key ``episodes.code_tool.isolation``
(:data:`ISOLATION_MODES`): ``required`` (default) refuses to run without bubblewrap,
``best_effort`` falls back to ``"none"`` (the limits, a clean environment and a temporary folder —
no isolation), ``off`` does not offer the code tool. :attr:`SandboxResult.isolation` records
what was used.
"""

from __future__ import annotations

import os
import re
import resource
import selectors
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

from heuresis.config.loading import schema_default
from heuresis.config.settings import CodeTool
from heuresis.harness.bounds import Bound, BoundUnavailable, sandbox_bound

__all__ = [
    "EXTERNAL_REMEDY",
    "ISOLATION_KEY",
    "ISOLATION_MODES",
    "SANDBOX_UID",
    "IsolationUnavailable",
    "SandboxLimits",
    "SandboxResult",
    "bwrap_path",
    "check_isolation",
    "hidden_inside",
    "isolation_for",
    "isolation_status",
    "limit_argv",
    "package_masks",
    "parent_dirs",
    "prlimit_path",
    "python_trees",
    "resolve_isolation",
    "run_code",
    "system_args",
]

#: Values of ``episodes.code_tool.isolation``.
ISOLATION_MODES = ("required", "best_effort", "off")
ISOLATION_KEY = "episodes.code_tool.isolation"
#: What to do where an external agent's command cannot be isolated.
EXTERNAL_REMEDY = "Set the agent's isolation to 'best_effort' or 'none' only for a trusted agent (docs/mcp.md)"
#: Host uid (and gid) the sandbox runs as when the harness runs as root.
SANDBOX_UID = 65534
#: Environment variable naming the bwrap binary (default: ``bwrap`` on PATH).
BWRAP_ENV = "HEURESIS_BWRAP"
_STDERR_KEEP = 20000
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}")


class IsolationUnavailable(RuntimeError):
    """Bubblewrap isolation cannot be set up on this host."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one code-tool run (config ``episodes.code_tool``; the defaults are the schema's)."""

    cpu_seconds: int = schema_default("episodes", "code_tool", "cpu_seconds")
    memory_mb: int = schema_default("episodes", "code_tool", "memory_mb")      # address space per process (RLIMIT_AS)
    wall_seconds: float = float(schema_default("episodes", "code_tool", "wall_seconds"))
    max_output_chars: int = schema_default("episodes", "code_tool", "max_output_chars")
    max_processes: int = schema_default("episodes", "code_tool", "max_processes")  # processes and threads (RLIMIT_NPROC)
    disk_mb: int = schema_default("episodes", "code_tool", "disk_mb")          # size of the tmpfs work folder
    memory_bound: str = schema_default("episodes", "code_tool", "memory_bound")  # any | cgroup (bounds.BOUNDS)


@dataclass
class SandboxResult:
    """What one run of agent code in the sandbox produced and which limit, if any, stopped it.

    Attributes
    ----------
    stdout, stderr : str
        Output of the run (``stdout`` cut at ``max_output_chars``, ``truncated`` then set).
    returncode : int or None
        Exit status; None when the run was killed at the wall-time limit (``timed_out``).
    wall_s : float
        Wall time of the run in seconds.
    limit_hit : str
        ``""`` or the limit reached: ``wall_time``, ``cpu_time``, ``memory``, ``output``, ``processes``.
    isolation : str
        How the run was isolated: ``bwrap`` or ``none``.
    bound : dict
        How its total memory was bounded (:meth:`heuresis.harness.bounds.Bound.record`:
        ``memory_bound`` ``cgroup-v2``, ``cgroup-v1`` or ``seccomp``; ``rlimit`` without isolation).
    """

    stdout: str
    stderr: str
    returncode: int | None
    wall_s: float
    timed_out: bool = False
    truncated: bool = False
    limit_hit: str = ""      # "", "wall_time", "cpu_time", "memory", "output", "processes"
    isolation: str = ""      # "bwrap" or "none"
    bound: dict = field(default_factory=dict)   # the total memory bound used (bounds.Bound.record)

    def as_dict(self) -> dict:
        """Return the result as a plain dict."""
        return asdict(self)

    def shown(self) -> dict:
        """What :meth:`render` tells the agent, as values (the code tool's result data)."""
        return {"exit_code": None if self.timed_out else self.returncode, "timed_out": self.timed_out,
                "limit_hit": "wall_time" if self.timed_out else self.limit_hit, "stdout": self.stdout,
                "truncated": self.truncated, "stderr_tail": self.stderr[-1500:] if self.stderr.strip() else ""}

    def render(self) -> str:
        """The text the agent reads."""
        head = f"exit code {self.returncode}" if not self.timed_out else "killed: wall-time limit reached"
        if self.limit_hit and not self.timed_out:
            head += f" (limit reached: {self.limit_hit})"
        out = [head, "stdout:", self.stdout if self.stdout else "(empty)"]
        if self.truncated:
            out.append("[stdout truncated]")
        if self.stderr.strip():
            out += ["stderr (end):", self.stderr[-1500:]]
        return "\n".join(out)


def bwrap_path() -> str | None:
    """The bwrap binary: ``$HEURESIS_BWRAP`` if set, else ``bwrap`` on PATH."""
    exe = os.environ.get(BWRAP_ENV) or shutil.which("bwrap")
    return exe or None


def _clean_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}


def python_trees() -> list[str]:
    """Directories of the running environment: its prefix, the base installation, site-packages."""
    cand = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix, sysconfig.get_paths()["stdlib"],
            sysconfig.get_paths()["platstdlib"], sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"],
            *site.getsitepackages(), os.path.dirname(os.path.realpath(sys.executable))}
    cand = {os.path.realpath(p) for p in cand if p} | {os.path.abspath(p) for p in cand if p}
    cand = {p for p in cand if os.path.isdir(p) and p != "/usr" and not p.startswith("/usr/")}
    return sorted(p for p in cand if not any(p.startswith(q + "/") for q in cand if q != p))


def hidden_inside(tree: str) -> str:
    """Why binding ``tree`` would expose what must stay hidden ('' if it does not)."""
    for what, path in (("the working directory", os.getcwd()), ("$HOME", os.path.expanduser("~"))):
        path = os.path.realpath(path)
        if path == tree or path.startswith(tree.rstrip("/") + "/"):
            return f"the Python environment's tree {tree} contains {what} ({path})"
    return ""


def package_masks(trees: list[str]) -> list[str]:
    """The bwrap arguments hiding the project's own package, inside a bound site-packages, behind an empty tmpfs."""
    out = []
    for sp in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *site.getsitepackages()}:
        pkg = os.path.join(sp, "heuresis")
        if os.path.isdir(pkg) and any(pkg.startswith(t + "/") for t in trees):
            out += ["--size", "4096", "--tmpfs", pkg, "--remount-ro", pkg]
    return out


def parent_dirs(paths) -> list[str]:
    """The bwrap arguments creating every parent folder of ``paths`` (but ``/usr``, ``/etc``), mode 0755."""
    out, seen = [], set()
    for p in paths:
        parts = p.strip("/").split("/")[:-1]
        for k in range(1, len(parts) + 1):
            d = "/" + "/".join(parts[:k])
            if d not in seen and d not in ("/usr", "/etc"):
                seen.add(d)
                out += ["--perms", "0755", "--dir", d]
    return out


def system_args(*, whole_etc: bool = False) -> list[str]:
    """Return the bwrap arguments that show the system read-only.

    ``/usr``, the top-level library links, and ``/etc/ld.so.cache`` only (``whole_etc``: all of
    ``/etc``, for a command that needs its network setup).
    """
    args = ["--ro-bind", "/usr", "/usr"]
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            args += ["--ro-bind", top, top]
    if whole_etc:
        args += ["--ro-bind", "/etc", "/etc"]
    elif os.path.exists("/etc/ld.so.cache"):
        args += ["--perms", "0755", "--dir", "/etc", "--ro-bind", "/etc/ld.so.cache", "/etc/ld.so.cache"]
    return args


def _tree_args(trees: list[str]) -> list[str]:
    args = parent_dirs(trees)
    for t in trees:
        args += ["--ro-bind", t, t]
    return args


def _command(bwrap: str, files: dict[str, str], limits: SandboxLimits, bound: Bound,
             seccomp_fd: int | None = None) -> list[str]:
    """The full command: bwrap (nested under a root-only outer bwrap + setpriv when running as root)."""
    trees = python_trees()
    for t in trees:
        why = hidden_inside(t)
        if why:
            raise IsolationUnavailable(why)
    prlimit = prlimit_path()
    setpriv = shutil.which("setpriv")
    setpriv = os.path.realpath(setpriv) if setpriv else None
    bwrap = os.path.realpath(bwrap)
    root = os.geteuid() == 0
    src = {name: (f"/heuresis-sandbox-files/{name}" if root else path) for name, path in files.items()}
    cpu = int(limits.cpu_seconds)
    disk = int(limits.disk_mb) * 1024 * 1024
    seccomp = [] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]
    inner = [bwrap, "--unshare-all", "--unshare-user", "--disable-userns", "--die-with-parent", "--new-session",
             "--cap-drop", "ALL", *seccomp, "--hostname", "sandbox", *system_args(), *_tree_args(trees), *package_masks(trees),
             "--proc", "/proc", "--dev", "/dev", "--remount-ro", "/dev", "--size", str(disk), "--tmpfs", "/sandbox"]
    for name in files:
        inner += ["--ro-bind", src[name], f"/sandbox/{name}"]
    inner += ["--remount-ro", "/", "--chdir", "/sandbox", "--clearenv"]
    for k, v in _clean_env("/sandbox").items():
        inner += ["--setenv", k, v]
    inner += ["--", *limit_argv(prlimit, memory_mb=bound.limit_mb, max_processes=bound.max_processes,
                                disk_mb=limits.disk_mb, cpu_seconds=cpu),
              "--", os.path.abspath(sys.executable), "-I", "script.py"]
    if not root:
        return inner
    if setpriv is None:
        raise IsolationUnavailable("setpriv (util-linux) not found: needed to leave root before the sandbox")
    outer = [bwrap, "--unshare-pid", "--die-with-parent", *system_args(), *_tree_args(trees),
             "--perms", "0755", "--dir", "/heuresis-sandbox-files"]
    if not bwrap.startswith("/usr/"):      # the inner bwrap runs in the outer's view
        outer += [*parent_dirs([bwrap]), "--ro-bind", bwrap, bwrap]
    for name, path in files.items():
        outer += ["--ro-bind", path, src[name]]
    # the inner bwrap needs a fully visible procfs to mount its own; gone from view after its pivot_root
    outer += ["--dir", "/tmp", "--bind", "/proc", "/proc", "--dev", "/dev", "--", setpriv,
              f"--reuid={SANDBOX_UID}", f"--regid={SANDBOX_UID}", "--clear-groups", "--inh-caps=-all",
              "--bounding-set=-all", "--no-new-privs", "--"]
    return outer + inner


def prlimit_path() -> str:
    """The ``prlimit`` binary (util-linux) under ``/usr``; raises :class:`IsolationUnavailable` without it."""
    prlimit = shutil.which("prlimit")
    prlimit = os.path.realpath(prlimit) if prlimit else None
    if prlimit is None or not prlimit.startswith("/usr/"):
        raise IsolationUnavailable("prlimit (util-linux) not found under /usr")
    return prlimit


def limit_argv(prlimit: str, *, memory_mb: int, max_processes: int, disk_mb: int, cpu_seconds: int | None = None,
               nofile: int = 256) -> list[str]:
    """The ``prlimit`` command (without its ``--`` and program) setting a sandbox's limits.

    Address space per process (``memory_mb``), processes and threads (``max_processes``; set
    inside the sandbox's user namespace, it counts the sandbox's own), the largest file
    (``disk_mb``, the size of its tmpfs), open files, no core dumps and, if given, CPU seconds per
    process.  One place for the code tool and the external agent's command.
    """
    mem, disk, nproc = int(memory_mb) * 1024 * 1024, int(disk_mb) * 1024 * 1024, int(max_processes)
    cpu = [f"--cpu={int(cpu_seconds)}:{int(cpu_seconds) + 1}"] if cpu_seconds is not None else []
    return [prlimit, *cpu, f"--as={mem}:{mem}", f"--nproc={nproc}:{nproc}", f"--fsize={disk}:{disk}",
            f"--nofile={int(nofile)}:{int(nofile)}", "--core=0:0"]


def _limit_hit(res: SandboxResult, limits: SandboxLimits, cpu_used: float) -> str:
    if res.timed_out:
        return "wall_time"
    rc = res.returncode
    if rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or (rc in (-signal.SIGKILL, 137) and cpu_used >= limits.cpu_seconds):
        return "cpu_time"
    if rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
        return "output"
    err = res.stderr
    if "MemoryError" in err or "Unable to allocate" in err or "Cannot allocate memory" in err:
        return "memory"
    if "Resource temporarily unavailable" in err and ("fork" in err or "Popen" in err or "thread" in err):
        return "processes"
    return ""


def _read_capped(proc: subprocess.Popen, deadline: float, out_cap: int) -> tuple[bytes, bytes, bool, bool]:
    """Read stdout (first ``out_cap`` bytes) and stderr (tail) until EOF or the deadline.

    Past the cap the read end is closed (the child's next write fails). Returns stdout, stderr,
    whether stdout hit the cap, whether the deadline passed.
    """
    sel = selectors.DefaultSelector()
    out, err = bytearray(), bytearray()
    for f in (proc.stdout, proc.stderr):
        os.set_blocking(f.fileno(), False)  # type: ignore[union-attr]
        sel.register(f, selectors.EVENT_READ)  # type: ignore[arg-type]
    capped = timed_out = False
    err_read = 0
    try:
        while sel.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in sel.select(timeout=min(left, 0.5)):
                try:
                    chunk = os.read(key.fd, 65536)
                except BlockingIOError:
                    continue
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                if key.fileobj is proc.stdout:
                    out += chunk[: out_cap - len(out)]
                    if len(out) >= out_cap:
                        capped = True
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                else:
                    err_read += len(chunk)
                    err += chunk
                    del err[:-_STDERR_KEEP]
                    if err_read > 50 * _STDERR_KEEP:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()  # type: ignore[union-attr]
    finally:
        sel.close()
    return bytes(out), bytes(err), capped, timed_out


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # bwrap's group; the PID namespace dies with its init
    except ProcessLookupError:
        pass


def run_code(code: str, data: np.ndarray | None, limits: SandboxLimits = SandboxLimits(), *,
             isolation: str = "bwrap", files: Mapping[str, str] | None = None,
             _probing: bool = False) -> SandboxResult:
    """Run ``code`` (Python source) on a copy of ``data`` and capture its output.

    Parameters
    ----------
    code : str
        The program; it finds the data as ``data.npy`` (array n x d) and ``data.csv`` (header
        X1..Xd) in its working folder.
    data : array (n, d), or None
        None: no ``data.npy``/``data.csv`` (the data come as ``files``).
    limits : SandboxLimits
    files : mapping of file name to text, optional
        Further read-only data files of the working folder (the games' flights as CSV).
    isolation : {"bwrap", "none"}
        ``"bwrap"`` (default) raises :class:`IsolationUnavailable` where bubblewrap cannot be used;
        ``"none"`` runs without isolation (only the limits, a clean environment, a temporary folder).
    """
    if isolation not in ("bwrap", "none"):
        raise ValueError(f"isolation must be 'bwrap' or 'none', got {isolation!r}")
    bwrap = bwrap_path()
    if isolation == "bwrap" and not _probing:
        ok, why = isolation_status()
        if not ok:
            raise IsolationUnavailable(why)
    base = Path(tempfile.mkdtemp(prefix="heuresis-sandbox-"))     # mode 0700: the host's other users see nothing
    try:
        extra = dict(files or {})
        for name in extra:
            if name in ("data.npy", "data.csv", "script.py") or not _SAFE_NAME.fullmatch(name):
                raise ValueError(f"sandbox data file name {name!r} is reserved or not a plain file name")
        files = {"script.py": base / "script.py"}  # type: ignore[dict-item]
        if data is not None:
            x = np.asarray(data, dtype=float)
            files.update({"data.npy": base / "data.npy", "data.csv": base / "data.csv"})  # type: ignore[dict-item]
            np.save(files["data.npy"], x)
            header = ",".join(f"X{k + 1}" for k in range(x.shape[1]))
            np.savetxt(files["data.csv"], x, delimiter=",", header=header, comments="", fmt="%.10g")
        for name, text in extra.items():
            files[name] = base / name  # type: ignore[assignment]
            files[name].write_text(text)  # type: ignore[attr-defined]
        files["script.py"].write_text(code)  # type: ignore[attr-defined]
        for f in files.values():
            os.chmod(f, 0o644)
        out_cap = max(4 * limits.max_output_chars, 65536)
        mem, cpu = int(limits.memory_mb) * 1024 * 1024, int(limits.cpu_seconds)
        bound: Bound | None = None
        fd: int | None = None
        if isolation == "bwrap":
            try:
                bound = sandbox_bound(limits.memory_mb, limits.max_processes, required=limits.memory_bound,
                                      key="episodes.code_tool.memory_bound", tmpfs_mb=limits.disk_mb)
            except BoundUnavailable as exc:
                raise IsolationUnavailable(str(exc)) from None
            fd = bound.seccomp_fd()
            cmd = _command(bwrap, {k: str(v) for k, v in files.items()}, limits, bound, fd)  # type: ignore[arg-type]
            env, cwd, preexec = {"PATH": "/usr/bin:/bin"}, "/", (bound.preexec if bound.dirs else None)
        else:
            work = base / "work"
            work.mkdir()
            for k, f in files.items():
                shutil.copy(f, work / k)
            cmd = [sys.executable, "-I", "script.py"]
            env, cwd = _clean_env(str(work)), str(work)

            def preexec() -> None:  # runs in the child before exec
                resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
                resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        t0 = time.monotonic()
        before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
        try:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    cwd=cwd, env=env, start_new_session=True, preexec_fn=preexec,
                                    pass_fds=() if fd is None else (fd,))
        except BaseException:
            if bound is not None:
                bound.close()
            raise
        finally:
            if fd is not None:
                os.close(fd)
        try:
            raw, err, capped, timed_out = _read_capped(proc, t0 + float(limits.wall_seconds), out_cap)
            if not timed_out:
                try:
                    proc.wait(timeout=max(0.1, t0 + float(limits.wall_seconds) - time.monotonic()))
                except subprocess.TimeoutExpired:
                    timed_out = True
        finally:
            _kill(proc)
            proc.wait()
            for f in (proc.stdout, proc.stderr):  # type: ignore[assignment]
                if not f.closed:  # type: ignore[attr-defined]
                    f.close()  # type: ignore[attr-defined]
            if bound is not None:
                bound.close()
        wall = time.monotonic() - t0
        cpu_used = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
        text = raw.decode(errors="replace")
        res = SandboxResult(stdout=text[: limits.max_output_chars], stderr=err.decode(errors="replace"),
                            returncode=None if timed_out else proc.returncode, wall_s=round(wall, 3),
                            timed_out=timed_out, truncated=capped or len(text) > limits.max_output_chars,
                            isolation=isolation,
                            bound=bound.record() if bound is not None else {"memory_bound": "rlimit",
                                                                              "per_process_mb": limits.memory_mb})
        res.limit_hit = _limit_hit(res, limits, cpu_used) or ("output" if capped else "")
        if bound is not None and bound.oom_killed and res.limit_hit in ("", "cpu_time"):
            res.limit_hit = "memory"   # the cgroup's OOM killer (SIGKILL): not the CPU limit
        return res
    finally:
        shutil.rmtree(base, ignore_errors=True)


_PROBE = "import numpy, scipy, sys\nprint(sys.prefix, numpy.__file__, scipy.__file__)"


@lru_cache(maxsize=8)
def _status(bwrap: str | None, euid: int, prefix: str) -> tuple[bool, str]:
    if sys.platform != "linux":
        return False, f"bubblewrap needs Linux (this is {sys.platform})"
    if bwrap is None:
        return False, "bwrap (bubblewrap) not found on PATH (Debian/Ubuntu: apt-get install bubblewrap)"
    import numpy
    import scipy

    try:
        r = run_code(_PROBE, np.zeros((2, 2)), SandboxLimits(cpu_seconds=20, wall_seconds=60), isolation="bwrap",
                     _probing=True)
    except IsolationUnavailable as exc:
        return False, str(exc)
    except OSError as exc:
        return False, f"cannot run {bwrap}: {exc}"
    want = f"{sys.prefix} {numpy.__file__} {scipy.__file__}"
    if r.returncode == 0 and r.stdout.strip() == want:
        return True, ""
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    why = lines[-1][:300] if lines else f"exit code {r.returncode}, output {r.stdout.strip()[:200]!r}"
    return False, f"{bwrap} cannot build the sandbox here: {why}"


def isolation_status() -> tuple[bool, str]:
    """Whether bubblewrap isolation works on this host (probed once per bwrap binary), and why not."""
    return _status(bwrap_path(), os.geteuid(), sys.prefix)


def resolve_isolation(mode: str, key: str, remedy: str) -> str:
    """The isolation that mode ``mode`` of config key ``key`` gets here: ``bwrap`` or ``none``.

    The one isolation policy of agent-run code (the code tool, an external agent's command):
    ``required`` gets bubblewrap or raises :class:`IsolationUnavailable` naming ``key`` and
    ``remedy`` (fail closed); ``best_effort`` gets bubblewrap where it works, else ``none``
    (recorded with the result); ``none`` is no isolation, asked for.
    """
    if mode == "none":
        return "none"
    ok, why = isolation_status()
    if ok:
        return "bwrap"
    if mode == "required":
        raise IsolationUnavailable(f"config key {key} is 'required' but bubblewrap isolation is not available on "
                                   f"this host: {why}. {remedy}")
    return "none"


def isolation_for(mode: str) -> str:
    """The isolation the code tool uses under config mode ``mode``: ``bwrap``, ``none``, or ``off`` (no code tool).

    Raises :class:`IsolationUnavailable` (naming the config key) for ``required`` where bubblewrap
    does not work (:func:`resolve_isolation`).
    """
    if mode is False:   # YAML 1.1 reads an unquoted `off` (the schema's enum too) as false
        mode = "off"
    if mode not in ISOLATION_MODES:
        raise ValueError(f"{ISOLATION_KEY} must be one of {list(ISOLATION_MODES)}, got {mode!r}")
    if mode == "off":
        return "off"
    return resolve_isolation(mode, ISOLATION_KEY,
                             f"Install bubblewrap and allow unprivileged user namespaces, or set {ISOLATION_KEY} to "
                             "'best_effort' (runs agent code without isolation, recorded per episode) or 'off' "
                             "(no code tool); see docs/sandbox.md")


def check_isolation(cfg) -> str:
    """The isolation the configured code tool will use (raises :class:`IsolationUnavailable`).

    Also raises it for an external agent in use (an active grid, the games) whose command must run
    isolated (``isolation: required``, its default) where bubblewrap does not work (docs/mcp.md).
    """
    code = CodeTool.from_config(cfg["episodes"]["code_tool"])
    used = isolation_for(code.isolation)
    if used == "bwrap":
        _check_bound("episodes.code_tool.memory_bound", code.memory_mb, code.max_processes, code.disk_mb,
                     code.memory_bound)
    eps, agents = cfg.get("episodes", {}), cfg.get("agents", {})
    in_use = {a for g in eps.get("run", []) for a in eps.get("grids", {}).get(g, {}).get("agents", [])}
    in_use |= set((cfg.get("games") or {}).get("agents", []))
    for name in sorted(in_use):
        spec = agents.get(name, {})
        if spec.get("kind") == "external" and spec.get("command"):
            resolve_isolation(spec.get("isolation", "required"), f"agents.{name}.isolation", EXTERNAL_REMEDY)
        if spec.get("kind") == "external" and spec.get("command") and spec.get("memory_bound") == "cgroup":
            _check_bound(f"agents.{name}.memory_bound", 64, 2, 0, "cgroup")
    return used


def _check_bound(key: str, memory_mb: int, max_processes: int, tmpfs_mb: int, required: str) -> None:
    """Raise :class:`IsolationUnavailable` (naming ``key``) where the sandbox's bound cannot be set up.

    That is: no cgroup where one is ``required``, or under the seccomp fallback a ``memory_mb`` that the
    tmpfs folders leave too little of.
    """
    try:
        sandbox_bound(memory_mb, max_processes, required=required, key=f"config key {key}", tmpfs_mb=tmpfs_mb).close()
    except BoundUnavailable as exc:
        raise IsolationUnavailable(str(exc)) from None
