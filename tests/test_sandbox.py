"""The code tool's sandbox: attacks through the agent-facing tool (as the harness's user and as an
unprivileged user), limits, and failing closed where bubblewrap cannot isolate."""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

from heuresis.harness import sandbox
from heuresis.harness.sandbox import (
    ISOLATION_KEY,
    IsolationUnavailable,
    SandboxLimits,
    isolation_for,
    isolation_status,
    run_code,
)

sys.path.insert(0, str(Path(__file__).parent))
import sandbox_attacks
from conftest import SCENARIOS

DATA = np.arange(12.0).reshape(4, 3)
HERE = Path(__file__).resolve().parent
OK, WHY = isolation_status()
needs_bwrap = pytest.mark.skipif(not OK, reason=f"bubblewrap isolation unavailable on this host: {WHY}")


@pytest.fixture
def fake_bwrap(tmp_path, monkeypatch):
    """A bwrap that cannot create namespaces (what a host without user namespaces gives)."""
    exe = tmp_path / "bwrap"
    exe.write_text("#!/bin/sh\necho 'bwrap: No permissions to create new namespace, likely because the kernel "
                   "does not allow non-privileged user namespaces.' >&2\nexit 1\n")
    exe.chmod(0o755)
    monkeypatch.setenv(sandbox.BWRAP_ENV, str(exe))
    return exe


# --- attacks through the tool -----------------------------------------------------------------
@needs_bwrap
@pytest.mark.parametrize("attack", sorted(sandbox_attacks.ATTACKS))
def test_attack_fails_through_the_tool(attack, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    held, detail = sandbox_attacks.ATTACKS[attack](tmp_path)
    assert held, detail


def _test_venv() -> Path:
    """A venv on the system Python that an unprivileged user can run (numpy, scipy, jsonschema, PyYAML).

    PyYAML: the harness reads its defaults from the config schema (a YAML file). A venv made
    before that gets what it lacks.
    """
    venv = Path(os.environ.get("HEURESIS_SANDBOX_TEST_VENV", "/opt/heuresis-sandbox-venv"))
    py = venv / "bin" / "python"
    if not py.exists():
        subprocess.run(["/usr/bin/python3", "-m", "venv", str(venv)], check=True, timeout=300)
    if subprocess.run([str(py), "-c", "import numpy, scipy, jsonschema, yaml"], capture_output=True).returncode:
        subprocess.run([str(py), "-m", "pip", "install", "-q", "numpy", "scipy", "jsonschema", "pyyaml"], check=True,
                       timeout=900)
    return py


def test_attacks_fail_as_an_unprivileged_user():
    """The same attacks, the harness run by an unprivileged user (a SLURM node's normal case)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to switch to an unprivileged test user (runuser)")
    if shutil.which("runuser") is None or shutil.which("bwrap") is None or not Path("/usr/bin/python3").exists():
        pytest.skip("needs runuser, bwrap and /usr/bin/python3")
    user = os.environ.get("HEURESIS_SANDBOX_TEST_USER", "heusbx")
    if subprocess.run(["id", user], capture_output=True).returncode != 0:
        subprocess.run(["useradd", "-M", "-s", "/usr/sbin/nologin", user], check=True)
    py = _test_venv()
    src = Path(sandbox.__file__).resolve().parents[2]
    wd = Path(tempfile.mkdtemp(prefix="heuresis-unpriv-"))   # pytest's tmp_path is private to root
    wd.chmod(0o777)
    try:
        proc = subprocess.run(["runuser", "-u", user, "--", "env", "-i", "PATH=/usr/bin:/bin", f"PYTHONPATH={src}",
                               str(py), str(HERE / "sandbox_attacks.py")], cwd=wd, capture_output=True, text=True,
                              timeout=600)
    finally:
        shutil.rmtree(wd, ignore_errors=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["uid"] != 0 and set(out["results"]) == set(sandbox_attacks.ATTACKS)
    failed = {k: v[1] for k, v in out["results"].items() if not v[0]}
    assert not failed, failed


# --- the sandbox itself ----------------------------------------------------------------------------
@needs_bwrap
def test_code_sees_the_data_copy_and_the_environments_packages():
    import scipy

    r = run_code("import numpy as np, scipy, sys\nx = np.load('data.npy')\n"
                 "print(x.sum(), open('data.csv').readline().strip(), scipy.__file__, sys.prefix)", DATA)
    assert r.returncode == 0 and r.isolation == "bwrap"
    assert r.stdout.split() == [str(DATA.sum()), "X1,X2,X3", scipy.__file__, sys.prefix]


@needs_bwrap
def test_cpu_limit_stops_a_busy_loop():
    r = run_code("while True:\n    pass", DATA, SandboxLimits(cpu_seconds=1, wall_seconds=30))
    assert r.limit_hit == "cpu_time" and r.wall_s < 15


@needs_bwrap
def test_memory_limit_stops_a_large_allocation():
    r = run_code("import numpy as np\na = np.ones(10**9)\nprint('ALLOCATED', a.sum())", DATA,
                 SandboxLimits(memory_mb=400))
    assert "ALLOCATED" not in r.stdout and r.limit_hit == "memory"


@needs_bwrap
def test_process_limit_is_reported():
    code = ("import subprocess\nps = []\ntry:\n    for _ in range(50):\n        ps.append(subprocess.Popen(['sleep', '3']))\n"
            "except OSError as e:\n    print('stopped at', len(ps))\n    raise")
    r = run_code(code, DATA, SandboxLimits(max_processes=6, wall_seconds=10))
    n = int(r.stdout.split()[-1])
    assert 1 <= n < 6 and r.limit_hit == "processes"


@needs_bwrap
def test_wall_limit_kills_a_sleeper_and_output_is_truncated():
    r = run_code("import time\ntime.sleep(60)", DATA, SandboxLimits(wall_seconds=1.5))
    assert r.timed_out and r.limit_hit == "wall_time" and r.wall_s < 10
    r = run_code("print('x' * 100000)", DATA, SandboxLimits(max_output_chars=500))
    assert r.truncated and len(r.stdout) == 500


def test_unisolated_fallback_is_recorded_and_limited(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    r = run_code("import os\nprint(sorted(os.environ))", DATA, isolation="none")
    assert r.isolation == "none" and "OPENAI_API_KEY" not in r.stdout and "PATH" in r.stdout
    r = run_code("import time\ntime.sleep(60)", DATA, SandboxLimits(wall_seconds=1.0), isolation="none")
    assert r.timed_out


# --- failing closed --------------------------------------------------------------------------------
def test_required_without_namespaces_refuses_and_names_the_key(fake_bwrap):
    ok, why = isolation_status()
    assert not ok and "No permissions to create new namespace" in why
    with pytest.raises(IsolationUnavailable, match=ISOLATION_KEY.replace(".", r"\.")):
        isolation_for("required")
    with pytest.raises(IsolationUnavailable):
        run_code("print(1)", DATA)                     # the default is bwrap: no silent fallback
    assert isolation_for("best_effort") == "none" and isolation_for("off") == "off"
    with pytest.raises(ValueError, match="isolation"):
        isolation_for("maybe")


def test_check_config_stops_on_required_without_namespaces(fake_bwrap, tmp_path):
    cfg = HERE.parent / "config" / "quick.yaml"
    cmd = [sys.executable, "-m", "heuresis.cli", "check-config", "--config", str(HERE.parent / "config" / "config.yaml"),
           "--config", str(cfg)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert proc.returncode == 1 and ISOLATION_KEY in proc.stderr and "No permissions" in proc.stderr
    (tmp_path / "be.yaml").write_text("episodes:\n  code_tool: {isolation: best_effort}\n")
    proc = subprocess.run([*cmd, "--config", str(tmp_path / "be.yaml")], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "code tool isolation: none" in proc.stdout, proc.stderr[-2000:]


# --- the games track: nothing its tools return reveals the hidden SCM or the Stage-2 draw ----------------
def _keys(obj) -> set:
    if isinstance(obj, dict):
        return set(obj) | {k for v in obj.values() for k in _keys(v)}
    if isinstance(obj, list):
        return {k for v in obj for k in _keys(v)}
    return set()


@pytest.mark.parametrize("name", ["antenna_trap", "deployment_zone_trap_categorical", "weather_noise"])
def test_game_tools_reveal_no_hidden_parameters_or_stage2_draw(name):
    from heuresis.causal.games import Game, load_scenario
    from heuresis.harness.game_tools import game_tools
    from heuresis.harness.tools import ToolError

    scn = load_scenario(name, SCENARIOS)
    game = Game(scn, seed=5)
    tools = game_tools(game)
    design = scn.spec["standard_design"]
    texts = [tools["get_status"].call(None, {}).text, tools["get_history"].call(None, {}).text,
             tools["deploy"].call(None, {"design": design, "count": 20}).text]
    for bad in ({"design": {"x" * 10**5: 1}, "count": 1}, {"design": design, "count": 10**9}):
        with pytest.raises(ToolError) as exc:
            tools["deploy"].call(None, bad)
        assert len(str(exc.value)) < 1000
        texts.append(str(exc.value))
    for t in texts[:3]:
        keys = _keys(json.loads(t))
        # the SCM's parameters (hit points, target weights, damage, detection, combat, seed) are never keys
        hidden = {k for k in scn.spec if k not in ("name", "components", "equipment", "def_budget", "selection_bias",
                                                   "variant", "source")}
        # source: a flight's origin (history or stage1) shares its name with the file's citation of its source
        assert not keys & (hidden | {"hp", "target_weight", "critical", "seed"}), (keys & hidden)
    assert str(scn.spec["seed"]) not in "".join(texts)
    assert game.stage2 is None and "stage2_survival" not in "".join(texts)   # nothing of Stage 2 is drawn yet
    s = tools["submit_final_design"].call(None, {"design": design, "report": "r"}).text
    assert set(json.loads(s)) <= {"submitted", "report", "fleet", "returned", "survival_rate", "threshold", "won"}


def test_required_without_namespaces_stops_the_workflow_at_start(fake_bwrap, tmp_path):
    """A run with episode jobs stops before any job runs, naming the key; a target without episodes builds."""
    from tinyflow import copy_workflow

    wd = copy_workflow(tmp_path / "wf")
    cmd = [sys.executable, "-m", "snakemake", "--cores", "1", "--configfile", "config/quick.yaml"]
    proc = subprocess.run(cmd, cwd=wd, capture_output=True, text=True, timeout=600)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and ISOLATION_KEY in text and "No permissions to create new namespace" in text
    assert not (wd / "results").exists()                                  # nothing ran
    one = subprocess.run([*cmd[:5], "results/truth/lg/dev/graphs.parquet", *cmd[5:]], cwd=wd, capture_output=True, text=True,
                         timeout=600)
    assert one.returncode == 0 and (wd / "results/truth/lg/dev/graphs.parquet").exists(), one.stderr[-2000:]


def test_table12_shows_the_code_tools_isolation():
    import pandas as pd

    from heuresis.stages.analysis.tables import table12

    scores = pd.DataFrame({"agent": ["ev"] * 3, "condition_id": ["c"] * 3, "model": [None] * 3,
                           "provider": [None] * 3, "finished": [True, True, False], "status": ["ok"] * 3,
                           "code_isolation": ["bwrap", "none", "bwrap"]})
    cell = dict(agent="ev", condition_id="c", toolbox="full", guided=True, prompt_level=1, target="none",
                budget="standard", last_turn="once", repeat=0, families=["lg"], split="test")
    numbers, display = table12(scores, [cell], {"ev": {"kind": "evidence"}}, {})
    assert numbers.loc[0, "code_isolation"] == "bwrap (2), none (1)"
    assert display.loc[0, "code tool isolation"] == "bwrap (2), none (1)"


def test_an_unquoted_off_in_the_config_turns_the_code_tool_off(quick_config):
    """``isolation: off`` in YAML is read as false (so is the schema's enum): it means off, not an error."""
    import copy

    from heuresis.harness.sandbox import check_isolation, isolation_for
    from heuresis.preflight import validate_config

    cfg = copy.deepcopy(quick_config)
    cfg["episodes"]["code_tool"]["isolation"] = False
    assert check_isolation(validate_config(cfg)) == "off" and isolation_for(False) == "off"


CHILDREN = r'''
import os, select, time
go_r, go_w = os.pipe()          # closed by the parent when every child held its 200 MB or died: all hold at once
rep_r, rep_w = os.pipe()        # each child's pid, once it holds
kids, refused = [], 0
for k in range(8):
    try:
        pid = os.fork()
    except OSError:
        refused += 1
        continue
    if pid == 0:
        os.close(go_w)
        os.close(rep_r)
        try:
            b = bytearray(200 << 20)
            for i in range(0, len(b), 4096):
                b[i] = 1
            print("held", flush=True)
            os.write(rep_w, b"%d\n" % os.getpid())
            os.read(go_r, 1)
            os._exit(0)
        except MemoryError:
            os._exit(3)
    kids.append(pid)
os.close(rep_w)
os.close(go_r)
reported, codes, buf = set(), {}, b""
deadline = time.monotonic() + 120
while len(reported | set(codes)) < len(kids) and time.monotonic() < deadline:
    if select.select([rep_r], [], [], 0.05)[0]:
        buf += os.read(rep_r, 4096)
        reported |= {int(x) for x in buf.split()}
    for p in kids:
        if p not in codes:
            done, status = os.waitpid(p, os.WNOHANG)
            if done:
                codes[p] = os.waitstatus_to_exitcode(status)
os.close(go_w)
for p in kids:
    if p not in codes:
        codes[p] = os.waitstatus_to_exitcode(os.waitpid(p, 0)[1])
print("codes", [codes[p] for p in kids], "nofork", refused, flush=True)
'''

MEMFD = r'''
import os
total, fds = 0, []
try:
    for k in range(30):
        fd = os.memfd_create(f"m{k}")
        for _ in range(60):
            os.write(fd, b"x" * (1 << 20))
            total += 1
            if total % 60 == 0:
                print("written", total, flush=True)
        fds.append(fd)
except OSError as exc:
    print("refused", exc.errno, flush=True)
'''

#: 1 GB in all, 16 processes, memfd files up to 64 MB each (RLIMIT_FSIZE is disk_mb)
BOUNDED = SandboxLimits(cpu_seconds=20, memory_mb=1024, wall_seconds=30, max_processes=16, disk_mb=64)


def _can_make_cgroup() -> bool:
    """Independently of the harness: whether this process may create a v1 memory cgroup under its own."""
    own = next((ln.split(":", 2)[2] for ln in Path("/proc/self/cgroup").read_text().splitlines()
                if ln.split(":")[1] == "memory"), None)
    base = Path("/sys/fs/cgroup/memory") / (own or "/").lstrip("/")
    return own is not None and os.access(base, os.W_OK) and (base / "memory.limit_in_bytes").exists()


@needs_bwrap
@pytest.mark.parametrize("cgroup", ["auto", "off"])
def test_total_memory_is_bounded_children_and_memfd(cgroup, monkeypatch):
    """8 children × 200 MB and 30 memfd files × 60 MB under a 1 GB bound: stopped (cgroup) or refused (seccomp)."""
    if cgroup == "off":
        monkeypatch.setenv("HEURESIS_CGROUP", "off")     # as where no cgroup can be created
    kids = run_code(CHILDREN, None, BOUNDED)
    memfd = run_code(MEMFD, None, BOUNDED)
    kind = kids.bound["memory_bound"]
    assert memfd.bound["memory_bound"] == kind
    held = kids.stdout.count("held")
    codes = json.loads(kids.stdout.split("codes", 1)[1].split("nofork")[0])
    # the children that held their 200 MB together (released at once) and exited: never more than the bound
    # at once (one that printed "held" may be killed after it, when another's allocation meets the bound)
    assert codes.count(0) * 200 <= 1024, kids.stdout
    written = max([int(ln.split()[1]) for ln in memfd.stdout.splitlines() if ln.startswith("written")], default=0)
    if cgroup == "off" or not _can_make_cgroup():
        assert kind == "seccomp" and kids.bound["max_processes"] * kids.bound["per_process_mb"] <= 1024
        assert "refused 1" in memfd.stdout and written == 0, memfd.stdout     # memfd_create: EPERM
        assert held < 8
    else:
        assert kind in ("cgroup-v1", "cgroup-v2"), kids.bound
        assert -9 in codes and kids.bound["oom_kills"] > 0 and kids.limit_hit == "memory", kids
        # the memfd writer was killed by the bound before it held 1 GB (no refusal: memfd is allowed, and charged)
        assert memfd.returncode in (-9, 137) and written < 1024 and "refused" not in memfd.stdout, memfd
        assert memfd.limit_hit == "memory" and memfd.bound["oom_kills"] > 0


def test_memory_bound_cgroup_fails_closed_naming_the_key(monkeypatch):
    """``memory_bound: cgroup`` where none can be created: the call and the workflow's check refuse, naming the key."""
    monkeypatch.setenv("HEURESIS_CGROUP", "off")
    with pytest.raises(IsolationUnavailable, match="episodes.code_tool.memory_bound"):
        run_code("print(1)", None, SandboxLimits(memory_bound="cgroup"))
    cfg = {"episodes": {"code_tool": {"memory_bound": "cgroup"}, "run": [], "grids": {}}, "agents": {}}
    if OK:
        with pytest.raises(IsolationUnavailable, match="episodes.code_tool.memory_bound"):
            sandbox.check_isolation(cfg)


def test_the_seccomp_program_is_well_formed():
    """The hand-assembled filter: 8-byte instructions, every jump inside the program, returns at the end."""
    import struct

    from heuresis.harness.bounds import seccomp_program

    for machine in ("x86_64", "aarch64"):
        prog = seccomp_program(machine)
        ins = [struct.unpack("=HBBI", prog[k:k + 8]) for k in range(0, len(prog), 8)]
        assert len(prog) % 8 == 0 and ins[-1][0] == 0x06 and ins[-2][0] == 0x06
        for k, (code, jt, jf, _) in enumerate(ins):
            if code & 0x07 == 0x05:
                assert k + 1 + max(jt, jf) < len(ins)


FILL_THEN_HOLD = CHILDREN.replace("import os, select, time\n", """import os, select, time
with open('/sandbox/fill', 'wb') as fh:          # the tmpfs filled first, to its size
    try:
        while True:
            fh.write(b'x' * (1 << 20))
            fh.flush()
    except OSError:
        pass
print('tmpfs', os.path.getsize('/sandbox/fill') >> 20, flush=True)
""")


@needs_bwrap
def test_under_seccomp_the_tmpfs_is_inside_the_memory_bound(monkeypatch):
    """The finding reproduced: under the seccomp fallback the processes' shares divided all of memory_mb while
    the tmpfs added disk_mb on top. Now a full tmpfs and the children that hold 200 MB together stay within
    memory_mb, the record says how (tmpfs + processes x share), and a bound the tmpfs leaves too little of is
    refused naming the key."""
    from heuresis.harness.bounds import BoundUnavailable, sandbox_bound

    monkeypatch.setenv("HEURESIS_CGROUP", "off")
    limits = SandboxLimits(cpu_seconds=20, memory_mb=1024, wall_seconds=60, max_processes=16, disk_mb=512)
    r = run_code(FILL_THEN_HOLD, None, limits)
    b = r.bound
    assert b["memory_bound"] == "seccomp" and b["tmpfs_mb"] == 512
    assert b["tmpfs_mb"] + b["max_processes"] * b["per_process_mb"] <= 1024, b
    filled = int(r.stdout.split("tmpfs", 1)[1].split()[0])
    codes = json.loads(r.stdout.split("codes", 1)[1].split("nofork")[0])
    assert filled >= 500, r.stdout                                     # the tmpfs was full ...
    assert filled + codes.count(0) * 200 <= 1024, r.stdout             # ... and what was held beside it fit
    with pytest.raises(BoundUnavailable, match=r"agents.x.memory_bound: .* memory_mb 2048 MB less the tmpfs"):
        sandbox_bound(2048, 8, key="agents.x.memory_bound", tmpfs_mb=2 * 1024)   # the finding's config
