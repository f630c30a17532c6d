"""The workflow as a user runs it: lint, dry run, a small run, a seventh family, a bad config."""

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from tinyflow import copy_workflow

pytestmark = pytest.mark.slow


def _snakemake(workdir: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "snakemake", "--cores", "2", *args]
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    return proc


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A copy of the workflow (not of results) in a fresh folder, plus config/tiny.yaml."""
    return copy_workflow(tmp_path_factory.mktemp("wf"))


def _digests(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*.parquet"))}


def test_lint_is_clean(workdir):
    proc = _snakemake(workdir, "--lint", "--configfile", "config/quick.yaml")
    assert "Lints for" not in proc.stdout + proc.stderr


def test_dry_run_lists_every_stage_output(workdir, quick_config):
    out = _snakemake(workdir, "-n", "--configfile", "config/quick.yaml").stdout
    for family in quick_config["families"]:
        for split in ("dev", "test"):
            assert f"results/instances/{family}/{split}" in out
            assert f"results/truth/{family}/{split}/graphs.parquet" in out
            for algorithm in [*quick_config["references"]["algorithms"], *quick_config["references"]["baselines"]]:
                assert f"results/references/{algorithm}/{family}/{split}/shard-000.parquet" in out
    for target in ("results/headroom/selection.parquet", "results/headroom/test_scores.parquet",
                   "results/tables/table2.md", "results/tables/table3.tex", "results/tables/table11.parquet",
                   "results/figures/figure1c.pdf", "results/figures/figure1c.png",
                   "results/analysis/episode_scores.parquet", "results/tables/table6.md", "results/tables/table12.tex",
                   "results/figures/figure6.pdf", "results/figures/figure7a.png", "results/figures/figure9.png"):
        assert target in out


def test_small_run_then_a_seventh_family_changes_no_existing_byte(tiny_run, tmp_path):
    """The shared tiny run (rule all, local profile), copied; then a seventh family is added."""
    small = ["--configfile", "config/quick.yaml", "config/tiny.yaml"]
    workdir = tmp_path / "wf"
    shutil.copytree(tiny_run, workdir, symlinks=True)     # keeps file times: nothing is stale
    for target in ("tables/table2", "tables/table3", "tables/table11"):
        for ext in ("parquet", "md", "tex"):
            assert (workdir / "results" / f"{target}.{ext}").stat().st_size > 0
    assert (workdir / "results/figures/figure1c.pdf").exists() and (workdir / "results/figures/figure1c.png").exists()
    for t in ("table4", "table6", "table7", "table8", "table9", "table10", "table12", "table13"):
        assert (workdir / f"results/tables/{t}.md").stat().st_size > 0
    table3 = (workdir / "results/tables/table3.md").read_text()
    assert "checkpoint not available offline" in table3
    _snakemake(workdir, "--report", "report.html", *small)
    html = (workdir / "report.html").read_text(errors="replace")
    assert "figure1c.png" in html and "table3.md" in html
    assert "figure7b.png" in html and "table13.md" in html
    data = workdir / "results" / "instances"
    before = {k: v for k, v in _digests(workdir / "results").items() if k.startswith(("instances", "truth"))}
    n_dev, n_test = 2, 2
    assert len(list(data.glob("*/dev/*/data.parquet"))) == 6 * n_dev
    assert len(list(data.glob("*/test/*/data.parquet"))) == 6 * n_test

    (workdir / "config" / "seventh.yaml").write_text(
        "families:\n"
        "  smooth:\n"
        "    root_noise: [1.0, 1.0]\n"
        "    kinds:\n"
        "      sigmoid: {weight: 2, noise: [0.2, 0.3]}\n"
        "      piecewise: {weight: 1, noise: [0.2, 0.3]}\n"
    )
    args = [*small, "config/seventh.yaml"]
    dry = _snakemake(workdir, "-n", *args).stdout
    assert "results/instances/smooth/dev" in dry
    planned = [line.split()[1] for line in dry.splitlines() if line.startswith("instances ")]
    assert planned and set(planned) == {"2"}, dry     # only the new family's two jobs
    # existing families' reference sweeps are not redone either: only the new family's
    sweeps = [line for line in dry.splitlines() if line.strip().startswith("output: results/references/")]
    assert sweeps and all("/smooth/" in line for line in sweeps), sweeps
    _snakemake(workdir, "all", *args)
    after = _digests(workdir / "results")
    assert {k: after[k] for k in before} == before
    assert len(list(data.glob("smooth/*/*/data.parquet"))) == n_dev + n_test
    table2 = (workdir / "results/tables/table2.md").read_text()
    # the new family after the paper's six, in the config's order; its kinds with the shares its weights give
    rows = [line.split("|")[1].strip() for line in table2.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows[1:] == ["lg", "anm", "hetero", "wild", "mixed", "gauntlet", "smooth", "all"], rows
    assert "| smooth | sigmoid 67%, piecewise 33% |" in table2


def test_a_finished_run_says_what_it_built_and_how_to_look_at_it(tiny_run):
    """The last lines of a run (onsuccess): the tables and figures counted in the results folder, and the
    viewer, report and provenance commands with the run's own config files."""
    import re

    log = (tiny_run / "snakemake.log").read_text()
    m = re.search(r"Finished: (\d+) tables in results/tables, (\d+) figures in results/figures", log)
    assert m, log[-2000:]
    tables = {p.stem for p in (tiny_run / "results/tables").glob("*.md")}
    figures = {p.stem for p in (tiny_run / "results/figures").glob("*.png")}
    assert (int(m[1]), int(m[2])) == (len(tables), len(figures)) and tables
    assert "heuresis view results" in log and "heuresis provenance results/tables/table" in log
    from tinyflow import CONFIG

    assert "snakemake --report report.html --configfile " + " ".join(c for c in CONFIG if c != "--configfile") in log


def test_bad_config_fails_at_start_naming_the_key(workdir):
    (workdir / "config" / "bad.yaml").write_text(
        "families:\n"
        "  broken:\n"
        "    root_noise: [1.0, 0.5]\n"
        "    kinds:\n"
        "      wavelet: {weight: 1, noise: [0.1, 0.2]}\n"
    )
    proc = _snakemake(workdir, "-n", "--configfile", "config/quick.yaml", "config/bad.yaml", check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0
    assert "config key families.broken.kinds.wavelet" in text
    assert "config key families.broken.root_noise" in text


def test_missing_llm_credential_stops_workflow_at_start(tmp_path, monkeypatch):
    """An LLM agent in an active grid without its key: the dry run names the variable (a warning),
    a run whose jobs need the agent stops at start before any job runs, and a target that needs no
    LLM builds without the key."""
    workdir = copy_workflow(tmp_path / "wf")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    (workdir / "config" / "llm.yaml").write_text(
        "agents:\n"
        "  gpt: {kind: llm, model: openai/gpt-5}\n"
        "episodes:\n"
        "  grids:\n"
        "    quick: {agents: [shortcut, gpt]}\n"
    )
    named = "agent 'gpt' (model openai/gpt-5) needs the environment variable OPENAI_API_KEY"
    conf = ["--configfile", "config/quick.yaml", "config/llm.yaml"]
    dry = _snakemake(workdir, "-n", *conf)
    assert named in dry.stdout + dry.stderr and "results/episodes/gpt/" in dry.stdout
    proc = _snakemake(workdir, *conf, check=False)
    text = proc.stdout + proc.stderr
    assert proc.returncode != 0 and named in text
    assert "rule instances" not in text and not (workdir / "results").exists()   # nothing ran
    one = _snakemake(workdir, "results/truth/lg/dev/graphs.parquet", *conf)
    assert one.returncode == 0 and (workdir / "results/truth/lg/dev/graphs.parquet").exists()
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-key")
    dry = _snakemake(workdir, "-n", *conf)
    assert named not in dry.stdout + dry.stderr and "results/episodes/gpt/" in dry.stdout


# Jobs whose outputs cost compute or money: a config edit may add new ones, never redo an existing one.
_PAID_RULES = ("instances", "references_", "episodes", "games_references", "games_plays", "games_judgements",
               "leakage", "saturation", "repair_features", "verification_check")


def _planned_jobs(dry_run_output: str) -> list[dict]:
    """Jobs of a ``snakemake -n`` listing: rule, output paths and reason of each.

    The jobs of a group job (rules/*.smk ``group:``) are listed indented under it: read too.
    """
    import re

    jobs, job = [], None
    for line in dry_run_output.splitlines():
        m = re.match(r"^\s*(?:local)?rule (\S+):$", line)
        field = line.strip()
        if m:
            job = {"rule": m.group(1), "outputs": [], "reason": ""}
            jobs.append(job)
        elif job is not None and field.startswith("output: "):
            job["outputs"] = [p.strip() for p in field[len("output: "):].split(",")]
        elif job is not None and field.startswith("reason: "):
            job["reason"] = field[len("reason: "):]
    return jobs


_EDITS = {
    "an inactive grid": "episodes:\n  grids:\n    spare: {agents: [shortcut], guided: [false], families: [lg]}\n",
    "an active grid": (
        "episodes:\n"
        "  grids:\n"
        "    spare: {agents: [merge], guided: [true], prompt_level: [2], families: [lg]}\n"
        "  run: [tiny, tiny_toolbox, tiny_prompts, tiny_budgets, spare]\n"),
    "a budget": ("episodes:\n  budgets:\n    roomy: {test_units_factor: 3.0, turns: 9, output_tokens_per_turn: 4000,"
                 " algorithm_calls: 10, wall_seconds: 600}\n"),
    "an agent no grid uses": "agents:\n  spare_merge: {kind: merge, k: 3}\n",
    "a family": ("families:\n  smooth:\n    root_noise: [1.0, 1.0]\n    kinds:\n"
                 "      sigmoid: {weight: 1, noise: [0.2, 0.3]}\n"),
    "a games scenario": "games:\n  scenarios: [antenna_trap, deployment_zone_trap_categorical, weather_noise]\n",
    "a games agent": "games:\n  agents: [game_random, game_trap_follower, game_greedy]\n",
    "a judge": ("agents:\n  judge_local: {kind: llm, model: openai/judge, api_base: 'http://127.0.0.1:9/v1',"
                " requires_key: false, prices: {input_per_mtok: 0, output_per_mtok: 0}}\n"
                "games:\n  judges: [judge_local]\n  agents: [game_random, game_trap_follower]\n"),
    "more bootstrap resamples": "bootstrap: {resamples: 300}\n",
}


@pytest.mark.parametrize("edit", list(_EDITS))
def test_a_config_edit_schedules_no_existing_paid_job(tiny_run, tmp_path, edit):
    """Adding a grid, a budget, an agent, a family, a scenario, a games agent or a judge, or raising the
    bootstrap resamples, plans only new instance, reference, episode, play and judgement jobs: none
    whose outputs exist is redone (its params hold only what its outputs depend on)."""
    workdir = tmp_path / "wf"
    shutil.copytree(tiny_run, workdir, symlinks=True)     # keeps file times: nothing is stale
    small = ["--configfile", "config/quick.yaml", "config/tiny.yaml"]
    assert not [j for j in _planned_jobs(_snakemake(workdir, "-n", *small).stdout) if j["rule"] != "all"]
    (workdir / "config" / "edit.yaml").write_text(_EDITS[edit])
    jobs = _planned_jobs(_snakemake(workdir, "-n", "all", *small, "config/edit.yaml").stdout)
    # the checks of Table 5 that generate instances run on every family's generator: a new family is theirs too
    depends = {"a family": ("verification_check",)}.get(edit, ())
    redone = [(j["rule"], j["reason"], p) for j in jobs if j["rule"].startswith(_PAID_RULES)
              and j["rule"] not in depends for p in j["outputs"] if (workdir / p).exists()]
    assert not redone, redone
    new_paid = {j["rule"] for j in jobs if j["rule"].startswith(_PAID_RULES)}
    expected_new = {"an active grid": {"episodes"}, "a family": {"instances"}, "a games scenario": {"games_plays"},
                    "a games agent": {"games_plays"}, "a judge": {"games_judgements"}}.get(edit, set())
    assert expected_new <= new_paid, (edit, sorted(new_paid))
    if edit in ("an inactive grid", "an agent no grid uses"):
        assert not jobs or {j["rule"] for j in jobs} <= {"all", "table12"}, [j["rule"] for j in jobs]


def test_a_new_generator_version_reruns_the_instances_and_what_is_built_on_them(tiny_run, tmp_path, monkeypatch):
    """A raised generator version plans every job Snakemake's own ``--forcerun instances`` plans (the instance
    stage and everything downstream of it) and besides them only the checks of Table 5 that generate instances
    themselves (their settings hold instance specs) and Table 5: nothing of the games track."""
    workdir = tmp_path / "wf"
    shutil.copytree(tiny_run, workdir, symlinks=True)     # keeps file times: nothing is stale
    small = ["--configfile", "config/quick.yaml", "config/tiny.yaml"]
    forced = _planned_jobs(_snakemake(workdir, "-n", "all", "--forcerun", "instances", *small).stdout)
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text("import heuresis.stages.instances as m\nm.GENERATOR_VERSION += 1\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    bumped = _planned_jobs(_snakemake(workdir, "-n", "all", *small).stdout)

    def outputs(jobs):
        return {p: j for j in jobs for p in j["outputs"]}

    assert set(outputs(forced)) <= set(outputs(bumped))
    extra = {p: j for p, j in outputs(bumped).items() if p not in outputs(forced)}
    assert {j["rule"] for j in extra.values()} <= {"verification_check", "table5"}, extra
    checks = [j for j in extra.values() if j["rule"] == "verification_check"]
    assert checks and all("Params have changed" in j["reason"] for j in checks), checks
    instances = [j for j in bumped if j["rule"] == "instances"]
    assert len(instances) == 6 * 2 and all("Params have changed" in j["reason"] for j in instances), instances[:1]
    assert not [j["rule"] for j in bumped if j["rule"].startswith("games")]
    assert {"headroom", "episodes", "table2"} <= {j["rule"] for j in bumped}


def test_the_real_data_family_runs_through_every_stage_and_is_anonymised(tiny_run, tmp_path):
    """config/sachs.yaml over the tiny run: only the new family's instances and references are new; its
    instances are the seeded subsamples the recorded seed gives, anonymised and standardized, with the
    consensus DAG of the package as their truth; Table 2 shows it with its caveat."""
    import numpy as np
    import pandas as pd

    from heuresis.causal.networks import load_network
    from heuresis.causal.realdata import load_source

    workdir = tmp_path / "wf"
    shutil.copytree(tiny_run, workdir, symlinks=True)     # keeps file times: nothing is stale
    args = ["--configfile", "config/quick.yaml", "config/tiny.yaml", "config/sachs.yaml"]
    jobs = _planned_jobs(_snakemake(workdir, "-n", "all", *args).stdout)
    redone = [(j["rule"], p) for j in jobs if j["rule"].startswith(_PAID_RULES) for p in j["outputs"]
              if (workdir / p).exists() and j["rule"] != "verification_check"]
    assert not redone, redone
    assert {p for j in jobs if j["rule"] == "instances" for p in j["outputs"]} >= {
        "results/instances/sachs/dev", "results/instances/sachs/test"}
    _snakemake(workdir, "all", *args)

    src, net = load_source("sachs"), load_network("sachs")
    for split in ("dev", "test"):
        graphs = pd.read_parquet(workdir / f"results/truth/sachs/{split}/graphs.parquet")
        nodes = pd.read_parquet(workdir / f"results/truth/sachs/{split}/nodes.parquet")
        index = pd.read_parquet(workdir / f"results/instances/sachs/{split}/index.parquet")
        for g in graphs.itertuples():
            data = pd.read_parquet(workdir / f"results/instances/sachs/{split}/{g.instance:04d}/data.parquet")
            assert list(data.columns) == [f"X{k + 1}" for k in range(11)] and g.prior == "real"
            assert np.allclose(data.mean(), 0) and np.allclose(data.std(ddof=0), 1)
            proteins = [json.loads(p)["variable"] for p in nodes[nodes.instance == g.instance]
                        .set_index("node").loc[data.columns, "params"]]
            assert sorted(proteins) == sorted(net.variables)
            # the truth is the package's consensus DAG, under the anonymised names
            dag = np.array(g.dag).reshape(11, 11)
            arcs = {(proteins[i], proteins[j]) for i, j in zip(*np.nonzero(dag))}
            assert arcs == set(net.arcs())
            # the rows: the first draw of the recorded seed's stream, log-transformed, standardized
            rng = np.random.default_rng(np.random.SeedSequence(int(g.seed_entropy), spawn_key=tuple(g.seed_spawn_key)))
            rows = np.sort(rng.choice(src.data.shape[0], size=len(data), replace=False))
            raw = np.log(src.data[rows][:, [src.variables.index(p) for p in proteins]])
            assert np.allclose(data.to_numpy(), (raw - raw.mean(0)) / raw.std(0))
        assert len(index) == len(graphs) > 0
    table2 = (workdir / "results/tables/table2.md").read_text()
    assert "| sachs | real data: sachs |" in table2 and "consensus graph, itself uncertain" in table2
    assert "| sachs |" in (workdir / "results/tables/table3.md").read_text()


@pytest.mark.parametrize("prompt, rules", [("level1", {"episodes"}), ("game_agentic_system", {"games_plays"})])
def test_an_edited_prompt_reruns_the_jobs_whose_messages_it_builds(tiny_run, tmp_path, monkeypatch, prompt, rules):
    """A prompt template is an input of the jobs that build messages from it: after an edit the dry run plans
    every one of those jobs again (params changed), no other paid job."""
    workdir = tmp_path / "wf"
    shutil.copytree(tiny_run, workdir, symlinks=True)     # keeps file times: nothing is stale
    small = ["--configfile", "config/quick.yaml", "config/tiny.yaml"]
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "from string import Template\nimport heuresis.harness.prompts as m\nbase = m.template\n"
        f"m.template = lambda name: Template(base(name).template + ' (edited)') if name == {prompt!r} else base(name)\n")
    monkeypatch.setenv("PYTHONPATH", str(site))
    jobs = _planned_jobs(_snakemake(workdir, "-n", "all", *small).stdout)
    paid = {j["rule"] for j in jobs if j["rule"].startswith(_PAID_RULES)}
    assert paid == rules, paid
    kind = {"episodes": "episodes", "games_plays": "games/plays"}[next(iter(rules))]
    existing = {str(p.relative_to(workdir)) for p in (workdir / "results" / kind).rglob("*.parquet")
                if not p.name.endswith((".calls.parquet", ".requests.parquet", "index.parquet"))}
    planned = {p for j in jobs if j["rule"] in rules for p in j["outputs"]}
    assert existing and existing <= planned, sorted(existing - planned)[:3]
    assert all("Params have changed" in j["reason"] for j in jobs if j["rule"] in rules)
