"""The docs stand alone and stay true to the code.

The independent truths are the repository itself: the path module and a whole run's results
tree (every artifact), the rules Snakemake lists,
the package (every function and schema the docs name), the files on disk (every link), the code
comments (every ``docs/design.md §N`` they cite) and the CI script (the README commands it runs).
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
README = ROOT / "README.md"
ARTIFACTS = DOCS / "artifacts.md"
DOC_FILES = [README, *sorted(DOCS.glob("*.md"))]

# --- the rule files --------------------------------------------------------------------------------
_HEADER = re.compile(r"^(\s+)(\w+)\s*:(.*)$")
def _template(text: str, fstring: bool) -> str:
    """A path or name with every placeholder written ``{}``.

    In an f-string, ``{{w}}`` is a Snakemake wildcard and ``{expr}`` a value of the loop that
    defines the rule (an algorithm, a table name): both become ``{}``.
    """
    if fstring:
        text = text.replace("{{", "\0").replace("}}", "\1")
        text = re.sub(r"\{[^{}]*\}", "{}", text)
        text = text.replace("\0", "{").replace("\1", "}")
    return re.sub(r"\{[^{}]*\}", "{}", text)


def _pattern(template: str) -> re.Pattern:
    return re.compile("[^/]+".join(re.escape(part) for part in template.split("{}")))


# --- docs/artifacts.md -----------------------------------------------------------------------------
def _expand(text: str) -> list[str]:
    """``a.{x,y}`` -> ``a.x``, ``a.y`` (only braces that list alternatives)."""
    m = re.search(r"\{([^{}]*,[^{}]*)\}", text)
    if not m:
        return [text]
    return [e for alt in m.group(1).split(",") for e in _expand(text[:m.start()] + alt.strip() + text[m.end():])]


def artifact_rows() -> list[dict]:
    rows = []
    for line in ARTIFACTS.read_text().splitlines():
        if not line.startswith("|") or set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        ticks = [re.findall(r"`([^`]+)`", c) for c in cells]
        paths = [_template(e, False) for t in ticks[0] if t.startswith(("results/", "logs/")) for e in _expand(t)]
        if not paths or len(cells) < 4:
            continue
        rows.append({"line": line, "paths": paths, "rules": [_template(t, False) for t in ticks[1]],
                     "functions": [t for t in ticks[2] if t.startswith("heuresis.")],
                     "schemas": [t for t in ticks[3] if re.fullmatch(r"[A-Za-z_]+", t)]})
    return rows


def _documented(path: str, rows: list[dict]) -> bool:
    """Whether a concrete path (or a folder it lies in) matches a row's path in docs/artifacts.md."""
    candidates = [path]
    parent = path
    while "/" in parent:
        parent = parent.rsplit("/", 1)[0]
        candidates.append(parent)
    for c in candidates:
        if any(_pattern(p).fullmatch(c) for row in rows for p in row["paths"]):
            return True
    return False


def test_every_declared_artifact_has_a_row_naming_its_rule_function_and_schema():
    """heuresis.artifacts.paths and docs/artifacts.md name the same rule, function and schema per path."""
    from heuresis.artifacts.paths import ARTIFACTS, TABLE_EXTS

    rows = artifact_rows()
    wrong = []
    for name, art in ARTIFACTS.items():
        ext = "pdf" if name == "FIGURE" else TABLE_EXTS[0]
        template = _template(art.template.replace("{ext}", ext), False)
        matching = [row for row in rows if any(_pattern(template).fullmatch(p) or p == template
                                               or p.startswith(template + "/") for p in row["paths"])]
        agree = [row for row in matching if any(_pattern(r).fullmatch(_template(art.rule, False)) or
                                                 r == _template(art.rule, False) for r in row["rules"])
                 and art.function in row["functions"] and (not art.schema or art.schema in row["schemas"])]
        if name in ("TABLE", "FIGURE"):   # one row per target: each names the one entry point
            agree = [row for row in rows for p in row["paths"] if _pattern(template).fullmatch(p)
                     and art.function in row["functions"]]
        if not agree:
            wrong.append(f"{name} = {art.template!r} ({art.rule}, {art.function}, {art.schema or '-'}): "
                         + ("rows disagree: " + "; ".join(r["line"][:120] for r in matching) if matching else "no row"))
    assert not wrong, "docs/artifacts.md and heuresis.artifacts.paths disagree:\n" + "\n".join(wrong)


def test_every_target_has_a_row():
    from heuresis.targets.registry import paper_targets, target_files

    rows = artifact_rows()
    missing = [f"{t.name}: {path}" for t in paper_targets(["antenna", "zone", "weather"])
               for path in target_files(t).values() if not _documented(path, rows)]
    assert not missing, "docs/artifacts.md has no row for:\n" + "\n".join(missing)


def test_every_file_of_a_tiny_run_is_in_the_artifact_map(tiny_run):
    """Walk a whole run's results/ and logs/: each file (or a folder it is in) has a row."""
    rows = artifact_rows()
    files = [str(p.relative_to(tiny_run)) for top in ("results", "logs") for p in sorted((tiny_run / top).rglob("*"))
             if p.is_file()]
    assert len(files) > 300
    # a figure's numbers and provenance sidecar, and a checkpoint folder, go with their documented output
    undocumented = [f for f in files if not _documented(re.sub(r"\.provenance\.json$", ".pdf", f), rows)
                    and ".parts/" not in f]
    assert not undocumented, "files of the tiny run without a row in docs/artifacts.md:\n" + "\n".join(undocumented[:40])


def test_the_artifact_map_names_exactly_the_workflow_rules():
    """Rule names as Snakemake itself lists them for the default config (loops expanded)."""
    out = subprocess.run([sys.executable, "-m", "snakemake", "--list-rules"], cwd=ROOT, capture_output=True,
                         text=True, check=True, env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}).stdout
    listed = {line.split()[0] for line in out.splitlines() if line.strip()} - {"all"}
    assert {"instances", "references_pc_fisherz", "table4", "games_plays"} <= listed
    documented = {name for row in artifact_rows() for name in row["rules"]}
    unmapped = sorted(r for r in listed if not any(_pattern(d).fullmatch(r) for d in documented))
    unknown = sorted(d for d in documented if not any(_pattern(d).fullmatch(r) for r in listed))
    assert not unmapped, f"rules without a row in docs/artifacts.md: {unmapped}"
    assert not unknown, f"docs/artifacts.md names rules the workflow does not have: {unknown}"


def _resolve(dotted: str):
    parts = dotted.split(".")
    for k in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:k]))
        except ModuleNotFoundError:
            continue
        for attr in parts[k:]:
            obj = getattr(obj, attr)
        return obj
    raise ModuleNotFoundError(dotted)


def test_every_function_and_schema_in_the_artifact_map_exists():
    schemas = importlib.import_module("heuresis.artifacts.schemas")
    rows = artifact_rows()
    functions = sorted({f for row in rows for f in row["functions"]})
    names = sorted({s for row in rows for s in row["schemas"]})
    assert len(functions) > 20 and len(names) > 15
    bad = []
    for f in functions:
        try:
            assert callable(_resolve(f))
        except (ImportError, AttributeError, AssertionError) as e:
            bad.append(f"{f}: {e!r}")
    bad += [f"heuresis.artifacts.schemas.{s}: missing" for s in names if not hasattr(schemas, s)]
    assert not bad, "docs/artifacts.md names what the package does not have:\n" + "\n".join(bad)


# --- links, self-containment -----------------------------------------------------------------------
_LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_doc_links_point_to_files_that_exist(doc):
    text = doc.read_text()
    broken = []
    for target in _LINK.findall(text):
        path = target.split("#", 1)[0]
        if path and not path.startswith(("http://", "https://")) and not (doc.parent / path).exists():
            broken.append(target)
    for name in re.findall(r"`((?:docs|src|tests|rules|benchmarks|workflow|config|requirements)/[^`\s*{}]+)`", text):
        name = name.split("::", 1)[0]
        if not (ROOT / name.rstrip("/")).exists() and not any(c in name for c in "<>"):
            broken.append(name)
    assert not broken, f"{doc.relative_to(ROOT)} points to missing files: {broken}"


@pytest.mark.parametrize("doc", DOC_FILES, ids=lambda p: p.name)
def test_docs_stay_inside_the_repository(doc):
    text = doc.read_text()
    # a URL with a dotted host other than the loopback address (examples such as http://gpu-node:8000 are fine)
    outside = [u for u in re.findall(r"https?://[\w-]+\.[\w.-]+", text) if not u.split("//")[1].startswith("127.0.0.1")]
    assert not outside, f"{doc.relative_to(ROOT)} links outside the repository: {outside}"
    for bad in (r"\bSPEC\b", r"GAMES\.md", r"\.\./shared", r"/work/", r"\bissues? #?\d+", r"#\d+\b",
                r"(?i)(?<![-\w])(?<!new )sessions?\b", r"(?i)\bwe tried\b", r"(?i)\b(earlier|previous|last) rounds?\b"):
        assert not re.search(bad, text), f"{doc.relative_to(ROOT)} matches {bad!r}"


def test_readme_is_short_and_lists_every_doc():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    listed = set(re.findall(r"\]\(docs/([\w-]+\.md)\)", text))
    assert listed == {p.name for p in DOCS.glob("*.md")}


def _readme_commands():
    import importlib.util

    spec = importlib.util.spec_from_file_location("readme_commands", ROOT / ".ci" / "readme_commands.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["readme_commands"] = mod   # its dataclass resolves annotations through sys.modules
    spec.loader.exec_module(mod)
    return mod


def test_ci_finds_the_two_quick_start_commands():
    """The README commands as .ci/run extracts them (its own shell function, run here)."""
    script = (ROOT / ".ci/run").read_text()
    func = re.search(r"^readme_command\(\) \{.*?\}$", script, re.M).group(0)
    out = [subprocess.run(["bash", "-c", f"{func}\nreadme_command {n}"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip() for n in (1, 2)]
    assert out[0] == "python3 -m pip install -e . && snakemake all --cores 2 --configfile config/quick.yaml"
    assert out[1] == 'python3 -m pip install -e ".[test]" && python3 -m pytest'
    assert "python3 .ci/readme_commands.py run" in script


def test_ci_installs_the_local_model_with_the_readmes_command_as_written(tmp_path):
    """.ci/run installs the [local] extra only through ``readme_commands.py local-install``, which runs the
    README's command in a shell as written: here with a stand-in ``python3`` that records what it got."""
    from heuresis.local_server import INSTALL_COMMAND

    script = (ROOT / ".ci/run").read_text()
    assert "python3 .ci/readme_commands.py local-install" in script and ".[local]" not in script
    rc = _readme_commands()
    assert rc.local_install(rc.readme_commands()).text == INSTALL_COMMAND
    record = tmp_path / "argv"
    (tmp_path / "python3").write_text(f'#!/bin/sh\necho "CMAKE_ARGS=$CMAKE_ARGS" > {record}\n'
                                      f'printf "%s\\n" "$@" >> {record}\n')
    (tmp_path / "python3").chmod(0o755)
    env = {**os.environ, "PATH": f"{tmp_path}{os.pathsep}{os.environ['PATH']}"}
    env.pop("CMAKE_ARGS", None)
    proc = subprocess.run([sys.executable, ".ci/readme_commands.py", "local-install"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert record.read_text().splitlines() == [
        "CMAKE_ARGS=-DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF",
        "-m", "pip", "install", "--no-cache-dir", "-e", ".[local]"]


def test_every_readme_command_is_run_by_ci_or_listed_with_its_reason():
    """Every command the README shows (code blocks, the commands table, commands in prose) is one CI runs:
    as written, in a fresh venv, with its input, as a dry run for paid keys, or listed with a reason."""
    rc = _readme_commands()
    text = README.read_text()
    found = [c.text for c in rc.readme_commands(text)]
    # counted by hand from the README's blocks: the locked install, Quick start 1 and 2, the example agent
    # (2), the local model (2), the paper scale (2), MCP (1), inspect (3: the install, our loop, react); every row of
    # the table; commands in prose
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    lines = [ln for b in blocks for ln in re.sub(r"\\\n", " ", b).splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(blocks) == 7 and len(lines) == 13, lines
    assert {" ".join(re.sub(r"\s+#\s.*$", "", ln).split()) for ln in lines} <= set(found)
    table = rc.table_commands(text)
    assert len(table) == len(re.findall(r"^\| `", text.split("## Other useful commands")[1].split("\n## ")[0], re.M))
    assert set(table) <= set(found)
    for span in ("apt-get install bubblewrap", "conda env create -f environment.yml", "bash requirements/compile.sh VENV"):
        assert span in found, span
    # the lists name only commands the README shows, each with a reason or an expected output
    for name in ("NOT_RUN", "FRESH_VENV", "STDIN"):
        listed = getattr(rc, name)
        assert set(listed) <= set(found), f"{name} lists commands the README no longer shows: {set(listed) - set(found)}"
        assert all(v for v in listed.values())
    assert len(rc.NOT_RUN) <= 5, "keep the list of commands CI does not run short"
    run = [c for c in rc.readme_commands(text) if c.text not in rc.NOT_RUN and c.number not in rc.CI_STEPS]
    assert len(run) == len(found) - len(rc.NOT_RUN) - 2 and len(run) >= 18


def test_paper_scale_commands_run_as_dry_runs_with_the_paper_agents_keys(monkeypatch):
    """The paper config's agents (gpt, claude, qwen: OpenAI, Anthropic, DashScope) need paid keys, so its
    commands run with -n and those three variables set; the small and local configs need none."""
    rc = _readme_commands()
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DASHSCOPE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    keys = ["ANTHROPIC_API_KEY", "DASHSCOPE_API_KEY", "OPENAI_API_KEY"]
    paper = "snakemake all --profile workflow/profiles/local --cores 32"
    assert rc.paid_keys(paper) == keys
    assert rc.dry_run(paper) == "snakemake -n all --profile workflow/profiles/local --cores 32"
    assert rc.paid_keys("heuresis check-config") == keys
    assert rc.paid_keys("snakemake all --cores 2 --configfile config/quick.yaml") == []
    assert rc.paid_keys("heuresis run-local -- snakemake all --cores 2 --configfile config/quick.yaml config/local.yaml") == []
    assert rc.paid_keys("heuresis show-instance wild/test/0002") == []   # reads no config
    assert rc.config_files("snakemake all --configfile config/quick.yaml x.yaml -n") == [
        "config/config.yaml", "config/quick.yaml", "x.yaml"]


# --- cited design sections -------------------------------------------------------------------------
_CITE = re.compile(r"(design|games)\.md §(\d+(?:\.\d+)?)(?:\s*[-–]\s*(\d+(?:\.\d+)?))?")


def _sections(doc: Path) -> set[str]:
    return set(re.findall(r"^#{2,3} (\d+(?:\.\d+)?) ", doc.read_text(), re.M))


def test_every_cited_section_exists():
    sections = {"design": _sections(DOCS / "design.md"), "games": _sections(DOCS / "games.md")}
    assert {str(n) for n in range(1, 10)} <= sections["design"]
    cited, missing = 0, []
    files = [p for d in ("src", "rules", "tests", "benchmarks", "workflow", "docs") for p in (ROOT / d).rglob("*")
             if p.is_file() and p.suffix in {".py", ".smk", ".md", ".yaml", ".rst", ""}]
    for path in [*files, ROOT / "Snakefile", README]:
        for doc, first, last in _CITE.findall(path.read_text(errors="replace")):
            for n in filter(None, (first, last)):
                cited += 1
                if n not in sections[doc]:
                    missing.append(f"{path.relative_to(ROOT)}: {doc}.md §{n}")
    assert cited > 50
    assert not missing, "cited sections that do not exist:\n" + "\n".join(missing)


def test_readme_quotes_the_paper_configs_bill(paper_config):
    """The README's paper-scale numbers are what check-config computes for config/config.yaml."""
    from heuresis.harness.conditions import grid_plan
    from heuresis.preflight.spend import spend_bounds

    text = " ".join(README.read_text().split())
    m = re.search(r"the paper config plans ([\d,]+) LLM episodes and, with game plays, judgements and leakage "
                  r"probes, at most ([\d,]+) model requests and \$([\d,]+) \(an upper bound", text)
    assert m, "the README's paper-scale paragraph no longer quotes the bill"
    episodes, requests, dollars = (int(g.replace(",", "")) for g in m.groups())
    totals = [r for r in spend_bounds(paper_config) if r.part == "total"]
    assert episodes == sum(r["new_llm_episodes"] for r in grid_plan(paper_config))
    assert requests == sum(r.requests for r in totals)
    assert dollars == round(sum(r.dollars for r in totals))
