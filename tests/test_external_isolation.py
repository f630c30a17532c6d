"""An external agent's command is an adversary: what it can reach, and what a client can cost the harness.

A hostile command run through the workflow's episode job (bubblewrap, ``isolation: required``;
as uid 65534 when the tests run as root) reads its descriptors, walks ``/proc``, reads
``/proc/net/tcp``, scans every loopback port, tries an abstract Unix socket of the host and the
job's log file, fills its tmpfs, forks and allocates past its limits, and floods its stdout: it
finds none of what it looks for and the episode is still recorded.  With ``network: {allow: [...]}``
the harness's proxy reaches the listed pairs and nothing else: no other port, no loopback, private,
link-local or unspecified address in any spelling, unless listed in ``private_addresses``.  A stranger on loopback
cannot submit to a hand-served episode, and a connection and payload flood leaves the server
within its stated limits (descriptors and memory of the harness measured).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path

import anyio
import pytest
from conftest import small_lg_split
from test_mcp import BUDGET, _connect, _http_post, _run, _serve_in_thread, _served_url

from heuresis.agents import external
from heuresis.artifacts.logs import stage_logger
from heuresis.harness.sandbox import isolation_status

OK, WHY = isolation_status()
needs_bwrap = pytest.mark.skipif(not OK, reason=f"bubblewrap isolation unavailable on this host: {WHY}")
MARKER = "heuresis-secret-7f3a"


@pytest.fixture(scope="module")
def split(quick_config, tmp_path_factory):
    return small_lg_split(quick_config, tmp_path_factory.mktemp("ext"), 1)

HOSTILE = r'''
import asyncio, json, os, socket, sys, time
from mcp import Client

secret_port, abstract, log_path, marker = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4][::-1].encode()
found = {"uid": os.getuid()}
fds = {}
for fd in os.listdir("/proc/self/fd"):
    try:
        target = os.readlink(f"/proc/self/fd/{fd}")
    except OSError as exc:
        target = type(exc).__name__
    data = b""
    try:
        f = os.open(f"/proc/self/fd/{fd}", os.O_RDONLY | os.O_NONBLOCK)
        try:
            data = os.read(f, 1 << 20)
        except OSError:
            pass
        os.close(f)
    except OSError:
        pass
    fds[fd] = [target, marker in data or b"F1=" in data]
found["fds"] = fds
procs = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        seen = b""
        for part in ("environ", "cmdline"):
            try:
                seen += open(f"/proc/{pid}/{part}", "rb").read()
            except OSError:
                pass
        # the text, whether it holds the marker, whether it is the harness's (pytest sets this in its environment)
        procs[pid] = [seen.replace(b"\0", b" ")[-80:].decode(errors="replace"), marker in seen,
                      b"PYTEST_CURRENT_TEST=" in seen]
found["procs"] = procs
listening = []
for name in ("/proc/net/tcp", "/proc/net/tcp6"):
    try:
        for line in open(name).read().splitlines()[1:]:
            cols = line.split()
            if cols[3] == "0A":
                listening.append(int(cols[1].split(":")[1], 16))
    except OSError:
        pass
found["listening"] = sorted(listening)
open_ports = []
for port in range(1, 65536):
    s = socket.socket()
    s.settimeout(0.5)
    if s.connect_ex(("127.0.0.1", port)) == 0 and s.getsockname() != s.getpeername():   # not TCP's self-connect
        open_ports.append(port)
    s.close()
found["open_ports"] = open_ports
s = socket.socket(socket.AF_UNIX)
try:
    s.connect("\0" + abstract)
    found["abstract"] = True
except OSError:
    found["abstract"] = False
try:
    open(log_path).read()
    found["log"] = True
except OSError:
    found["log"] = False
written = {}
for where in (".", "/tmp", "/"):
    n = 0
    try:
        with open(os.path.join(where, "fill"), "wb") as f:
            for _ in range(64):
                f.write(b"x" * (1 << 20))
                f.flush()
                n += 1
    except OSError:
        pass
    written[where] = n
found["written_mb"] = written
children = []
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        time.sleep(60)
        os._exit(0)
    children.append(pid)
found["forked"] = len(children)
for pid in children:
    os.kill(pid, 9)
    os.waitpid(pid, 0)
try:
    block = bytearray(3 << 30)
    found["allocated_3gb"] = True
except MemoryError:
    found["allocated_3gb"] = False
for k in range(400):
    sys.stdout.write("HOSTILE-OUT " * 1000 + "\n")
sys.stdout.flush()
sys.stderr.write("HOSTILE-ERR done\n")
sys.stderr.flush()

async def main():
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        await client.call_tool("view_graph", {"found": found})
        await client.call_tool("submit", {})

asyncio.run(main())
'''


@pytest.fixture
def host_services():
    """A TCP listener on the host's loopback and an abstract Unix socket: what the command must not reach."""
    tcp = socket.create_server(("127.0.0.1", 0))
    abstract = f"heuresis-test-{os.getpid()}"
    unix = socket.socket(socket.AF_UNIX)
    unix.bind("\0" + abstract)
    unix.listen()
    yield tcp.getsockname()[1], abstract
    tcp.close()
    unix.close()


@needs_bwrap
def test_hostile_command_finds_nothing_and_the_episode_is_recorded(split, tmp_path, monkeypatch, capfd,
                                                                    host_services):
    port, abstract = host_services
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "hostile.py").write_text(HOSTILE)
    monkeypatch.setenv("HEURESIS_TEST_SECRET", MARKER)                 # in the harness's environment
    log_path = tmp_path / "logs" / "episodes.log"                    # the job's log file
    log_path.parent.mkdir()
    log_path.write_text(f"{MARKER} ges lg/test/0000 F1=1.000\n")
    os.write(2, f"{MARKER} earlier job: pc lg/test/0000 F1=1.000\n".encode())   # the harness's stderr (a file)
    spec = {"kind": "external", "command": ["python", str(agent / "hostile.py"), str(port), abstract, str(log_path),
                                            MARKER[::-1]],   # reversed: its own argv holds no marker
            "expose": [str(agent)], "idle_timeout_s": 120, "memory_mb": 1024, "max_processes": 24, "disk_mb": 16}
    got = _run(split, "hostile", spec, tmp_path / "out", log=stage_logger(log_path))
    row = got["row"]
    assert (row["status"], row["termination"]) == ("ok", "submitted"), row["error"]
    found = json.loads(got["calls"][0]["arguments"])["found"]
    assert found["uid"] != 0
    # its own descriptors only: /dev/null and its two pipes, none with a score
    targets = {t for t, _ in found["fds"].values()}
    assert not any(leak for _, leak in found["fds"].values()), found["fds"]
    assert {re.sub(r"\d+", "N", t) for t in targets} <= {"/dev/null", "pipe:[N]", "FileNotFoundError"}, targets   # listing's fd
    # its own PID namespace: bwrap's init, the forwarder, itself; nothing of the harness
    assert not any(leak for _, leak, _ in found["procs"].values()) and len(found["procs"]) <= 4, found["procs"]
    assert not any(harness for _, _, harness in found["procs"].values()), found["procs"]
    # its own network: the forwarder to its episode's server is all there is
    assert found["listening"] == [external.INNER_PORT] and found["open_ports"] == [external.INNER_PORT]
    assert found["abstract"] is False and found["log"] is False
    # limits: 16 MB tmpfs for the work folder and /tmp, a read-only root, 24 processes, 1 GiB of address space
    assert found["written_mb"]["."] <= 16 and found["written_mb"]["/tmp"] <= 16 and found["written_mb"]["/"] == 0
    assert 0 < found["forked"] < 24 and found["allocated_3gb"] is False
    # its output went to its own pipes, kept (capped) in the transcript, never to the harness's stderr
    err = capfd.readouterr().err
    assert "HOSTILE" not in err
    record = json.loads(Path(row["transcript"]).read_text())["agent_record"]
    assert record["stdout_bytes"] >= 400 * 12000 and len(record["stdout"]) <= external.OUTPUT_KEEP
    assert "HOSTILE-ERR done" in record["stderr"] and record["command_exit_status"] == 0
    assert "network private" in got["requests"][0]["notes"] and "isolation bwrap" in got["requests"][0]["notes"]
    # the episode's score went to the job's log file, not to stderr
    assert "submitted F1=" in log_path.read_text().splitlines()[-1] and "submitted F1=" not in err


PROBE = r'''
import asyncio, os, socket, sys
from mcp import Client

def reach(port):
    s = socket.socket()
    s.settimeout(2)
    ok = s.connect_ex(("127.0.0.1", port)) == 0
    s.close()
    return ok

async def main():
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        await client.call_tool("view_graph", {"reached": reach(int(sys.argv[1]))})
        await client.call_tool("submit", {})

asyncio.run(main())
'''


@needs_bwrap
@pytest.mark.parametrize("network", [False, True])
def test_the_network_key_opts_into_the_hosts_network(network, split, tmp_path, host_services):
    """Only with ``network: true`` does the command reach the host's loopback (its model's API, and more)."""
    port, _ = host_services
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "probe.py").write_text(PROBE)
    spec = {"kind": "external", "command": ["python", str(tmp_path / "agent" / "probe.py"), str(port)],
            "expose": [str(tmp_path / "agent")], "network": network, "idle_timeout_s": 60}
    got = _run(split, "probe", spec, tmp_path / "out")
    assert got["row"]["termination"] == "submitted"
    assert json.loads(got["calls"][0]["arguments"])["reached"] is network
    assert ("network the host's" if network else "network private") in got["requests"][0]["notes"]


@pytest.mark.parametrize("inside", ["", "results", "results/truth"])
def test_expose_refuses_the_working_folder_and_results(inside, tmp_path, monkeypatch):
    """``expose`` naming the working folder or anything in it (its results/, the truth) is refused, naming it."""
    from heuresis.stages.episodes import config_errors

    (tmp_path / "results" / "truth").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    path = str(tmp_path / inside) if inside else str(tmp_path)
    cfg = {"agents": {"ext": {"kind": "external", "command": ["python", "x.py"], "expose": [path]}},
           "references": {"algorithms": {"pc_kci": {}}}, "episodes": {"grids": {}, "run": []}}
    errors = config_errors(cfg)
    assert len(errors) == 1 and "agents.ext" in errors[0] and repr(path) in errors[0], errors


def test_a_results_folder_elsewhere_is_refused_too(tmp_path, monkeypatch):
    """``results`` a link to other storage: its target is refused as well."""
    store = tmp_path / "scratch"
    (store / "truth").mkdir(parents=True)
    wd = tmp_path / "wd"
    wd.mkdir()
    (wd / "results").symlink_to(store)
    monkeypatch.chdir(wd)
    assert "results/" in external.expose_problem(str(store / "truth"))
    assert external.expose_problem(str(tmp_path / "elsewhere")) == ""


def test_a_stranger_cannot_submit_to_a_hand_served_episode(split, tmp_path, capfd):
    """Served by hand over HTTP: the fixed path and a guessed one are 404; the client told the URL plays."""
    t, box = _serve_in_thread(split, {"kind": "external", "port": 0, "idle_timeout_s": 60, "exit_grace_s": 1},
                              tmp_path)
    url = _served_url(capfd)
    submit = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                         "params": {"name": "submit", "arguments": {"edges": []}}}).encode()

    async def play():
        free = int(re.match(r"http://127\.0\.0\.1:(\d+)/", url).group(1))
        strangers = [await _http_post(free, p, submit) for p in ("/mcp", "/", "/AAAAAAAAAAAAAAAAAAAAAA/mcp")]
        client = await _connect(url)
        try:
            first = await client.call_tool("set_edges", {"changes": [{"x": "X1", "y": "X2", "relation": "->"}]})
            await client.call_tool("submit", {})
            return strangers, first
        finally:
            await client.__aexit__(None, None, None)

    strangers, first = anyio.run(play)
    t.join(60)
    assert all(s.startswith(b"HTTP/1.1 404") for s in strangers), strangers
    row = box["tables"]["row"]
    assert not first.is_error and row["termination"] == "submitted" and row["n_calls"] == 2
    assert "X1 -> X2" in row["edges"]      # the client's graph, not the stranger's empty one


def _closed(s: socket.socket) -> bool:
    """Whether the server closed (or reset) a connection (waiting up to 30 s for it to)."""
    s.settimeout(30)
    try:
        return s.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_a_flood_leaves_the_server_within_its_limits(split, tmp_path, capfd, monkeypatch):
    """300 idle connections, slow headers, 40 bodies of 3.5 MB, a 900 KB argument, calls at once: all bounded."""
    monkeypatch.setattr(external.transport, "REQUEST_TIMEOUT_S", 2.0)   # read when a request starts
    t, box = _serve_in_thread(split, {"kind": "external", "port": 0, "idle_timeout_s": 60, "exit_grace_s": 1},
                              tmp_path, budget=BUDGET)
    url = _served_url(capfd)
    port = int(re.match(r"http://127\.0\.0\.1:(\d+)/", url).group(1))    # the port the server took
    path = url.split(str(port), 1)[1]
    time.sleep(0.5)
    fds0, rss0 = _fds(), _rss_mb()
    idle = []
    for _ in range(300):
        s = socket.socket()
        s.connect(("127.0.0.1", port))
        s.send(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n")   # headers never finished
        idle.append(s)
    time.sleep(1.0)
    fds_flood = _fds() - 300          # the test's own 300 client sockets are in this process too
    time.sleep(2.5)                   # past the request timeout: the server closed every slow one
    closed = sum(_closed(s) for s in idle)
    for s in idle:
        s.close()
    big = b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "view_graph", "arguments": ' \
          b'{"x": "' + b"a" * (3_500_000) + b'"}}}'
    answers: list = []

    def flood():
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
                s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
                          b"\r\nContent-Length: " + str(len(big)).encode() + b"\r\n\r\n" + big)
                answers.append(s.recv(100))
        except OSError as exc:   # the server answered 413 and closed without reading it all
            answers.append(repr(exc).encode())

    threads = [threading.Thread(target=flood) for _ in range(40)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(60)
    rss_flood = _rss_mb()

    async def play():
        client = await _connect(url)
        try:
            cut = await client.call_tool("view_graph", {"x": "b" * 900_000})
            at_once: list = []

            async def one():
                at_once.append(await client.call_tool("data_summary", {}))

            async with anyio.create_task_group() as tg:
                for _ in range(5):
                    tg.start_soon(one)
            await client.call_tool("submit", {})
            return cut, at_once
        finally:
            await client.__aexit__(None, None, None)

    cut, at_once = anyio.run(play)
    t.join(60)
    assert fds_flood - fds0 <= external.MAX_CONNECTIONS + 4, (fds0, fds_flood)
    assert closed == 300
    assert sum(a.startswith(b"HTTP/1.1 413") for a in answers) >= 1 and not any(b"200 OK" in a for a in answers)
    assert rss_flood - rss0 < 100, (rss0, rss_flood)   # not 40 x 3.5 MB (140 MB) held; allocator noise reached 64
    assert cut.is_error
    texts = [r.content[0].text for r in at_once]
    # still serving, one call at a time: each call answered or refused as made while another was pending (how
    # many overlap depends on timing; tests/test_mcp.py checks the refusal itself), nothing else
    assert all(not r.is_error or x.startswith("another call is pending") for r, x in zip(at_once, texts)), texts
    assert len(at_once) == 5 and sum(not r.is_error for r in at_once) >= 1
    calls = box["tables"]["calls"]
    assert len(calls[0]["arguments"]) < external.MAX_ARGUMENT_CHARS + 100
    assert calls[0]["arguments"].endswith(f"[cut: {len(json.dumps({'x': 'b' * 900_000}))} characters]")
    # the calls refused as pending were no turns: view_graph, the data_summary made, submit
    assert [c["tool"] for c in calls] == ["view_graph", *["data_summary"] * sum(not r.is_error for r in at_once),
                                          "submit"]


def test_reported_tokens_count_and_a_missing_report_is_unknown(split, tmp_path, capfd):
    """Tokens a client reports in ``_meta`` are recorded and checked against the per-turn output limit; a
    missing report, or an implausible one (0, more than any context window, not a number), is unknown."""
    t, box = _serve_in_thread(split, {"kind": "external", "port": 0, "idle_timeout_s": 60, "exit_grace_s": 1},
                              tmp_path, budget=BUDGET)
    url = _served_url(capfd)
    over = BUDGET["output_tokens_per_turn"] + 1

    async def play():
        client = await _connect(url)
        try:
            meta = {external.USAGE_META: {"tokens_in": 1200, "tokens_out": 80}}
            a = await client.call_tool("view_graph", {}, meta=meta)
            b = await client.call_tool("view_graph", {})
            for implausible in ({"tokens_in": 0, "tokens_out": 5}, {"tokens_in": 10**9, "tokens_out": 5},
                                {"tokens_in": True, "tokens_out": 5}):
                await client.call_tool("view_graph", {}, meta={external.USAGE_META: implausible})
            c = await client.call_tool("data_summary", {}, meta={external.USAGE_META: {"tokens_out": over}})
            await client.call_tool("submit", {}, meta=meta)
            return a, b, c
        finally:
            await client.__aexit__(None, None, None)

    a, b, c = anyio.run(play)
    t.join(60)
    reqs = box["tables"]["requests"]
    assert [(q["tokens_in"], q["tokens_out"]) for q in reqs] == [(1200, 80), (None, None), *[(None, None)] * 3,
                                                                 (None, over), (1200, 80)]
    assert all("implausible usage report" in reqs[k]["notes"] for k in (2, 3, 4))
    assert not a.is_error and not b.is_error and c.is_error and "output-token limit" in c.content[0].text
    row = box["tables"]["row"]
    assert row["tokens_in"] is None and row["tokens_out"] is None      # unknown once one call did not say


SCANNER = r'''
import json, os, re, select, sys
# what to look for, reversed on the command line (this scanner's own argv holds none of it)
needles = [a[::-1].encode() for a in sys.argv[1:]]
found = {"uid": os.getuid(), "scans": 0, "hits": [], "tokens": [], "agent_seen": False, "environs_read": 0,
         "controls": []}
while not select.select([sys.stdin], [], [], 0.05)[0]:
    found["scans"] += 1
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        for part in ("cmdline", "environ"):
            try:
                with open(f"/proc/{pid}/{part}", "rb") as f:
                    text = f.read()
            except OSError:
                continue
            if part == "environ" and text:
                found["environs_read"] += 1
            if part == "cmdline" and b"waiting" + b".py" in text:
                found["agent_seen"] = True
            for k, n in enumerate(needles):
                if n in text and [pid, part, k] not in found["hits"]:
                    found["hits"].append([pid, part, k])
            for tok in re.findall(rb"/([A-Za-z0-9_-]{20,})/mcp", text):
                if tok.decode() not in found["tokens"]:
                    found["tokens"].append(tok.decode())
print(json.dumps(found))
'''

WAITING = r'''
import asyncio, os, sys, time
from mcp import Client

async def main():
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        await client.call_tool("view_graph", {"has_key": os.environ.get("HEURESIS_TEST_KEY") == sys.argv[1][::-1],
                                              "url": os.environ["HEURESIS_MCP_URL"]})
        time.sleep(3)        # the scanner's time
        await client.call_tool("submit", {})

asyncio.run(main())
'''


@needs_bwrap
@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser") or not os.path.exists("/usr/bin/python3"),
                    reason="needs root (runuser to an unrelated uid) and /usr/bin/python3")
@pytest.mark.parametrize("network", [False, True])
def test_another_uid_reads_no_key_and_no_token_in_proc(network, split, tmp_path, monkeypatch):
    """During an episode, ``nobody`` scans every /proc/*/cmdline and environ: no key, no URL, no token."""
    key, control = "sk-heuresis-test-9c1e44d0", "heuresis-control-51b2"
    monkeypatch.setenv("HEURESIS_TEST_KEY", key)
    agent = tmp_path / "agent"
    agent.mkdir()
    (agent / "waiting.py").write_text(WAITING)
    needles = [key, "HEURESIS_MCP_URL", control]
    scan = subprocess.Popen([shutil.which("runuser") or "runuser", "-u", "nobody", "--", "/usr/bin/python3", "-I", "-c", SCANNER,
                             *[n[::-1] for n in needles]], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            env={"PATH": "/usr/bin:/bin"}, cwd="/")
    # the controls: what the scanner must find where it is readable -- a root process's argv, nobody's own environ
    # they live until the scan has ended (killed then), so that every scan can see them
    ctl = [subprocess.Popen(["/usr/bin/python3", "-c", "import time; time.sleep(600)", control], start_new_session=True),
           subprocess.Popen([shutil.which("runuser") or "runuser", "-u", "nobody", "--", "/usr/bin/python3", "-c",
                             "import time; time.sleep(600)"],
                            env={"PATH": "/usr/bin:/bin", "CONTROL": control}, cwd="/", start_new_session=True)]
    try:
        spec = {"kind": "external", "command": ["python", str(agent / "waiting.py"), key[::-1]],
                "expose": [str(agent)], "env": ["HEURESIS_TEST_KEY"], "network": network, "idle_timeout_s": 60}
        got = _run(split, "waiting", spec, tmp_path / "out")
    finally:
        out, _ = scan.communicate(b"stop\n", timeout=60)
        for c in ctl:
            os.killpg(c.pid, signal.SIGKILL)      # runuser and the control under it
            c.wait()
    found = json.loads(out)
    assert got["row"]["termination"] == "submitted", got["row"]["error"]
    assert json.loads(got["calls"][0]["arguments"])["has_key"] is True      # the command got its key
    token = re.search(r"http://[^/]+/([^/]+)/mcp", json.loads(got["calls"][0]["arguments"])["url"]).group(1)
    # the token is in no record either (the requests table is public): its path is redacted there
    assert token not in got["requests"][0]["notes"] and "MCP at http://" in got["requests"][0]["notes"]
    assert found["uid"] == 65534 and found["scans"] > 3 and found["agent_seen"], found
    # the controls were found: the scanner reads argv everywhere and an environ it may read
    assert {(part, k) for _, part, k in found["hits"] if k == 2} == {("cmdline", 2), ("environ", 2)}, found
    assert not [h for h in found["hits"] if h[2] != 2], found["hits"]   # no key, no URL on any command line or environ
    assert token not in found["tokens"], found["tokens"]


MEMFD_AGENT = r'''
import asyncio, os, sys
from mcp import Client

r, w = os.pipe()
pid = os.fork()
if pid == 0:                       # the flood: 5 memfd files x 60 MB, each under disk_mb, under a 256 MB bound
    os.close(r)
    open("/proc/self/oom_score_adj", "w").write("1000")   # the OOM killer's first choice: this child
    try:
        for k in range(5):
            fd = os.memfd_create(f"m{k}")
            for _ in range(60):
                os.write(fd, b"x" * (1 << 20))
                os.write(w, b"+")
    except OSError as exc:
        os.write(w, f"refused {exc.errno}".encode())
    os._exit(0)
os.close(w)
got = b""
while True:
    chunk = os.read(r, 4096)
    if not chunk:
        break
    got += chunk
_, status = os.waitpid(pid, 0)

async def main():
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        await client.call_tool("view_graph", {"written_mb": got.count(b"+"), "refused": b"refused" in got,
                                              "status": os.waitstatus_to_exitcode(status)})
        await client.call_tool("submit", {})

asyncio.run(main())
'''


@needs_bwrap
@pytest.mark.parametrize("cgroup", ["auto", "off"])
def test_an_external_commands_memfd_is_bounded_in_total(cgroup, split, tmp_path, monkeypatch):
    """5 memfd files × 60 MB (300 MB) under ``memory_mb: 256``: killed by its cgroup; refused by seccomp; recorded.

    Without a cgroup ``memory_mb`` is shared by the processes (8 × 256 MB for 2 GB: the forwarder, the command
    and their threads need that many), and memfd is refused.
    """
    mem, nproc = 256, 16
    if cgroup == "off":
        monkeypatch.setenv("HEURESIS_CGROUP", "off")
        mem, nproc = 2048, 8
    (tmp_path / "agent").mkdir()
    (tmp_path / "agent" / "flood.py").write_text(MEMFD_AGENT)
    spec = {"kind": "external", "command": ["python", str(tmp_path / "agent" / "flood.py")],
            "expose": [str(tmp_path / "agent")], "memory_mb": mem, "max_processes": nproc, "disk_mb": 128,
            "idle_timeout_s": 60}
    got = _run(split, "flood", spec, tmp_path / "out")
    assert got["row"]["termination"] == "submitted", got["row"]["error"]
    seen = json.loads(got["calls"][0]["arguments"])
    record = json.loads(Path(got["row"]["transcript"]).read_text())["agent_record"]
    bound = record["bound"]
    notes = got["requests"][0]["notes"]
    assert f"memory bound {bound['memory_bound']}" in notes and "CPU 3600 s per process" in notes
    if bound["memory_bound"] == "seccomp":
        assert seen["refused"] and seen["written_mb"] == 0, seen
        assert bound["max_processes"] * bound["per_process_mb"] <= mem and bound["per_process_mb"] == 256
    else:
        assert cgroup == "auto" and bound["memory_bound"] in ("cgroup-v1", "cgroup-v2") and bound["cpus"] == 1.0
        assert seen["status"] == -9 and seen["written_mb"] < 256 and not seen["refused"], seen
        assert bound["oom_kills"] >= 1
    if cgroup == "auto" and os.geteuid() == 0 and os.access("/sys/fs/cgroup/memory", os.W_OK):
        assert bound["memory_bound"].startswith("cgroup"), bound     # root on a writable v1 hierarchy: a cgroup


class _Target:
    """A TCP server on the host's loopback that answers each request with its own name; counts its connections."""

    def __init__(self, name: str) -> None:
        self.name, self.connections = name, 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(10)
            try:
                head = b""
                while b"\r\n\r\n" not in head:
                    chunk = conn.recv(4096)
                    if not chunk:
                        return
                    head += chunk
                body = f"{self.name} got {head.split(b' ')[0].decode()} {head.split(b' ')[1].decode()}".encode()
                conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
            except OSError:
                pass

    def close(self) -> None:
        self.sock.close()


def _ask(path: str, raw: bytes, then: bytes = b"") -> bytes:
    """Send ``raw`` to the proxy on ``path``; after a 200 to a CONNECT, ``then`` through the tunnel; all it answered."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(15)
    s.connect(path)
    got = b""
    try:
        s.sendall(raw)
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            got += chunk
            if then and got.startswith(b"HTTP/1.1 200") and got.endswith(b"\r\n\r\n"):
                s.sendall(then)
                then = b""
    except OSError:
        pass
    s.close()
    return got


def test_the_proxy_reaches_only_allowed_pairs_on_public_or_listed_addresses(tmp_path):
    """The proxy, on a Unix socket, relays HTTP and CONNECT to an allowed pair on a listed private address;
    every other target is refused (400 or 403) and no connection reaches the servers behind them."""
    from heuresis.agents.external.proxy import AllowProxy, _public

    a, b = _Target("A"), _Target("B")
    pa, pb = a.port, b.port
    listed = [f"127.0.0.1:{pa}", f"[::1]:{pa}", f"0.0.0.0:{pa}", "169.254.169.254:80", f"[::ffff:127.0.0.1]:{pa}",
              f"[2002:7f00:1::1]:{pa}", f"[64:ff9b::7f00:1]:{pa}", f"10.0.0.1:{pa}", f"[fe80::1]:{pa}"]
    named = [f"127.0.0.1:{pa}", f"localhost:{pa}", f"2130706433:{pa}", f"127.1:{pa}", f"0:{pa}"]   # all loopback
    path, other = str(tmp_path / "proxy.sock"), str(tmp_path / "strict.sock")
    proxy = AllowProxy(path, listed, private_addresses=["127.0.0.1"])
    strict = AllowProxy(other, named)   # no private address listed
    proxy.start()
    strict.start()
    try:
        # allowed: absolute-form HTTP and a CONNECT tunnel reach A, on 127.0.0.1 (listed)
        got = _ask(path, f"GET http://127.0.0.1:{pa}/x?q=1 HTTP/1.1\r\nHost: 127.0.0.1:{pa}\r\n\r\n".encode())
        assert got.startswith(b"HTTP/1.0 200") and got.endswith(b"A got GET /x?q=1"), got
        got = _ask(path, f"CONNECT 127.0.0.1:{pa} HTTP/1.1\r\nHost: 127.0.0.1:{pa}\r\n\r\n".encode(),
                   then=b"GET /tunnel HTTP/1.0\r\n\r\n")
        assert got.startswith(b"HTTP/1.1 200 Connection established") and got.endswith(b"A got GET /tunnel"), got
        assert (a.connections, b.connections) == (2, 0)
        # refused: a pair not in the list (B's port; A's on another name); addresses that are not public,
        # whatever their spelling, unless listed; names that resolve to loopback
        refused = [f"127.0.0.1:{pb}", f"127.0.0.2:{pa}", f"LOCALHOST:{pb}", *listed[1:]]
        for target in refused:
            host, _, port = target.rpartition(":")
            for raw in (f"CONNECT {target} HTTP/1.1\r\n\r\n", f"GET http://{host}:{port}/ HTTP/1.1\r\n\r\n"):
                got = _ask(path, raw.encode(), then=b"GET /leak HTTP/1.0\r\n\r\n")
                assert got.startswith(b"HTTP/1.1 403 Forbidden") and b"got" not in got, (raw, got)
        for target in named:   # allowed pairs whose host is (or resolves to) loopback, not listed as private
            host, _, port = target.rpartition(":")
            for raw in (f"CONNECT {target} HTTP/1.1\r\n\r\n", f"GET http://{host}:{port}/ HTTP/1.1\r\n\r\n"):
                got = _ask(other, raw.encode(), then=b"GET /leak HTTP/1.0\r\n\r\n")
                assert got.startswith(b"HTTP/1.1 403") and b"not a public address" in got, (raw, got)
        # malformed or not a proxy request: 400, or the connection closed unanswered
        malformed = [f"{line}\r\n\r\n".encode() for line in (
            "GET", "CONNECT 127.0.0.1 HTTP/1.1", f"CONNECT 127.0.0.1:{pa}0000 HTTP/1.1", f"CONNECT a@127.0.0.1:{pa} HTTP/1.1",
            f"GET /x HTTP/1.1\r\nHost: 127.0.0.1:{pa}", f"GET https://127.0.0.1:{pa}/ HTTP/1.1",
            f"GET http://127.0.0.1:{pa}0000/ HTTP/1.1", "GET http://[::1/ HTTP/1.1", "GET http://127.0.0.1:0/ HTTP/1.1",
            f"GET http://127.0.0.1:{pa} x HTTP/1.1")]
        for raw in [*malformed, b"x" * 40000]:
            got = _ask(path, raw)
            assert got == b"" or got.startswith(b"HTTP/1.1 400"), (raw, got)
        assert (a.connections, b.connections) == (2, 0)
        rec = proxy.record()
        assert rec["allowed"] == 2 and rec["refused"] >= 2 * len(refused)
        assert {x["verdict"] for x in rec["attempts"]} - {"allowed"} and all(
            x["verdict"] == "allowed" or x["verdict"].startswith("refused") for x in rec["attempts"])
    finally:
        proxy.stop()
        strict.stop()
        a.close()
        b.close()
    import ipaddress

    assert _public(ipaddress.ip_address("8.8.8.8")) and _public(ipaddress.ip_address("2606:4700::1111"))
    assert not _public(ipaddress.ip_address("2002:7f00:1::1")) and _public(ipaddress.ip_address("2002:808:808::1"))


def test_the_proxy_ends_what_it_started(tmp_path, monkeypatch):
    """The findings reproduced: a tunnel to an allowed upstream that stays silent outlived stop() (its threads
    and both sockets), and a request head sent a byte at a time held a connection past the head timeout. Now
    stop() ends every tunnel and its threads, the upstream sees its end, a slow head is cut at the head's
    deadline, an idle tunnel at the idle limit, each counted in the proxy's record."""
    from heuresis.agents.external import proxy as P

    monkeypatch.setattr(P, "_HEAD_TIMEOUT_S", 2.0)
    silent = socket.create_server(("127.0.0.1", 0))            # accepts, never says a word
    port = silent.getsockname()[1]
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: [accepted.append(silent.accept()[0]) for _ in range(8)], daemon=True).start()
    path = str(tmp_path / "proxy.sock")
    proxy = P.AllowProxy(path, [f"127.0.0.1:{port}"], private_addresses=["127.0.0.1"])
    proxy.start()
    clients = []

    def tunnel() -> socket.socket:
        c = socket.socket(socket.AF_UNIX)
        c.settimeout(30)
        c.connect(path)
        c.sendall(f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n".encode())
        assert c.recv(100).startswith(b"HTTP/1.1 200")
        clients.append(c)
        return c

    def handlers() -> int:
        return sum(t.name == "heuresis-proxy-conn" and t.is_alive() for t in threading.enumerate())

    def wait_until(cond, what: str, limit: float = 30.0) -> None:
        deadline = time.monotonic() + limit
        while not cond():
            assert time.monotonic() < deadline, f"{what}: not within {limit:g} s"
            time.sleep(0.05)

    try:
        for _ in range(4):
            tunnel()
        wait_until(lambda: len(accepted) == 4 and handlers() == 4, "four tunnels open")
        # a slow head: one byte every 0.2 s, cut at the head's 2 s deadline whatever the pace
        slow = socket.socket(socket.AF_UNIX)
        slow.connect(path)
        t0, cut = time.monotonic(), None
        for ch in f"CONNECT 127.0.0.1:{port} HTTP/1.1\r\nX-Pad: {'a' * 200}".encode():
            try:
                slow.send(bytes([ch]))
            except OSError:
                cut = time.monotonic() - t0
                break
            time.sleep(0.2)
        slow.settimeout(30)
        if cut is None:                                       # all sent before the cut: the close comes now
            assert slow.recv(10) == b""
            cut = time.monotonic() - t0
        assert 1.5 < cut < 15, cut
        assert proxy.record()["ended"]["slow_head"] == 1
        proxy.stop()
        assert handlers() == 0                                # stop() joined them
        for c in clients:                                     # the client's end closed ...
            assert c.recv(10) == b""
        for u in accepted:                                    # ... and the upstream's
            u.settimeout(30)
            assert u.recv(10) == b""
        assert proxy.record()["ended"]["stopped"] == 4
        # an idle tunnel ends by itself at the idle limit
        monkeypatch.setattr(P, "TUNNEL_IDLE_S", 1.0)
        path2 = str(tmp_path / "proxy2.sock")
        idle = P.AllowProxy(path2, [f"127.0.0.1:{port}"], private_addresses=["127.0.0.1"])
        idle.start()
        path, clients[:] = path2, []
        c = tunnel()
        assert c.recv(10) == b""                              # ended by the proxy, within the client's 30 s
        wait_until(lambda: idle.record()["ended"]["idle"] == 1, "the idle end recorded")
        idle.stop()
    finally:
        for c in clients:
            c.close()
        silent.close()


THROUGH = r'''
import asyncio, os, socket, sys
from mcp import Client

allowed, other = int(sys.argv[1]), int(sys.argv[2])
proxy = os.environ["HTTPS_PROXY"].rsplit(":", 1)

def direct(port):
    s = socket.socket()
    s.settimeout(2)
    ok = s.connect_ex(("127.0.0.1", port)) == 0
    s.close()
    return ok

def through(request):
    s = socket.create_connection((proxy[0].split("//")[1], int(proxy[1])), timeout=10)
    s.sendall(request.encode())
    got = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        got += chunk
        if got.startswith(b"HTTP/1.1 200 Connection") and got.endswith(b"\r\n\r\n"):
            s.sendall(b"GET /tunnel HTTP/1.0\r\n\r\n")
    s.close()
    return got.decode(errors="replace")

found = {"env": os.environ.get("HTTPS_PROXY"), "direct": [direct(allowed), direct(other)],
         "get": through(f"GET http://127.0.0.1:{allowed}/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"),
         "tunnel": through(f"CONNECT 127.0.0.1:{allowed} HTTP/1.1\r\n\r\n"),
         "other": through(f"CONNECT 127.0.0.1:{other} HTTP/1.1\r\n\r\n"),
         "other_get": through(f"GET http://127.0.0.1:{other}/ HTTP/1.1\r\n\r\n"),
         "named": through(f"CONNECT localhost:{allowed} HTTP/1.1\r\n\r\n")}

async def main():
    async with Client(os.environ["HEURESIS_MCP_URL"], cache=None) as client:
        await client.call_tool("view_graph", {"found": found})
        await client.call_tool("submit", {})

asyncio.run(main())
'''


@needs_bwrap
def test_an_allow_list_reaches_its_pairs_through_the_proxy_and_nothing_else(split, tmp_path):
    """``network: {allow: [...]}``: the command stays on its own network (the host's loopback is no route), the
    harness's proxy reaches the allowed pair (HTTP and CONNECT) and refuses another port; the episode records it."""
    a, b = _Target("A"), _Target("B")
    try:
        (tmp_path / "agent").mkdir()
        (tmp_path / "agent" / "through.py").write_text(THROUGH)
        spec = {"kind": "external", "command": ["python", str(tmp_path / "agent" / "through.py"), str(a.port),
                                                str(b.port)],
                "expose": [str(tmp_path / "agent")], "idle_timeout_s": 60,
                "network": {"allow": [f"127.0.0.1:{a.port}"], "private_addresses": ["127.0.0.1"]}}
        got = _run(split, "through", spec, tmp_path / "out")
        assert got["row"]["termination"] == "submitted", got["row"]["error"]
        found = json.loads(got["calls"][0]["arguments"])["found"]
        assert found["env"] == f"http://127.0.0.1:{external.PROXY_PORT}"
        assert found["direct"] == [False, False]                      # its own network: no host loopback
        assert found["get"].startswith("HTTP/1.0 200") and found["get"].endswith("A got GET /x"), found
        assert found["tunnel"].startswith("HTTP/1.1 200 Connection") and found["tunnel"].endswith("A got GET /tunnel")
        for key in ("other", "other_get", "named"):                   # not in the list: refused, never connected
            assert found[key].startswith("HTTP/1.1 403") and "not in the allow list" in found[key], found[key]
        assert (a.connections, b.connections) == (2, 0)
        record = json.loads(Path(got["row"]["transcript"]).read_text())["agent_record"]
        assert record["network"] == "allow" and record["proxy"]["allow"] == [f"127.0.0.1:{a.port}"]
        assert (record["proxy"]["allowed"], record["proxy"]["refused"]) == (2, 3), record["proxy"]
        # each refusal is an integrity event of the episode, and so is its report (view_graph takes no arguments)
        assert json.loads(got["row"]["integrity_counts"]) == {"malformed_call": 1, "network_refused": 3}
        assert got["row"]["integrity_events"] == 4 and [c["integrity"] for c in got["calls"]] == [["malformed_call"], []]
        notes = got["requests"][0]["notes"]
        assert f"network private, and through the harness's proxy only 127.0.0.1:{a.port}" in notes, notes
        assert "private addresses allowed: 127.0.0.1" in notes
    finally:
        a.close()
        b.close()


@pytest.mark.parametrize("network, error", [
    ({"allow": ["api.example.com:443", "[2001:db8::1]:8443"]}, ""),
    ({"allow": ["10.0.0.5:8000"], "private_addresses": ["10.0.0.5"]}, ""),
    ({"allow": []}, "network.allow must be a non-empty list"),
    ({"allow": ["api.example.com"]}, "is not host:port"),
    ({"allow": ["a@b:443"]}, "is not host:port"),
    ({"allow": ["a:443"], "private_addresses": ["gateway.lab"]}, "is not an IP address"),
    ({"allow": ["a:443"], "proxy": "x"}, "network takes the keys allow and private_addresses"),
    ("yes", "network must be false, true or"),
])
def test_the_config_checks_the_network_allow_list(network, error, tmp_path, monkeypatch):
    """The schema passes an external agent's ``network`` on to its own checks, which accept ``{allow,
    private_addresses}`` and name what is wrong."""
    from heuresis.stages.episodes import config_errors

    monkeypatch.chdir(tmp_path)
    cfg = {"agents": {"ext": {"kind": "external", "command": ["python", "x.py"], "network": network}},
           "references": {"algorithms": {"pc_kci": {}}}, "episodes": {"grids": {}, "run": []}}
    from heuresis.config.loading import schema_errors

    assert not [e for e in schema_errors(json.loads(json.dumps(cfg))) if "agents" in e]   # the schema leaves it here
    errors = config_errors(cfg)
    if not error:
        assert errors == []
    else:
        assert len(errors) == 1 and "agents.ext" in errors[0] and error in errors[0], errors
