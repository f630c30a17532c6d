"""`heuresis provenance`: lineage of an artifact back to config and seeds, and staleness."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import pytest
from conftest import ROOT

from heuresis.artifacts.lineage import lineage, read_provenance
from heuresis.artifacts.provenance import provenance_record
from heuresis.artifacts.report import save_figure
from heuresis.cli import main
from heuresis.preflight import load_config
from heuresis.stages.references import run_shard


@pytest.fixture()
def chain(tmp_path, monkeypatch):
    """instances (lg/dev) -> a pc_fisherz reference shard -> a figure, built in tmp_path."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tiny.yaml").write_text("instances: {d: 4, n: 100, n_dev: 2, n_test: 1}\n")
    cfgs = [str(ROOT / "config/config.yaml"), str(ROOT / "config/quick.yaml"), "tiny.yaml"]
    args = ["instances", "--no-base", "--family", "lg", "--split", "dev", "--results", "results"]
    for c in cfgs:
        args += ["--config", c]
    assert main(args) == 0
    cfg = load_config(*cfgs)
    shard = Path("results/references/pc_fisherz/lg/dev/shard-000.parquet")
    run_shard("pc_fisherz", cfg["references"]["algorithms"]["pc_fisherz"], "lg", "dev", [0, 1],
              data_dir="results/instances/lg/dev", truth_dir="results/truth/lg/dev", out=shard,
              grades=cfg["grades"])
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    save_figure(fig, "results/figures/demo", provenance=provenance_record(
        stage="targets", config={"demo": 1}, seeds={"bootstrap": 3}, inputs=[shard]))
    plt.close(fig)
    return tmp_path


def test_lineage_reaches_config_and_seeds(chain):
    node = lineage("results/figures/demo.png")
    assert node.source.name == "demo.provenance.json" and not node.stale
    assert node.record["seeds"] == {"bootstrap": 3}
    (shard_check,) = node.inputs
    assert shard_check.status == "ok"
    ref = shard_check.lineage
    assert ref.record["stage"] == "references"
    assert {Path(i.recorded_path).name for i in ref.inputs} == {"graphs.parquet", "index.parquet"}
    roots = [i.lineage for i in ref.inputs]
    for root in roots:                       # the instance stage: config slice and seeds, no inputs
        assert root.record["stage"] == "instances" and root.inputs == []
        assert root.record["seeds"] and root.record["config_digest"]
    rec = ref.record
    for key in ("config_digest", "code", "packages", "seeds", "inputs", "command", "host", "started", "finished"):
        assert key in rec, key
    assert set(rec["code"]) == {"commit", "dirty"}


def test_cli_prints_lineage_and_flags_a_changed_input(chain, capsys):
    assert main(["provenance", "results/figures/demo.pdf"]) == 0
    out = capsys.readouterr().out
    assert "stage:    references" in out and "stage:    instances" in out
    assert "none (a root: config and seeds only)" in out and "up to date" in out
    assert "STALE" not in out

    # the truth table is rewritten (same schema, other bytes): everything downstream is stale
    graphs = Path("results/truth/lg/dev/graphs.parquet")
    import pyarrow.parquet as pq
    table = pq.read_table(graphs)
    pq.write_table(table.replace_schema_metadata({**table.schema.metadata, b"tampered": b"1"}), graphs)
    assert main(["provenance", "results/figures/demo.pdf"]) == 1
    out = capsys.readouterr().out
    assert "STALE (changed)" in out
    assert "results/truth/lg/dev/graphs.parquet (changed)" in out.split("STALE:")[1]
    node = lineage("results/references/pc_fisherz/lg/dev/shard-000.parquet")
    assert node.stale and [i.status for i in node.inputs if i.recorded_path.endswith("graphs.parquet")] == ["changed"]


def test_missing_input_is_stale_and_json_output(chain, capsys):
    Path("results/instances/lg/dev/index.parquet").rename("results/index.moved")
    assert main(["provenance", "--json", "results/references/pc_fisherz/lg/dev/shard-000.parquet"]) == 1
    tree = json.loads(capsys.readouterr().out)
    assert tree["stale"] is True
    assert {Path(i["path"]).name: i["status"] for i in tree["inputs"]} == {"graphs.parquet": "ok",
                                                                          "index.parquet": "missing"}


def test_instance_data_file_is_checked_against_its_index(chain, capsys):
    data = Path("results/instances/lg/dev/0001/data.parquet")
    assert main(["provenance", str(data)]) == 0
    assert "record of the split's index" in capsys.readouterr().out
    data.write_bytes(data.read_bytes()[:-10])                 # truncated
    node = lineage(data)
    assert node.stale and node.inputs[0].status == "changed"


def test_artifact_without_provenance_is_an_error(tmp_path, capsys):
    import pyarrow as pa
    import pyarrow.parquet as pq
    pq.write_table(pa.table({"x": [1]}), tmp_path / "plain.parquet")
    assert main(["provenance", str(tmp_path / "plain.parquet")]) == 2
    assert "carries no 'heuresis.provenance' metadata" in capsys.readouterr().err
    with pytest.raises(Exception, match="does not exist"):
        read_provenance(tmp_path / "fig.png")


def test_one_row_shows_only_its_inputs_and_shared_facts_print_once(chain, capsys):
    """A table whose inputs are two families' shards: --row family=lg keeps lg's and leaves anm's out; the
    packages every record shares are printed once; a rule's script is named as shipped."""
    import pandas as pd

    from heuresis.artifacts.provenance import stable_command
    from heuresis.artifacts.report import write_paper_table

    other = Path("results/references/pc_fisherz/anm/dev/shard-000.parquet")
    other.parent.mkdir(parents=True)
    other.write_bytes(Path("results/references/pc_fisherz/lg/dev/shard-000.parquet").read_bytes())
    numbers = pd.DataFrame([{"family": "lg", "method": "pc_fisherz", "f1": 0.5},
                            {"family": "anm", "method": "pc_fisherz", "f1": 0.6}])
    prov = provenance_record(stage="targets", config={"demo": 1}, inputs=[
        "results/references/pc_fisherz/lg/dev/shard-000.parquet", other])
    write_paper_table(numbers, numbers.astype(str), Path("results/tables/demo"), caption="demo", provenance=prov)
    assert main(["provenance", "results/tables/demo.md", "--row", "family=lg,method=pc_fisherz"]) == 0
    out = capsys.readouterr().out
    assert "  f1: 0.5" in out and "anm/dev" not in out and "(1 of 2 left out: they bear on other rows)" in out
    assert out.count("packages:") == 1 and "(every artifact below)" in out
    assert main(["provenance", "results/tables/demo.md", "--row", "family=wld"]) == 2
    assert "0 rows of results/tables/demo.parquet match" in capsys.readouterr().err
    assert stable_command(["/w/.snakemake/scripts/tmpab12cd.episodes.py", "x"]) == \
        "snakemake script workflow/scripts/episodes.py x"
