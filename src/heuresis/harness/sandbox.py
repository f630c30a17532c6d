"""The code tool's sandbox (SPEC §5.2): a short numpy/scipy program on the data, isolated.

:func:`run_code` writes a copy of the data matrix (``data.npy`` and ``data.csv`` with header
X1..Xd) and the program (``script.py``) into a fresh temporary folder and runs it in a child
process with

* **only the data**: where the kernel allows (we run as root on Linux), the child lives in new
  network, mount and PID namespaces (``unshare`` from util-linux) and is chrooted into a minimal
  root holding read-only binds of the system and Python trees and the temporary folder at
  ``/sandbox`` — the project, the results and the truth do not exist inside;
* **no network**: a fresh network namespace has only a loopback device, and it is down;
* a **cleaned environment** (PATH, HOME, LANG, single-threaded BLAS; nothing inherited);
* **limits**: CPU seconds (``RLIMIT_CPU``), address space (``RLIMIT_AS``), output size
  (``RLIMIT_FSIZE`` on the captured stdout/stderr files; the result is truncated to
  ``max_output_chars``) and wall time (the parent kills the whole process group);
* **no process left behind**: the process group is killed at the end, and the PID namespace
  kills everything it holds when its first process exits.

When namespaces are unavailable the program still runs with the limits and the cleaned
environment in a temporary folder, and :attr:`SandboxResult.isolation` records what was not
possible (``network`` / ``filesystem`` / ``pid`` False) — it is never silently weaker.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

import numpy as np

__all__ = ["SandboxLimits", "SandboxResult", "run_code", "namespaces_available"]

_BOOT = Path(__file__).with_name("_sandbox_boot.py")


@dataclass(frozen=True)
class SandboxLimits:
    """Limits of one code-tool run (config ``episodes.code_tool``)."""

    cpu_seconds: int = 10
    memory_mb: int = 1024
    wall_seconds: float = 20.0
    max_output_chars: int = 4000


@dataclass
class SandboxResult:
    stdout: str
    stderr: str
    returncode: int | None
    wall_s: float
    timed_out: bool = False
    truncated: bool = False
    limit_hit: str = ""      # "", "wall_time", "cpu_time", "memory", "output"
    isolation: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)

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


@lru_cache(maxsize=1)
def namespaces_available() -> bool:
    """Whether ``unshare --net --mount --pid --fork`` works here (root, or user namespaces)."""
    exe = shutil.which("unshare")
    if exe is None or sys.platform != "linux":
        return False
    try:
        return subprocess.run([exe, "--net", "--mount", "--pid", "--fork", "--kill-child", "true"],
                              capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def _clean_env(home: str) -> dict[str, str]:
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": home, "TMPDIR": "/tmp" if home == "/sandbox" else home,
            "LANG": "C.UTF-8", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
            "PYTHONDONTWRITEBYTECODE": "1", "MPLBACKEND": "Agg"}


def _binds() -> list[str]:
    """Host paths visible (read-only) inside the sandbox: system trees and the Python install."""
    paths = ["/usr", "/bin", "/lib", "/lib64", "/lib32", "/sbin", "/etc/ld.so.cache", "/etc/ld.so.conf",
             "/etc/ld.so.conf.d", "/etc/alternatives", "/dev/null", "/dev/zero", "/dev/urandom", "/dev/random"]
    py = {sys.base_prefix, sys.prefix, sysconfig.get_paths()["stdlib"], sysconfig.get_paths()["platstdlib"],
          *site.getsitepackages(), os.path.dirname(os.path.realpath(sys.executable))}
    # the Python tree must not expose the project: editable installs only add a .pth pointer
    return paths + sorted(p for p in py if p and not any(p.startswith(q + "/") for q in py if q != p))


def _limit_hit(res: SandboxResult, limits: SandboxLimits, cpu_used: float) -> str:
    if res.timed_out:
        return "wall_time"
    rc = res.returncode
    if rc in (-signal.SIGXCPU, 128 + signal.SIGXCPU) or (rc in (-signal.SIGKILL, 137) and cpu_used >= limits.cpu_seconds):
        return "cpu_time"
    if rc in (-signal.SIGXFSZ, 128 + signal.SIGXFSZ):
        return "output"
    if "MemoryError" in res.stderr or "Unable to allocate" in res.stderr or "Cannot allocate memory" in res.stderr:
        return "memory"
    return ""


def run_code(code: str, data: np.ndarray, limits: SandboxLimits = SandboxLimits(), *,
             isolate: bool | None = None) -> SandboxResult:
    """Run ``code`` (Python source) on a copy of ``data`` in the sandbox and capture its output.

    Parameters
    ----------
    code : str
        The program; it finds the data as ``data.npy`` (array n x d) and ``data.csv`` (header
        X1..Xd) in its working folder.
    data : array (n, d)
    limits : SandboxLimits
    isolate : bool, optional
        Force namespaces on/off (default: on when available).
    """
    base = Path(tempfile.mkdtemp(prefix="heuresis-sandbox-"))
    work, root = base / "work", base / "root"
    work.mkdir()
    root.mkdir()
    x = np.asarray(data, dtype=float)
    np.save(work / "data.npy", x)
    header = ",".join(f"X{k + 1}" for k in range(x.shape[1]))
    np.savetxt(work / "data.csv", x, delimiter=",", header=header, comments="", fmt="%.10g")
    (work / "script.py").write_text(code)
    for p in (base, work):
        os.chmod(p, 0o755)
    use_ns = namespaces_available() if isolate is None else (isolate and namespaces_available())
    out_bytes = max(4 * limits.max_output_chars, 65536)
    mem = int(limits.memory_mb) * 1024 * 1024
    if use_ns:
        spec = {"root": str(root), "work": str(work), "binds": _binds(), "python": os.path.realpath(sys.executable),
                "env": _clean_env("/sandbox"),
                "limits": {"cpu_seconds": int(limits.cpu_seconds), "memory_bytes": mem, "file_bytes": out_bytes}}
        cmd = [shutil.which("unshare"), "--net", "--mount", "--pid", "--fork", "--kill-child",
               sys.executable, "-I", "-S", str(_BOOT), json.dumps(spec)]
        env, cwd, preexec = {"PATH": "/usr/bin:/bin"}, str(base), None
        isolation = {"network": True, "filesystem": True, "pid": True}
    else:
        cmd = [sys.executable, "-I", "script.py"]
        env, cwd = _clean_env(str(work)), str(work)
        cpu = int(limits.cpu_seconds)

        def preexec() -> None:  # runs in the child before exec
            resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
            resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
            resource.setrlimit(resource.RLIMIT_FSIZE, (out_bytes, out_bytes))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

        isolation = {"network": False, "filesystem": False, "pid": False,
                     "why": "unshare (network/mount/PID namespaces) not available on this host"}
    t0 = time.monotonic()
    timed_out = False
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    try:
        with open(work / "stdout.txt", "wb") as fo, open(work / "stderr.txt", "wb") as fe:
            proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=fo, stderr=fe, cwd=cwd, env=env,
                                    start_new_session=True, preexec_fn=preexec)
            try:
                proc.wait(timeout=float(limits.wall_seconds))
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)  # the whole group, whatever it spawned
                except ProcessLookupError:
                    pass
                proc.wait()
        wall = time.monotonic() - t0
        cpu_used = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
        raw = (work / "stdout.txt").read_bytes()
        err = (work / "stderr.txt").read_bytes()[-20000:].decode(errors="replace")
        text = raw.decode(errors="replace")
        truncated = len(text) > limits.max_output_chars or len(raw) >= out_bytes
        res = SandboxResult(stdout=text[: limits.max_output_chars], stderr=err,
                            returncode=None if timed_out else proc.returncode, wall_s=round(wall, 3),
                            timed_out=timed_out, truncated=truncated, isolation=isolation)
        res.limit_hit = _limit_hit(res, limits, cpu_used) or ("output" if len(raw) >= out_bytes else "")
        return res
    finally:
        shutil.rmtree(base, ignore_errors=True)
