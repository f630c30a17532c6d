"""Table 1 is the data file, rendered: checked cell by cell against an independent read of it."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml

from heuresis.targets.table1 import load_table1, table1, table1_path

DATA = Path(__file__).resolve().parents[1] / "src/heuresis/data/table1.yaml"


def _raw():
    return yaml.safe_load(DATA.read_text())


def _check_numbers(rows: list[dict]) -> None:
    raw = _raw()
    assert [r["benchmark"] for r in rows] == [b["name"] for b in raw["benchmarks"]]
    for row, b in zip(rows, raw["benchmarks"]):
        assert row["reference"] == b["reference"]
        for req in ("D1", "D2", "D3", "D4"):
            assert row[req] == b["cells"][req]["value"]
            assert row[f"{req}_note"] == b["cells"][req].get("note", "")


def test_bundled_file_is_the_repository_file():
    assert table1_path().resolve() == DATA.resolve()


def test_rendered_numbers_match_the_file():
    numbers, display = table1(load_table1())
    _check_numbers(numbers.to_dict("records"))
    assert len(display) == len(numbers)


def test_every_cell_is_a_known_value():
    for b in _raw()["benchmarks"]:
        assert set(b["cells"]) == {"D1", "D2", "D3", "D4"}
        for cell in b["cells"].values():
            assert cell["value"] in {"yes", "partial", "no", "—"} and set(cell) <= {"value", "note"}


def test_bad_file_names_the_key(tmp_path):
    raw = _raw()
    raw["benchmarks"][1]["cells"]["D3"]["value"] = "maybe"
    del raw["benchmarks"][2]["cells"]["D4"]
    bad = tmp_path / "table1.yaml"
    bad.write_text(yaml.safe_dump(raw, allow_unicode=True))
    with pytest.raises(ValueError) as err:
        load_table1(bad)
    assert "benchmarks.1 (Corr2Cause).cells.D3.value: 'maybe'" in str(err.value)
    assert "benchmarks.2 (CausalQuest).cells" in str(err.value)
    bad.write_text("requirements: {}\nbenchmarks:\n  - {name: X, reference: r, input: i,"
                   " cells: {D1: {value: no, note: a, b}}}\n")
    with pytest.raises(ValueError, match="unknown fields"):
        load_table1(bad)


def test_table1_built_by_the_tiny_workflow(tiny_run):
    _check_numbers(pq.read_table(tiny_run / "results/tables/table1.parquet").to_pylist())
    md = (tiny_run / "results/tables/table1.md").read_text()
    for b in _raw()["benchmarks"]:
        assert b["name"] in md
    assert (tiny_run / "results/tables/table1.tex").read_text().startswith("\\begin{table}")
