"""Attacks on the code tool, run through the agent-facing ``run_code`` tool (as an agent calls it).

Each attack sets up a bait on the harness side (a truth file in the working directory, a secret
in the environment, a loopback listener, ...), sends one program through the tool and checks on
the harness side that the bait held. Used by tests/test_sandbox.py as the harness's user and,
through ``runuser``, as an unprivileged user: ``python tests/sandbox_attacks.py`` prints one JSON
object {attack: [held, detail]}.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from heuresis.causal.grades import DEFAULT_GRADES
from heuresis.causal.graph import Graph
from heuresis.harness.budgets import Budgets, BudgetSettings
from heuresis.harness.sandbox import SandboxLimits
from heuresis.harness.tools import TOOLS, ToolContext

SECRET = "SECRET-DAG-7f3a9c"
DATA = np.arange(12.0).reshape(4, 3)
# 2 GB in all: where no cgroup can be created (an unprivileged harness) each of the 8 processes gets 256 MB
SMALL = SandboxLimits(cpu_seconds=5, memory_mb=2048, wall_seconds=30, max_output_chars=2000, max_processes=8, disk_mb=8)


def call(code: str, limits: SandboxLimits = SMALL):
    """One run_code call as an agent sends it (JSON arguments); returns (text, details, seconds)."""
    ctx = ToolContext(data=DATA, names=("X1", "X2", "X3"), working=Graph.complete(3),
                      budgets=Budgets(BudgetSettings("t", 1.0, 30, 4000, 5, 600), 10), algorithm_map={}, menu={},
                      grades=tuple(DEFAULT_GRADES), code_limits=limits, code_isolation="bwrap")
    t0 = time.monotonic()
    out = TOOLS["run_code"].call(ctx, json.dumps({"code": code}))
    return out.text, out.details, time.monotonic() - t0


def _alive(marker: str) -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if marker in (p / "cmdline").read_bytes().decode(errors="replace"):
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def attack_truth_file(wd: Path):
    truth = wd / "results" / "truth" / "lg" / "test" / "graphs.parquet"
    truth.parent.mkdir(parents=True)
    truth.write_text(SECRET)
    code = f"""
import os, sys
hits = []
for p in [{str(truth)!r}, 'results/truth/lg/test/graphs.parquet', '/proc/self/cwd/results/truth/lg/test/graphs.parquet',
          '/proc/1/cwd/results/truth/lg/test/graphs.parquet', '/proc/1/root' + {str(truth)!r}]:
    try:
        hits.append(open(p).read())
    except OSError as e:
        hits.append(type(e).__name__)
for root, dirs, files in os.walk('/'):
    if root.startswith(('/proc', '/usr', '/sys', '/dev', sys.prefix, sys.base_prefix)):
        dirs[:] = []
        continue
    for f in files:
        try:
            if {SECRET[::-1]!r}[::-1].encode() in open(os.path.join(root, f), 'rb').read(10**6):
                hits.append('FOUND ' + os.path.join(root, f))
        except OSError:
            pass
print(hits, os.listdir('/'))
"""
    text, det, _ = call(code, SandboxLimits(cpu_seconds=10, memory_mb=600, wall_seconds=20))
    return SECRET not in text and "FOUND" not in text and det["isolation"] == "bwrap" and "exit code 0" in text, text[:300]


def attack_environment(wd: Path):
    os.environ["HEURESIS_ATTACK_API_KEY"] = SECRET
    try:
        code = """
import os
out = [repr(dict(os.environ))]
for p in ['/proc/self/environ', '/proc/1/environ', '/proc/%d/environ' % os.getppid()]:
    try:
        out.append(open(p, 'rb').read().decode(errors='replace'))
    except OSError as e:
        out.append(type(e).__name__)
print(out)
"""
        text, _det, _ = call(code)
    finally:
        del os.environ["HEURESIS_ATTACK_API_KEY"]
    return SECRET not in text and "HEURESIS_ATTACK" not in text and "exit code 0" in text, text[:300]


def attack_loopback(wd: Path):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(4)
    port = srv.getsockname()[1]
    abstract = socket.socket(socket.AF_UNIX)
    name = f"\0heuresis-attack-{os.getpid()}"
    abstract.bind(name)
    abstract.listen(1)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass                                   # reachable from the harness itself
        code = f"""
import socket
res = []
try:
    socket.create_connection(('127.0.0.1', {port}), timeout=3); res.append('CONNECTED-TCP')
except OSError as e:
    res.append(type(e).__name__)
try:
    s = socket.socket(socket.AF_UNIX); s.settimeout(3); s.connect({name!r}); res.append('CONNECTED-UNIX')
except OSError as e:
    res.append(type(e).__name__)
print(res)
"""
        text, _, _ = call(code)
    finally:
        srv.close()
        abstract.close()
    return "CONNECTED" not in text and "exit code 0" in text, text[:300]


def attack_marker_and_packages(wd: Path):
    import numpy
    marker = wd / "marker.txt"
    pkg = Path(numpy.__file__).parent / "heuresis_planted.py"
    code = f"""
import os, ctypes
res = []
for p in [{str(marker)!r}, {str(pkg)!r}, '/tmp/x', '/x', '/dev/shm/x', '/usr/x']:
    try:
        open(p, 'w').write('PLANTED'); res.append('WROTE ' + p)
    except OSError as e:
        res.append(type(e).__name__)
libc = ctypes.CDLL(None, use_errno=True)
for target in [b'/', {os.path.dirname(numpy.__file__).encode()!r}]:
    rc = libc.mount(None, target, None, 32, None)   # MS_REMOUNT, read-write
    res.append('REMOUNTED' if rc == 0 else 'remount-failed')
res.append('UNSHARED' if libc.unshare(0x10000000) == 0 else 'unshare-failed')   # CLONE_NEWUSER
try:
    open('/proc/sys/kernel/hostname', 'w').write('pwned'); res.append('WROTE-SYSCTL')
except OSError as e:
    res.append(type(e).__name__)
print(res)
"""
    text, _, _ = call(code)
    ok = not marker.exists() and not pkg.exists() and "WROTE" not in text and "REMOUNTED" not in text \
        and "UNSHARED" not in text and "exit code 0" in text
    return ok, text[:400]


def attack_survivor(wd: Path):
    marker = f"313.{os.getpid() % 1000:03d}"
    code = f"""
import os, subprocess, time
subprocess.Popen(['sleep', '{marker}'], start_new_session=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.execv('/usr/bin/sleep', ['sleep', '{marker}'])
    os._exit(0)
time.sleep(0.3)
print('spawned')
"""
    text, _, _ = call(code)
    deadline = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    return "spawned" in text and not _alive(marker), text[:200]


def attack_capture(wd: Path):
    """The old capture files: replace them by a FIFO, a symlink to the environment, a device; flood."""
    code = """
import os, sys
for name, make in [('stdout.txt', lambda p: os.mkfifo(p)), ('stderr.txt', lambda p: os.symlink('/proc/self/environ', p)),
                   ('out.txt', lambda p: os.symlink('/dev/zero', p))]:
    try:
        make(name)
    except OSError:
        pass
os.dup2(os.open('/dev/zero', os.O_RDONLY), 0)
sys.stdout.write('x' * 10**7)
sys.stdout.flush()
while True:
    sys.stderr.write('y' * 65536)
"""
    text, det, secs = call(code, SandboxLimits(wall_seconds=5, max_output_chars=1000))
    ok = secs < 5 + 20 and len(text) < 5000 and det["truncated"]   # the wall limit and a margin for a loaded machine
    # a child that closes its stdout and sleeps must not hold the harness past the wall limit
    _text2, det2, secs2 = call("import os, time\nos.close(1)\nos.close(2)\ntime.sleep(60)",
                              SandboxLimits(wall_seconds=3))
    return ok and det2["timed_out"] and secs2 < 3 + 20, f"{secs:.1f} s, {len(text)} chars; {secs2:.1f} s"


def _running_descendants() -> int:
    """Processes below this one that still run (zombies, already dead, not counted)."""
    parent, state = {}, {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        state[int(name)], parent[int(name)] = fields[0], int(fields[1])
    me, n = os.getpid(), 0
    for pid in parent:
        q = pid
        while q in parent and q not in (me, 0, 1):
            q = parent[q]
        n += q == me and pid != me and state[pid] != "Z"
    return n


def attack_fork_bomb(wd: Path):
    """A fork bomb: stopped within its limits, and nothing of it left running. Counted are the processes
    below this one, with this one a subreaper while the bomb runs (so that an escaped orphan would be
    reparented here, not to init), never the machine's: other tests may run beside this one."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    PR_SET_CHILD_SUBREAPER = 36
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    try:
        before = _running_descendants()
        _text, det, secs = call("import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass",
                               SandboxLimits(cpu_seconds=3, wall_seconds=4, max_processes=8))
        deadline = time.monotonic() + 15      # reaped by then, also on a loaded machine
        while (after := _running_descendants()) > before and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
    return secs < 4 + 20 and after <= before, f"{secs:.1f} s, processes below the harness {before} -> {after}, {det['limit_hit']}"


def attack_memory_bomb(wd: Path):
    """Several children each asking for more than the per-process limit (under a cgroup the whole bound, else the
    process's share of it); and a tmpfs flood."""
    code = """
import os
kids = []
for _ in range(4):
    pid = os.fork()
    if pid == 0:
        try:
            b = bytearray(2100 * 2**20)
            os._exit(7)
        except MemoryError:
            os._exit(3)
    kids.append(pid)
codes = [os.waitstatus_to_exitcode(os.waitpid(k, 0)[1]) for k in kids]
try:
    with open('flood.bin', 'wb') as f:
        for _ in range(64):
            f.write(b'z' * 2**20)
    disk = 'WROTE-64MB'
except OSError as e:
    disk = type(e).__name__
print(codes, disk)
"""
    text, _, _secs = call(code, SandboxLimits(cpu_seconds=5, memory_mb=2048, wall_seconds=10, max_processes=8,
                                              disk_mb=8))
    return "[3, 3, 3, 3]" in text and "WROTE-64MB" not in text and "OSError" in text, text[:200]


ATTACKS = {name[len("attack_"):]: fn for name, fn in dict(globals()).items() if name.startswith("attack_")}


def run_all() -> dict:
    results = {}
    for name, fn in ATTACKS.items():
        with tempfile.TemporaryDirectory(prefix="heuresis-attack-") as wd:
            old = os.getcwd()
            os.chdir(wd)
            try:
                held, detail = fn(Path(wd))
            except Exception as exc:
                held, detail = False, f"{type(exc).__name__}: {exc}"
            finally:
                os.chdir(old)
        results[name] = [bool(held), str(detail)]
    return results


if __name__ == "__main__":
    json.dump({"uid": os.geteuid(), "python": sys.executable, "results": run_all()}, sys.stdout)
