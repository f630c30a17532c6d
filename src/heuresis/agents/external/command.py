"""The external agent's command: its limits, its sandbox (bubblewrap) command line, its output.

* :func:`command_isolation` — the isolation a command gets (``bwrap`` or ``none``), failing
  closed for ``required``; :func:`command_argv` — its argv and stripped environment, under
  bubblewrap the folders it sees, its tmpfs folders, its limits (:class:`CommandLimits`) and,
  on a private network, the forwarder to the server's Unix socket; :func:`expose_problem` —
  why an ``expose`` folder must not be shown to it.
* :class:`Drain` — reads one of its output pipes, keeping the tail for the transcript.
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "COMMAND_UIDS",
    "INNER_PORT",
    "OUTPUT_KEEP",
    "OUTPUT_READ_MAX",
    "PROXY_ENV",
    "PROXY_PORT",
    "TMPFS_FOLDERS",
    "WORK_DIR",
    "CommandLimits",
    "Drain",
    "command_argv",
    "command_isolation",
    "command_uid",
    "expose_problem",
]

#: What the harness keeps of the command's stdout and stderr (the tail of each) and reads at most.
OUTPUT_KEEP = 20000
OUTPUT_READ_MAX = 16 << 20
#: Inside the private network: the forwarder's port (the server) and the proxy relay's, and where their
#: sockets are bound.
INNER_PORT = 40000
PROXY_PORT = 40001
_SOCKET_DIR = "/heuresis-mcp"
#: The command's work folder inside the sandbox (a size-capped tmpfs).
WORK_DIR = "/agent"
#: Its writable tmpfs folders (the work folder and /tmp), each of ``disk_mb``: inside its memory bound.
TMPFS_FOLDERS = 2


#: The variables that send an allowlisted command's HTTP(S) through the harness's proxy (its relay inside).
PROXY_ENV = dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"), f"http://127.0.0.1:{PROXY_PORT}")
PROXY_ENV.update({"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"})


@dataclass(frozen=True)
class CommandLimits:
    """Limits of an isolated command (config keys of the agent entry; the code tool's machinery sets them)."""

    memory_mb: int = 4096        # in all (a cgroup), else shared by its processes (RLIMIT_AS, seccomp)
    max_processes: int = 64      # processes and threads in the sandbox (RLIMIT_NPROC)
    disk_mb: int = 1024          # each of its tmpfs (the work folder, /tmp); also the largest file
    max_open_files: int = 1024   # RLIMIT_NOFILE
    cpu_seconds: int = 3600      # CPU seconds per process (RLIMIT_CPU)
    cpus: float = 1.0            # CPUs of its cgroup's quota (where a cgroup holds it)
    memory_bound: str = "any"    # any | cgroup: how memory_mb bounds the total (heuresis.harness.bounds)


class Drain:
    """Reads one of the command's output pipes in a thread: keeps its last :data:`OUTPUT_KEEP` bytes.

    Past :data:`OUTPUT_READ_MAX` bytes the pipe is closed (the command's next write fails).
    """

    def __init__(self, pipe) -> None:
        self.pipe, self.total, self.tail = pipe, 0, bytearray()
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True, name="heuresis-agent-output")
        self.thread.start()

    def _read(self) -> None:
        import select

        fd = self.pipe.fileno()
        try:
            while self.total < OUTPUT_READ_MAX and not self._stop.is_set():
                if not select.select([fd], [], [], 0.2)[0]:
                    continue
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self.total += len(chunk)
                self.tail += chunk
                del self.tail[:-OUTPUT_KEEP]
        except (OSError, ValueError):
            pass
        finally:
            self.pipe.close()

    def finish(self, timeout: float = 3.0) -> None:
        """Wait for EOF (a process that left the command's group may hold the pipe: at most ``timeout``)."""
        self.thread.join(timeout)
        self._stop.set()
        self.thread.join()

    def text(self) -> str:
        """The kept tail, decoded."""
        return bytes(self.tail).decode(errors="replace")


#: The forwarder (run by the harness's interpreter, ``-I -S``, inside the private network): it
#: listens on 127.0.0.1:PORT for each PORT=PATH of its first argument before it starts the
#: command, and joins each connection to the Unix socket PATH; it exits with the command's status.
_FORWARDER = """
import os, socket, sys, threading
pairs, argv = [p.split("=", 1) for p in sys.argv[1].split(",")], sys.argv[2:]
listeners = []
for port, path in pairs:
    lst = socket.socket()
    lst.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lst.bind(("127.0.0.1", int(port)))
    lst.listen(64)
    listeners.append((lst, path))
pid = os.fork()
if pid == 0:
    for lst, _ in listeners:
        lst.close()
    try:
        os.execvp(argv[0], argv)
    except OSError as exc:
        print(f"cannot start {argv[0]!r}: {exc}", file=sys.stderr)
        os._exit(127)

def pump(a, b):
    try:
        while True:
            data = a.recv(65536)
            if not data:
                break
            b.sendall(data)
    except OSError:
        pass
    for s in (a, b):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

def serve(lst, path):
    while True:
        c, _ = lst.accept()
        u = socket.socket(socket.AF_UNIX)
        try:
            u.connect(path)
            for a, b in ((c, u), (u, c)):
                threading.Thread(target=pump, args=(a, b), daemon=True).start()
        except (OSError, RuntimeError):
            c.close()
            u.close()

for lst, path in listeners:
    threading.Thread(target=serve, args=(lst, path), daemon=True).start()
_, status = os.waitpid(pid, 0)
os._exit(os.waitstatus_to_exitcode(status) % 256)
"""


#: The uids a root harness runs external commands as: one drawn per command from this range, where no account
#: lives (``nobody``, 65534, is shared by every service that drops privileges: it could read the command's
#: environment, its API keys, through ``/proc/PID/environ``).
COMMAND_UIDS = range(0x5EA00000, 0x5EA00000 + (1 << 20))


def command_uid() -> int:
    """A uid for one external command of a root harness, drawn from :data:`COMMAND_UIDS` (an account of none)."""
    import pwd
    import secrets

    while True:
        uid = COMMAND_UIDS.start + secrets.randbelow(len(COMMAND_UIDS))
        try:
            pwd.getpwuid(uid)
        except KeyError:
            return uid


def expose_problem(path: str) -> str:
    """Why an ``expose`` path must not be shown to the command ('' if it may).

    Refused: a path inside the harness's working folder (its sources, config and ``results/``)
    or its ``results/`` wherever that points, and a path containing either or ``$HOME``.
    """
    real = os.path.realpath(path)
    cwd = os.path.realpath(os.getcwd())
    for what, guarded in (("the working folder", cwd), ("results/", os.path.realpath(os.path.join(cwd, "results")))):
        if real == guarded or real.startswith(guarded.rstrip("/") + "/"):
            return f"it is inside {what} ({guarded})"
    from heuresis.harness.sandbox import hidden_inside

    return hidden_inside(real)


def command_isolation(isolation: str, key: str = "agents.<name>.isolation") -> str:
    """The isolation an agent's command gets under ``isolation`` (config key ``key``): ``bwrap`` or ``none``.

    Raises :class:`~heuresis.harness.sandbox.IsolationUnavailable` for ``required`` where
    bubblewrap does not work (fail closed: :func:`~heuresis.harness.sandbox.resolve_isolation`).
    """
    from heuresis.harness.sandbox import EXTERNAL_REMEDY, resolve_isolation

    return resolve_isolation(isolation, key, EXTERNAL_REMEDY)


def command_argv(command: Sequence[str], workdir: str, isolation: str, expose: Sequence[str] = (),
                 extra_env: Mapping[str, str] | None = None, env_names: Sequence[str] = (), *,
                 socket_dir: str | None = None, limits: CommandLimits = CommandLimits(),
                 uid: int | None = None, bound=None, seccomp_fd: int | None = None,
                 proxy: bool = False) -> tuple[list[str], dict[str, str], str]:
    """The argv, environment and isolation (``bwrap`` or ``none``) of an agent's command.

    The environment holds only ``PATH``, ``HOME`` and ``TMPDIR`` (the work folder), ``LANG``,
    ``extra_env`` and the harness's variables named in ``env_names``; without isolation the
    work folder is ``workdir``.  Under bubblewrap the command sees, read-only, ``/usr`` (and the
    ``/bin``, ``/lib`` links), ``/etc``, the trees of its interpreter (the harness's environment
    for ``python``, with this package hidden) and ``expose``; writable only its work folder
    :data:`WORK_DIR` and ``/tmp``, each a tmpfs of ``limits.disk_mb``; its own ``/proc`` and
    ``/dev``; the limits of ``limits`` (:func:`~heuresis.harness.sandbox.limit_argv`, as the
    code tool; with ``bound``, a :class:`~heuresis.harness.bounds.Bound`, its per-process share
    and processes, and its seccomp filter read by bwrap from ``seccomp_fd``).  The environment
    is the process's own (``env=`` of the caller's ``Popen``),
    never an argument: no key and no token appears on any command line.  With ``socket_dir``
    (the folder of the server's Unix socket ``mcp.sock``) it has a network of its own, where a
    forwarder on ``127.0.0.1:``:data:`INNER_PORT` is the only thing to reach (the server) and,
    with ``proxy``, a relay on :data:`PROXY_PORT` to the harness's proxy (``proxy.sock``, its
    address in :data:`PROXY_ENV`);
    without it, it shares the host's network.  A root harness never runs the command as root:
    an outer bwrap and ``setpriv`` drop to ``uid`` (default :func:`command_uid`, a uid of no
    account, so that no other local user -- not even ``nobody`` -- may read the command's
    ``/proc/PID/environ``) first.  ``isolation`` ``required`` raises
    :class:`~heuresis.harness.sandbox.IsolationUnavailable` where bubblewrap does not work;
    ``best_effort`` then runs without it.
    """
    from heuresis.harness.sandbox import (
        IsolationUnavailable,
        bwrap_path,
        hidden_inside,
        limit_argv,
        package_masks,
        parent_dirs,
        prlimit_path,
        python_trees,
        system_args,
    )

    argv = list(command)
    if argv[0] == "python":
        argv[0] = sys.executable
    used = command_isolation(isolation)
    home = workdir if used == "none" else WORK_DIR
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "TMPDIR": home, "LANG": "C.UTF-8",
           "PYTHONDONTWRITEBYTECODE": "1", **{k: os.environ[k] for k in env_names if k in os.environ},
           **dict(extra_env or {})}
    if proxy:
        if socket_dir is None:
            raise ValueError("a proxy needs the private network (socket_dir)")
        env.update(PROXY_ENV)
    # a command that cannot start is the harness's failure (recorded, retried), not the agent's early exit
    if shutil.which(argv[0], path=env["PATH"]) is None:
        raise FileNotFoundError(f"the external agent's command {argv[0]!r} is not an executable on PATH")
    missing = [p for p in expose if not os.path.exists(p)]
    if missing:
        raise FileNotFoundError(f"the external agent's expose paths do not exist: {missing}")
    for p in expose:
        why = expose_problem(p)
        if why:
            raise IsolationUnavailable(f"the external agent's expose {p!r} refused: {why}")
    if used == "none":
        return argv, env, "none"
    exe = shutil.which(argv[0], path=env["PATH"]) or argv[0]
    trees = python_trees() if os.path.realpath(exe) == os.path.realpath(sys.executable) or socket_dir else []
    if os.path.realpath(exe) != os.path.realpath(sys.executable):
        trees.append(os.path.dirname(os.path.realpath(exe)))
    trees = [t for t in trees if not t.startswith("/usr/")]
    for t in trees:
        why = hidden_inside(os.path.realpath(t))
        if why:
            raise IsolationUnavailable(f"the external agent's command would see what must stay hidden: {why}")
    bwrap = os.path.realpath(bwrap_path())  # type: ignore[type-var]
    prlimit = prlimit_path()
    shown = sorted({os.path.realpath(p) for p in [*trees, *expose]})
    system = system_args(whole_etc=True)
    disk = str(int(limits.disk_mb) * 1024 * 1024)
    views = [*parent_dirs(shown)]
    for p in shown:
        views += ["--ro-bind", p, p]
    net = ["--share-net"] if socket_dir is None else []
    sock = [] if socket_dir is None else ["--ro-bind", socket_dir, _SOCKET_DIR]
    seccomp = [] if seccomp_fd is None else ["--seccomp", str(seccomp_fd)]
    args = [bwrap, "--unshare-all", *net, "--unshare-user", "--disable-userns", "--die-with-parent",
            "--new-session", "--cap-drop", "ALL", *seccomp, "--hostname", "agent", *system, "--proc", "/proc",
            "--dev", "/dev", "--remount-ro", "/dev", "--size", disk, "--tmpfs", "/tmp", *views, *package_masks(trees),
            *sock, "--size", disk, "--tmpfs", WORK_DIR, "--remount-ro", "/", "--chdir", WORK_DIR]
    # no --clearenv, no --setenv: the environment (API keys, the server's URL and token) is the one bwrap itself
    # is started with -- exactly ``env`` -- never an argument, which every local user could read in /proc/*/cmdline
    mem, nproc = (limits.memory_mb, limits.max_processes) if bound is None else (bound.limit_mb, bound.max_processes)
    args += ["--", *limit_argv(prlimit, memory_mb=mem, max_processes=nproc, disk_mb=limits.disk_mb,
                               nofile=limits.max_open_files, cpu_seconds=limits.cpu_seconds), "--"]
    if socket_dir is not None:
        pairs = f"{INNER_PORT}={_SOCKET_DIR}/mcp.sock" + (f",{PROXY_PORT}={_SOCKET_DIR}/proxy.sock" if proxy else "")
        args += [os.path.realpath(sys.executable), "-I", "-S", "-c", _FORWARDER, pairs]
    args += argv
    if os.geteuid() != 0:
        return args, env, "bwrap"  # type: ignore[return-value]
    # a root harness: never run the command as root. As the code tool's sandbox does (docs/sandbox.md), an outer
    # bwrap shows the same trees, setpriv drops to the unprivileged uid, and the bwrap above runs as that user
    uid = command_uid() if uid is None else int(uid)
    setpriv = shutil.which("setpriv")
    if setpriv is None or not os.path.realpath(setpriv).startswith("/usr/"):
        raise IsolationUnavailable("setpriv (util-linux) not found under /usr: needed to leave root before the "
                                   "external agent's command")
    outer = [bwrap, "--unshare-pid", "--die-with-parent", *system, *views]
    if not bwrap.startswith("/usr/"):  # type: ignore[union-attr]
        outer += [*parent_dirs([bwrap]), "--ro-bind", bwrap, bwrap]
    if socket_dir is not None:
        outer += [*parent_dirs([socket_dir]), "--bind", socket_dir, socket_dir]
    outer += ["--dir", "/tmp", "--bind", "/proc", "/proc", "--dev", "/dev", "--",
              os.path.realpath(setpriv), f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
              "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs", "--"]
    return [*outer, *args], env, "bwrap"  # type: ignore[list-item]
