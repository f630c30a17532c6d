"""benchmarks/table2_scale.py gives the workflow's Table 2 columns (tiny config, the shared tiny run).

The independent truth is the workflow itself: the tiny run (conftest ``tiny_run``) built
``results/tables/table2.parquet`` and ``table2_paper.parquet`` through the instances, references,
headroom and table rules; the script, on the same config files, must give the same instance files,
the same PC-KCI references, and equal numbers in every Table 2 column it computes.
"""

from __future__ import annotations

import importlib.util
import re

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import ROOT

# what the script computes: Table 2's columns of PC-KCI and the oracle (the kinds column is text)
TABLE2_COLUMNS = ["family", "n_instances", "n_failed", "wrong_deletions_mean", "share_without_wrong_deletion",
                  "oracle_minus_pc_kci", "oracle_minus_pc_kci_lo", "oracle_minus_pc_kci_hi"]


def _script():
    spec = importlib.util.spec_from_file_location("table2_scale", ROOT / "benchmarks/table2_scale.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _configs(wd):
    """The config files of the tiny run: the Snakefile's configfile, then --configfile's."""
    return [str(wd / "config" / f) for f in ("config.yaml", "quick.yaml", "tiny.yaml")]


def assert_same_table2(workflow_results, script_out) -> int:
    """Table 2 and Table 2 beside the published one agree between the workflow and the script."""
    wf = pq.read_table(workflow_results / "tables/table2.parquet").to_pandas()
    ours = pq.read_table(script_out / "table2.parquet").to_pandas()
    pd.testing.assert_frame_equal(ours[TABLE2_COLUMNS], wf[TABLE2_COLUMNS], check_exact=True)
    wf_cmp = pq.read_table(workflow_results / "tables/table2_paper.parquet").to_pandas()
    ours_cmp = pq.read_table(script_out / "table2_paper.parquet").to_pandas()
    pd.testing.assert_frame_equal(ours_cmp, wf_cmp, check_exact=True)
    assert (script_out / "table2_paper.md").read_text().split("\n")[2:] == \
        (workflow_results / "tables/table2_paper.md").read_text().split("\n")[2:]   # rows (not the caption)
    return len(wf)


def test_script_gives_the_workflows_table2_columns(tiny_run, tmp_path, capsys):
    mod = _script()
    out, work = tmp_path / "out", tmp_path / "work"
    mod.main(["run", "--configfile", *_configs(tiny_run), "--out", str(out), "--work", str(work)])
    results = tiny_run / "results"
    families = list(pq.read_table(results / "tables/table2.parquet").column("family").to_pylist())[:-1]
    assert families and all((out / f"{f}.csv").exists() for f in families)
    for fam in families:
        # the same instance files (the instances rule's digests) ...
        for name in ("instances/{}/test/index.parquet", "truth/{}/test/graphs.parquet"):
            a = pq.read_table(results / name.format(fam)).to_pandas()
            b = pq.read_table(work / name.format(fam)).to_pandas()
            pd.testing.assert_frame_equal(a, b)
        # ... and the same PC-KCI references (graph and deletion log; the run time differs)
        wf_refs = [r for p in sorted((results / f"references/pc_kci/{fam}/test").glob("shard-*.parquet"))
                   for r in pq.read_table(p).to_pylist()]
        assert wf_refs
        for row in wf_refs:
            [mine] = pq.read_table(work / f"references/pc_kci/{fam}/test/instance-{row['instance']:04d}.parquet"
                                   ).to_pylist()
            for key in ("instance_id", "status", "graph", "deletions", "n_tests", "f1"):
                assert mine[key] == row[key], (fam, row["instance"], key)
    assert assert_same_table2(results, out) == len(families) + 1      # every family and `all`
    # a nontrivial check: the tiny run has wrong deletions somewhere, and a positive oracle gain
    t2 = pq.read_table(out / "table2.parquet").to_pandas()
    assert t2["wrong_deletions_mean"].max() > 0 and t2["oracle_minus_pc_kci"].max() > 0
    capsys.readouterr()

    # resume: a finished instance is not rerun; a dropped one and one with a stale key are
    fam = families[0]
    csv = out / f"{fam}.csv"
    df = pd.read_csv(csv, float_precision="round_trip")
    df = df[df["instance"] != 0]
    df.loc[df["instance"] == 1, "key"] = "stale"
    df.to_csv(csv, index=False)
    mod.main(["run", "--configfile", *_configs(tiny_run), "--out", str(out), "--work", str(work)])
    log = capsys.readouterr().out
    rerun = re.findall(r"\] (\w+/test/\d+): ok", log)
    assert sorted(rerun) == [f"{fam}/test/0000", f"{fam}/test/0001"]
    assert f"{fam}: 0 of 2 test instances already done" in log
    assert_same_table2(results, out)


def test_partial_run_and_bad_arguments(tmp_path, capsys):
    mod = _script()
    cfg = [str(ROOT / "config/config.yaml"), str(ROOT / "config/quick.yaml")]
    out = tmp_path / "out"
    args = ["--configfile", *cfg, "--out", str(out), "--work", str(tmp_path / "work")]
    mod.main(["run", "--families", "wild", "--instances", "1", *args])
    t2 = pq.read_table(out / "table2.parquet").to_pandas().set_index("family")
    assert list(t2.index) == ["wild", "all"] and t2.loc["wild", "n_instances"] == 1
    rows = pd.read_csv(out / "wild.csv")
    assert sorted(rows["method"]) == ["oracle", "pc_kci"]
    pc, oracle = (rows[rows["method"] == m].iloc[0] for m in ("pc_kci", "oracle"))
    # the oracle only restores what PC-KCI wrongly deleted: F1 gain iff a wrong deletion
    assert (oracle["f1"] > pc["f1"]) == (pc["n_wrong_deletions"] > 0) and oracle["f1"] >= pc["f1"]
    assert np.isclose(t2.loc["wild", "oracle_minus_pc_kci"], oracle["f1"] - pc["f1"])
    assert "test instances: wild 1" in (out / "table2_paper.md").read_text()
    [prior] = mod.by_prior(out, ["wild"]).to_dict("records")
    assert prior["n_instances"] == 1 and prior["wrong_deletions_mean"] == pc["n_wrong_deletions"]
    assert prior["prior"] == pq.read_table(tmp_path / "work/truth/wild/test/graphs.parquet").column("prior")[0].as_py()
    with pytest.raises(SystemExit, match="unknown families"):
        mod.main(["table", "--families", "nope", *args])
    with pytest.raises(SystemExit, match="--instances 9"):
        mod.main(["run", "--instances", "9", *args])
    with pytest.raises(SystemExit, match="no finished instance"):
        mod.main(["table", "--families", "lg", *args])
