"""The paper targets' registry: each target declared once, with a caption file, a builder and its stage.

Independent truths: the files under ``workflow/report/`` (each caption file belongs to a target, each
target has one), the stage modules (a provenance stage is a rule file's stage), and a table built
through the one entry point, read back from disk.
"""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from conftest import ROOT

from heuresis.artifacts.paths import TABLE_EXTS
from heuresis.targets.build import TargetFailed, build, caption_text
from heuresis.targets.builders import BUILDERS
from heuresis.targets.registry import (
    INPUT_NAMES,
    PARAM_NAMES,
    TARGETS,
    Target,
    caption_file,
    paper_targets,
    target_files,
    target_named,
)
from heuresis.targets.table1 import load_table1

REPORT = ROOT / "workflow" / "report"
STAGES = {p.stem for p in (ROOT / "rules").glob("*.smk")} - {"common"}


def test_every_target_has_its_caption_file_and_every_caption_file_its_target():
    targets = paper_targets(["antenna", "zone", "weather"])
    missing = [t.name for t in targets if not (ROOT / caption_file(t)).is_file()]
    assert not missing, f"targets without a caption file under workflow/report/: {missing}"
    used = {t.caption for t in targets}
    orphans = sorted(p.stem for p in REPORT.glob("*.rst") if p.stem != "workflow" and p.stem not in used)
    assert not orphans, f"caption files no target uses: {orphans}"


def test_every_target_names_a_builder_a_stage_and_known_inputs():
    for t in TARGETS.values():
        assert t.builder in BUILDERS, t.name
        assert t.stage in STAGES | {"games"}, (t.name, t.stage)
        assert set(t.inputs) <= set(INPUT_NAMES) and set(t.params) <= set(PARAM_NAMES), t.name
    # the stages of the targets that summarize a stage's results are that stage's
    stages = {name: TARGETS[name].stage for name in ("figure1a", "figure1b", "figure8", "table5", "table2", "table7")}
    assert stages == {"figure1a": "leakage", "figure1b": "saturation", "figure8": "repairs", "table5": "verification",
                      "table2": "headroom", "table7": "analysis"}


def test_every_games_target_has_its_own_builder_and_every_builder_its_target():
    from heuresis.stages.games.analysis import GAMES_BUILDERS
    from heuresis.targets.registry import GAMES_FAMILY_TABLE

    games = {t.name for t in TARGETS.values() if t.builder == "games_target"} | {GAMES_FAMILY_TABLE.name}
    assert games == set(GAMES_BUILDERS)


def test_a_games_family_table_is_found_by_name():
    t = target_named("games_zone")
    assert (t.name, t.caption, t.kind) == ("games_zone", "games_family", "table")
    with pytest.raises(KeyError, match="no target named 'table99'"):
        target_named("table99")


def test_a_target_declaration_is_checked():
    with pytest.raises(ValueError, match="kind 'chart'"):
        Target("x", "chart", "headroom", "table1")
    with pytest.raises(ValueError, match="unknown input or param names"):
        Target("x", "table", "headroom", "table1", inputs=("nothing",))


def test_a_table_is_written_with_its_caption_file_and_provenance(tmp_path):
    target = TARGETS["table1"]
    outputs = {ext: str(tmp_path / f"table1.{ext}") for ext in TABLE_EXTS}
    caption = caption_text((ROOT / caption_file(target)).read_text())
    lines = []
    build(target, {}, outputs, {"table1": load_table1()}, caption, lines.append)
    meta = pq.read_schema(outputs["parquet"]).metadata
    written = meta[b"heuresis.caption"].decode()
    assert written.startswith(caption) and "Requirements: D1" in written   # the file's text, then the run's facts
    assert (tmp_path / "table1.md").read_text().startswith(f"**{written}**")
    assert json.loads(meta[b"heuresis.provenance"])["stage"] == "targets"
    assert lines == [f"table1: {len(pq.read_table(outputs['parquet']))} benchmarks"]
    assert set(target_files(target)) == set(TABLE_EXTS)


def test_a_failed_required_check_fails_table5_after_writing_it(tmp_path):
    """Table 5 from one failed record of a required check: the files are written, then the job fails."""
    import pandas as pd

    from heuresis.stages import verification as V

    record = tmp_path / "dsep.parquet"
    V.write_check(V.CheckResult(check="dsep", title="d-separation", reference="networkx", scale="small",
                                scale_description="3 DAGs", n_cases=3, disagreements=1, passed=False,
                                tolerance="exact", finding="one disagreement"), record, tmp_path / "examples")
    target = TARGETS["table5"]
    outputs = {name: str(tmp_path / path.rsplit("/", 1)[-1]) for name, path in target_files(target).items()}
    lines = []
    with pytest.raises(TargetFailed, match="required check"):
        build(target, {"verification_records": [str(record)]}, outputs,
              {"verification": {"required": ["dsep"], "scale": "small"}}, "Table 5.", lines.append)
    assert len(pd.read_parquet(outputs["parquet"])) == 1 and (tmp_path / "checks.parquet").exists()
    assert any("Table 5. Scale: small." in line for line in lines)
