"""Who can read what on a shared node: the truth, the transcripts, the spend journals and the view's export
are their owner's only whatever the umask; the data and the public tables stay readable; a private folder
left open to others stops the workflow before any job, naming it."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from heuresis.artifacts.io import atomic_write_text
from heuresis.artifacts.privacy import PRIVATE_FOLDERS, PrivacyError, check_private_folders, private_root


def _split(quick_config: dict, results: Path, n: int) -> dict:
    """``n`` small lg test instances under ``results`` (the instances job's writer)."""
    from heuresis.stages.instances import instance_spec, write_split

    data, truth = results / "instances/lg/test", results / "truth/lg/test"
    write_split({**instance_spec(quick_config, "lg"), "instances": {"d": 5, "n": 100}}, "lg", "test", n, data, truth)
    return {"data": data, "truth": truth}


def _mode(p: Path) -> int:
    return stat.S_IMODE(p.stat().st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0o022)       # the common default: new files 0644 in 0755 folders
    yield
    os.umask(old)


def test_the_truth_is_written_owner_only_and_the_data_stays_readable(tmp_path, quick_config, open_umask):
    split = _split(quick_config, tmp_path / "results", 2)
    truth, data = Path(split["truth"]), Path(split["data"])
    files = [truth / "graphs.parquet", truth / "nodes.parquet"]
    assert all(_mode(f) == 0o600 for f in files), [oct(_mode(f)) for f in files]
    root = private_root(truth)
    assert root is not None and root.name == "truth"
    for folder in [truth, *[p for p in truth.parents if root in (p, *p.parents)]]:
        assert _mode(folder) == 0o700, folder
    assert _mode(data / "index.parquet") == 0o644            # what an agent sees anyway: the umask's mode


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("runuser") or not Path("/usr/bin/python3").exists(),
                    reason="needs root (runuser to an unrelated uid) and /usr/bin/python3")
def test_another_user_reads_no_truth_but_reads_the_data(request, quick_config, open_umask):
    """The finding reproduced: ``nobody`` on the same node tries to read a truth file of a run under umask 022."""
    import tempfile

    base = Path(tempfile.mkdtemp(prefix="heuresis-shared-", dir="/tmp"))    # pytest's own folders are 0700
    os.chmod(base, 0o755)
    request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
    split = _split(quick_config, base / "results", 1)
    truth = Path(split["truth"]) / "graphs.parquet"
    data = Path(split["data"]) / "index.parquet"
    probe = ("import sys\nfor p in sys.argv[1:]:\n    try:\n        open(p, 'rb').read(1); print('read', p)\n"
             "    except OSError as e:\n        print('refused', p, type(e).__name__)")
    cmd = [shutil.which("runuser"), "-u", "nobody", "--", "/usr/bin/python3", "-I", "-c", probe, str(truth), str(data)]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"}, cwd="/")
    lines = out.stdout.splitlines()
    assert lines == [f"refused {truth} PermissionError", f"read {data}"], (out.stdout, out.stderr)


def test_a_private_folder_open_to_others_is_refused_by_name(tmp_path):
    made = check_private_folders(tmp_path)
    assert [str(p.relative_to(tmp_path)) for p in made] == list(PRIVATE_FOLDERS)
    assert all(_mode(p) == 0o700 for p in made)
    check_private_folders(tmp_path)                                    # again: nothing to refuse
    opened = tmp_path / "results/transcripts"
    os.chmod(opened, 0o755)
    with pytest.raises(PrivacyError, match=r"results/transcripts: a private folder .* open to other users \(mode 755\)"):
        check_private_folders(tmp_path)


def test_a_file_in_a_private_folder_is_owner_only_and_elsewhere_follows_the_umask(tmp_path, open_umask):
    secret = atomic_write_text(tmp_path / "results/spend/openai/journal.json", "{}")
    public = atomic_write_text(tmp_path / "results/tables/table3.md", "| a |")
    assert _mode(secret) == 0o600 and _mode(tmp_path / "results/spend") == 0o700
    assert _mode(public) == 0o644 and _mode(tmp_path / "results/tables") == 0o755
    # an older tree's open folder is closed when written into
    old = tmp_path / "old/results/truth/lg"
    old.mkdir(parents=True)
    os.chmod(tmp_path / "old/results/truth", 0o755)
    atomic_write_text(old / "graphs.parquet", "x")
    assert _mode(tmp_path / "old/results/truth") == 0o700 and _mode(old) == 0o700


def test_the_view_export_is_owner_only(tmp_path, quick_config, open_umask):
    from heuresis.view import export_site

    results = tmp_path / "results"
    _split(quick_config, results, 1)
    out = tmp_path / "site"
    export_site(results, out, log=lambda m: None)
    pages = [p for p in out.rglob("*") if p.is_file()]
    assert pages and all(_mode(p) == 0o600 for p in pages)
    assert all(_mode(d) == 0o700 for d in [out, *(p for p in out.rglob("*") if p.is_dir())])


def test_the_viewer_opens_the_browser_without_its_token_on_the_command_line(tmp_path, quick_config, monkeypatch):
    """The finding reproduced: the browser's argument (readable by any user in /proc/*/cmdline) held the tokened
    URL. Now it is the path of an owner-only page that redirects; the page is gone when the server stops."""
    import threading
    import webbrowser

    from heuresis.view import server

    results = tmp_path / "results"
    _split(quick_config, results, 1)
    opened, made = [], []
    real = server.make_server

    def make(*a, **kw):
        srv = real(*a, **kw)
        made.append(srv)

        def serve_until_opened():                 # serve until the browser was started, then return
            tick = threading.Event()
            for _ in range(600):
                if opened:
                    return
                tick.wait(0.1)
            raise AssertionError("no browser started within 60 s")

        srv.serve_forever = serve_until_opened
        return srv

    monkeypatch.setattr(server, "make_server", make)
    monkeypatch.setattr(webbrowser, "open", lambda arg: opened.append((arg, Path(arg.removeprefix("file://")).read_text(),
                                                                       _mode(Path(arg.removeprefix("file://"))),
                                                                       _mode(Path(arg.removeprefix("file://")).parent))))
    server.serve(results, log=lambda m: None)
    (arg, page, mode, folder_mode), = opened
    token = made[0].token
    assert token not in arg and arg.startswith("file:///")
    assert f"/{token}/" in page and mode == 0o600 and folder_mode == 0o700
    assert not Path(arg.removeprefix("file://")).exists()          # removed with the server


def test_no_agent_is_handed_the_test_seed_or_another_agents_key(quick_config):
    import copy

    from heuresis.config import ConfigError
    from heuresis.preflight import validate_config

    cfg = copy.deepcopy(quick_config)
    cfg["agents"]["judge"] = {"kind": "llm", "model": "anthropic/claude-x", "api_key_env": "JUDGE_KEY"}
    cfg["agents"]["ext"] = {"kind": "external", "command": ["my-agent"], "env": ["MY_SETTING", "HEURESIS_TEST_SEED",
                                                                                 "JUDGE_KEY"]}
    with pytest.raises(ConfigError) as err:
        validate_config(cfg)
    text = str(err.value)
    assert "agents.ext.env[1]: HEURESIS_TEST_SEED holds the sealed test seed" in text
    assert "agents.ext.env[2]: JUDGE_KEY holds the provider key of judge" in text and "env[0]" not in text
    cfg["agents"]["ext"]["env"] = ["MY_SETTING"]
    validate_config(cfg)                                            # its own variables pass
