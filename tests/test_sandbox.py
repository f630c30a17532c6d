"""The code tool's sandbox: data only, no network, limits, nothing left behind."""

import os
import socket
import time
from pathlib import Path

import numpy as np
import pytest

from heuresis.harness.sandbox import SandboxLimits, namespaces_available, run_code

DATA = np.arange(12.0).reshape(4, 3)
needs_ns = pytest.mark.skipif(not namespaces_available(), reason="no network/mount namespaces on this host")


def test_code_sees_the_data_copy():
    r = run_code("import numpy as np\nx = np.load('data.npy')\nprint(x.sum(), open('data.csv').readline().strip())", DATA)
    assert r.returncode == 0 and r.stdout.split() == [str(DATA.sum()), "X1,X2,X3"]


@needs_ns
def test_cannot_read_the_truth_file(tmp_path):
    truth = tmp_path / "truth" / "graphs.parquet"
    truth.parent.mkdir()
    truth.write_text("SECRET-DAG")
    assert truth.read_text() == "SECRET-DAG"          # readable from the harness itself
    r = run_code(f"print(open({str(truth)!r}).read())", DATA)
    assert r.returncode != 0 and "SECRET-DAG" not in r.stdout and "No such file" in r.stderr
    r = run_code("import os\nprint(sorted(os.listdir('/')))", DATA)
    assert "work" not in r.stdout and r.isolation["filesystem"]


@needs_ns
def test_cannot_reach_a_listening_socket_on_loopback():
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(1)
    port = srv.getsockname()[1]
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2):
            pass                                         # reachable from outside the sandbox
        code = f"import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=3)\nprint('CONNECTED')"
        r = run_code(code, DATA)
        assert "CONNECTED" not in r.stdout and r.returncode != 0 and r.isolation["network"]
    finally:
        srv.close()


def test_cpu_limit_stops_a_busy_loop():
    r = run_code("while True:\n    pass", DATA, SandboxLimits(cpu_seconds=1, wall_seconds=30))
    assert r.limit_hit == "cpu_time" and r.wall_s < 15


def test_memory_limit_stops_a_large_allocation():
    r = run_code("import numpy as np\na = np.ones(10**9)\nprint('ALLOCATED', a.sum())", DATA,
                 SandboxLimits(memory_mb=400))
    assert "ALLOCATED" not in r.stdout and r.limit_hit == "memory"


def test_wall_limit_kills_a_sleeper_and_output_is_truncated():
    r = run_code("import time\ntime.sleep(60)", DATA, SandboxLimits(wall_seconds=1.5))
    assert r.timed_out and r.limit_hit == "wall_time" and r.wall_s < 10
    r = run_code("print('x' * 100000)", DATA, SandboxLimits(max_output_chars=500))
    assert r.truncated and len(r.stdout) == 500


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


def test_no_process_left_behind():
    marker = "313.25"
    code = ("import subprocess, time\n"
            f"subprocess.Popen(['sleep', '{marker}'], start_new_session=True)\n"
            f"subprocess.Popen(['sleep', '{marker}'])\n"
            "time.sleep(0.5)\nprint('spawned')")
    r = run_code(code, DATA, SandboxLimits(wall_seconds=10))
    assert "spawned" in r.stdout
    deadline = time.monotonic() + 5
    while _alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _alive(marker) == []


def test_environment_is_cleaned(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-leak")
    r = run_code("import os\nprint(sorted(os.environ))", DATA)
    assert "OPENAI_API_KEY" not in r.stdout and "PATH" in r.stdout
