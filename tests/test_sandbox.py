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


@pytest.mark.parametrize("name", ["antenna_base", "zone_base", "weather_base"])
def test_game_tools_reveal_no_hidden_parameters_or_stage2_draw(name):
    from heuresis.games import Game, load_scenario
    from heuresis.games.tools import game_tools
    from heuresis.harness.tools import ToolError

    scn = load_scenario(name)
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
        hidden = {k for k in scn.spec if k not in ("name", "budgets", "components", "equipment", "def_budget",
                                                   "selection_bias", "description", "family", "variant", "bias",
                                                   "history", "threshold")}
        # history: the free flights, shown by design; threshold: the victory condition, told in the task
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

    from heuresis.config import validate_config
    from heuresis.harness.sandbox import check_isolation, isolation_for

    cfg = copy.deepcopy(quick_config)
    cfg["episodes"]["code_tool"]["isolation"] = False
    assert check_isolation(validate_config(cfg)) == "off" and isolation_for(False) == "off"
