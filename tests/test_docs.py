"""The docs stand alone and stay true to the code.

The independent truths are the repository itself: the rule files (every path a rule declares),
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
SECTIONS = ("output", "log", "benchmark")
_RULE = re.compile(r"^(\s*)rule\s*(\w*)\s*:")
_HEADER = re.compile(r"^(\s+)(\w+)\s*:(.*)$")
_STRING = re.compile(r'(f?)"((?:[^"\\]|\\.)*)"')
_MULTIEXT = re.compile(r'multiext\(\s*(f?)"([^"]*)"((?:\s*,\s*"[^"]*")+)\s*,?\s*\)')


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


def _strings(block: str) -> list[str]:
    """Path templates under ``results/`` or ``logs/`` in a section of a rule."""
    out = []
    for m in _MULTIEXT.finditer(block):
        for ext in re.findall(r'"([^"]*)"', m.group(3)):
            out.append(_template(m.group(2) + ext, bool(m.group(1))))
    block = _MULTIEXT.sub("", block)
    for f, text in _STRING.findall(block):
        if text.startswith(("results/", "logs/")):
            out.append(_template(text, bool(f)))
    return out


def parse_rules(text: str) -> list[tuple[str, str, str]]:
    """(rule name template, section, path template) for every path a rule file declares."""
    lines = text.splitlines()
    found, i = [], 0
    while i < len(lines):
        m = _RULE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, name = len(m.group(1)), m.group(2)
        body, i = [], i + 1
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > indent):
            body.append(lines[i])
            i += 1
        sections: dict[str, list[str]] = {}
        current = None
        for line in body:
            h = _HEADER.match(line)
            if h and len(h.group(1)) == indent + 4:
                current = h.group(2)
                sections[current] = [h.group(3)]
            elif current:
                sections[current].append(line)
        if not name:   # rule defined in a loop: the name is an f-string or a loop variable
            raw = "\n".join(sections.get("name", [])).strip()
            s = _STRING.search(raw)
            name = _template(s.group(2), bool(s.group(1))) if s else "{}"
        for section in SECTIONS:
            for path in _strings("\n".join(sections.get(section, []))):
                found.append((name, section, path))
    return found


def rule_paths() -> list[tuple[str, str, str, str]]:
    return [(p.name, *r) for p in sorted((ROOT / "rules").glob("*.smk")) for r in parse_rules(p.read_text())]


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


def test_rule_parser_reads_plain_and_loop_rules():
    text = '''
rule plain:
    input:
        "results/other/in.parquet",
    output:
        data=directory("results/a/{family}/{split}"),
        table=multiext("results/tables/x", ".parquet", ".md"),
    log:
        "logs/a/{family}.log",
    script:
        "../workflow/scripts/a.py"


for _k, _batch in enumerate(B):

    rule:
        name:
            f"batch_{_k}"
        output:
            **{a: f"results/b/{a}/{{family}}/shard-{{shard}}.parquet" for a in _batch},
        benchmark:
            f"results/benchmarks/b/batch{_k}/{{family}}.tsv"
        params:
            path="results/not/an/output.parquet",
'''
    assert sorted(parse_rules(text)) == sorted([
        ("plain", "output", "results/a/{}/{}"),
        ("plain", "output", "results/tables/x.parquet"),
        ("plain", "output", "results/tables/x.md"),
        ("plain", "log", "logs/a/{}.log"),
        ("batch_{}", "output", "results/b/{}/{}/shard-{}.parquet"),
        ("batch_{}", "benchmark", "results/benchmarks/b/batch{}/{}.tsv"),
    ])


def test_the_rules_declare_paths():
    found = rule_paths()
    names = {r[1] for r in found}
    # every rule file contributes, and the parser sees the rules written out and those made in loops
    assert {r[0] for r in found} == {p.name for p in (ROOT / "rules").glob("*.smk")} - {"common.smk"}
    assert {"instances", "headroom", "episodes", "games_plays", "references_{}", "{}"} <= names
    assert ("headroom.smk", "headroom", "output", "results/headroom/selection.parquet") in found


def test_every_rule_path_is_in_the_artifact_map():
    rows = artifact_rows()
    missing = []
    for file, rule, section, path in rule_paths():
        rp, pp = _pattern(rule), _pattern(path)
        if not any(any(rp.fullmatch(r) for r in row["rules"]) and any(pp.fullmatch(p) for p in row["paths"])
                   for row in rows):
            missing.append(f"rules/{file}: rule {rule} {section} {path}")
    assert not missing, "docs/artifacts.md has no row for:\n" + "\n".join(missing)


def test_every_rule_in_the_artifact_map_exists():
    rules = {r[1] for r in rule_paths()}
    unknown = [(name, row["line"]) for row in artifact_rows() for name in row["rules"]
               if not any(_pattern(r).fullmatch(name) for r in rules)]
    assert not unknown, f"docs/artifacts.md names rules that rules/*.smk do not define: {unknown}"


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


def test_every_readme_command_is_run_by_ci_or_listed_with_its_reason():
    """Every command the README shows (code blocks, the commands table, commands in prose) is one CI runs:
    as written, in a fresh venv, with its input, as a dry run for paid keys, or listed with a reason."""
    rc = _readme_commands()
    text = README.read_text()
    found = [c.text for c in rc.readme_commands(text)]
    # counted by hand from the README's blocks: the locked install, Quick start 1 and 2, the example agent
    # (2), the local model (2), the paper scale (2), MCP (1); every row of the table; commands in prose
    blocks = re.findall(r"^```bash\n(.*?)^```", text, re.S | re.M)
    lines = [ln for b in blocks for ln in re.sub(r"\\\n", " ", b).splitlines() if ln.strip() and not ln.startswith("#")]
    assert len(blocks) == 6 and len(lines) == 10, lines
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
    from heuresis.config.planning import spend_bounds
    from heuresis.harness.conditions import grid_plan

    text = " ".join(README.read_text().split())
    m = re.search(r"the paper config plans ([\d,]+) LLM episodes and, with game plays, judgements and leakage "
                  r"probes, at most ([\d,]+) model requests and \$([\d,]+) \(an upper bound", text)
    assert m, "the README's paper-scale paragraph no longer quotes the bill"
    episodes, requests, dollars = (int(g.replace(",", "")) for g in m.groups())
    totals = [r for r in spend_bounds(paper_config) if r.part == "total"]
    assert episodes == sum(r["new_llm_episodes"] for r in grid_plan(paper_config))
    assert requests == sum(r.requests for r in totals)
    assert dollars == round(sum(r.dollars for r in totals))
