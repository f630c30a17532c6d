"""The run's secrets (heuresis.artifacts.sealing): masks keyed by a salt no agent knows, a sealed test split.

What an agent could recompute from public values (the config, the repository's seed, the agent,
condition and instance ids) must not match what the harness hides; what the harness recorded must
be reproducible by the harness itself (resume) and verifiable by anyone once a seed is published.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from conftest import small_lg_split

from heuresis.artifacts.io import read_metadata, read_table
from heuresis.artifacts.report import write_paper_table
from heuresis.artifacts.schemas import EPISODES
from heuresis.artifacts.sealing import (
    PUBLIC_SALT,
    SecretUnavailable,
    commitment,
    disclosure,
    disclosure_caption,
    draw_secret,
    read_salt,
    require_test_seed,
    salt_digest,
    write_commitment,
    write_salt,
)
from heuresis.cli import main
from heuresis.harness.episode import algorithm_mapping, episode_seed
from heuresis.stages.episodes import run_episode_shard
from heuresis.stages.instances import generate_instance, instance_spec, load_data, load_truth, write_split

COND = "full-guided-p0-none-standard-once-r0"
SALT = "5e" * 32          # a fixed salt the agent does not know (fixed: the test is deterministic)
INDICES = [0, 1, 2, 3]


@pytest.fixture(scope="module")
def small(quick_config, tmp_path_factory):
    return small_lg_split(quick_config, tmp_path_factory.mktemp("sealing"), len(INDICES))


def _run(small, name, salt=SALT, **kw):
    cfg, root = small["cfg"], small["root"]
    out = root / "episodes" / name / "shard-000.parquet"
    run_episode_shard("shortcut", {"kind": "shortcut"}, COND, "lg", "test", INDICES, data_dir=small["data"],
                      truth_dir=small["truth"], pc_kci_paths=[small["ref"]], episodes_cfg=cfg["episodes"],
                      menu=cfg["references"]["algorithms"], grades=cfg["grades"], seed=cfg["seed"], out=out,
                      calls_out=out.with_name("shard-000.calls.parquet"),
                      requests_out=out.with_name("shard-000.requests.parquet"),
                      transcripts_dir=root / "transcripts" / name, salt=salt, **kw)
    return read_table(out, EPISODES).to_pandas(), out


def _agent_side_maps(cfg, instance_id):
    """What an agent with the repository and the config can compute: the public-value hash the harness
    once used, and the keyed hash under the documented public salt."""
    menu = list(cfg["references"]["algorithms"])
    old = hashlib.sha256(f"{cfg['seed']}/shortcut/{COND}/{instance_id}".encode()).digest()
    seeds = [int.from_bytes(old[:4], "little"), episode_seed(PUBLIC_SALT, cfg["seed"], "shortcut", COND, instance_id)]
    return [algorithm_mapping(menu, np.random.default_rng(s)) for s in seeds]


def test_masks_are_not_recomputable_from_public_values(small):
    ep, out = _run(small, "salted")
    cfg, menu = small["cfg"], list(small["cfg"]["references"]["algorithms"])
    for row in ep.itertuples():
        recorded = json.loads(row.algorithm_map)
        # the harness, holding the salt, reproduces it (audit)
        assert recorded == algorithm_mapping(menu, np.random.default_rng(
            episode_seed(SALT, cfg["seed"], "shortcut", COND, row.instance_id)))
        for guess in _agent_side_maps(cfg, row.instance_id):
            assert guess != recorded, row.instance_id
    # the salt's digest is recorded, the salt itself nowhere in what the job wrote
    prov = json.loads(read_metadata(out)["heuresis.provenance"])
    assert prov["seeds"]["salt_sha256"] == salt_digest(SALT) and prov["config"]["salt"] == "drawn"
    transcript = json.loads((small["root"] / "transcripts/salted/0000.json").read_text())
    assert transcript["secrets"] == {"salt": "drawn", "salt_sha256": salt_digest(SALT)}
    for p in (small["root"] / "episodes/salted").rglob("*"):
        if p.is_file():
            assert SALT.encode() not in p.read_bytes(), p
    for p in (small["root"] / "transcripts/salted").rglob("*.json"):
        assert SALT not in p.read_text(), p


def test_a_resumed_run_gets_the_masks_of_its_first_attempt(small):
    full, _ = _run(small, "whole")

    def die_after_two(i):
        if i == 1:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(small, "resumed", after_episode=die_after_two)
    redone = []
    resumed, _ = _run(small, "resumed", after_episode=redone.append)
    assert redone == [2, 3]                                    # the first two came from the checkpoint
    assert list(resumed.algorithm_map) == list(full.algorithm_map)
    assert list(resumed.seed) == list(full.seed)
    # a checkpoint made under another salt is not resumed: its masks would be another run's
    redone.clear()
    other, _ = _run(small, "resumed", salt="a1" * 32, after_episode=redone.append)
    assert redone == INDICES and list(other.algorithm_map) != list(full.algorithm_map)


def test_the_salt_is_drawn_once_and_kept(tmp_path):
    path = tmp_path / "truth" / "salt.json"
    first = write_salt(path)
    assert len(first) == 64 and int(first, 16) >= 0
    assert write_salt(path) == first == read_salt(path)       # a second call keeps the first draw
    assert path.stat().st_mode & 0o777 == 0o400                 # its owner reads it, nobody else
    os.chmod(path, 0o644)                                       # a tree copied with a looser mode
    assert read_salt(path) == first and path.stat().st_mode & 0o777 == 0o400
    assert json.loads(path.read_text())["sha256"] == salt_digest(first)
    assert write_salt(tmp_path / "other.json") != first        # another results tree: another salt
    with pytest.raises(SecretUnavailable, match="no salt"):
        read_salt(tmp_path / "absent.json")


# --- the sealed test split ----------------------------------------------------------------------------
def _sealed_cfg(paper_config):
    cfg = copy.deepcopy(paper_config)
    cfg["instances"].update(d=5, n=100)
    assert cfg["secrets"]["test_seed"] == "sealed" and cfg["secrets"]["salt"] == "drawn"   # the paper's regime
    return cfg


def test_the_repository_seed_does_not_reproduce_a_sealed_test_split(paper_config, tmp_path):
    cfg = _sealed_cfg(paper_config)
    seed = draw_secret()
    env = {"HEURESIS_TEST_SEED": seed}
    spec = instance_spec(cfg, "lg", "test", environ=env)
    assert spec["seed"] == {"sealed": commitment(seed)}        # the commitment, never the seed
    data, truth = tmp_path / "instances/lg/test", tmp_path / "truth/lg/test"
    write_split(spec, "lg", "test", 3, data, truth, test_seed=seed)
    public = instance_spec(cfg, "lg")                          # what anyone regenerates from the repository
    for i in range(3):
        regenerated = generate_instance(public, "lg", "test", i)
        assert not np.allclose(load_data(data, i), regenerated.data), i
        assert load_truth(truth)[i].record["data_sha256"] != hashlib.sha256(regenerated.data.tobytes()).hexdigest()
    # the seed is in no file the split wrote; its commitment is in the provenance
    for p in tmp_path.rglob("*.parquet"):
        assert seed.encode() not in p.read_bytes(), p
    prov = json.loads(read_metadata(data / "index.parquet")["heuresis.provenance"])
    assert prov["seeds"]["test_seed_commitment"] == commitment(seed) and prov["seeds"]["entropy"] == "sealed"
    # dev is public and unchanged; adding test instances changes none of the first ones
    dev = instance_spec(cfg, "lg", "dev", environ=env)
    assert dev == public
    assert np.array_equal(generate_instance(dev, "lg", "dev", 0).data, generate_instance(public, "lg", "dev", 0).data)
    write_split(spec, "lg", "test", 4, tmp_path / "more/lg/test", tmp_path / "more_truth/lg/test", test_seed=seed)
    for i in range(3):
        assert np.array_equal(load_data(data, i), load_data(tmp_path / "more/lg/test", i))
    # a different seed than the one committed is refused, and no seed at all too
    with pytest.raises(SecretUnavailable, match="does not match the commitment"):
        write_split(spec, "lg", "test", 1, tmp_path / "x", tmp_path / "y", test_seed=draw_secret())
    with pytest.raises(SecretUnavailable, match="its seed must be given"):
        write_split(spec, "lg", "test", 1, tmp_path / "x", tmp_path / "y")


def test_one_truth_file_unseals_no_other_instance_and_no_variant(paper_config, tmp_path):
    """What another user (or a published truth file) learns from one sealed instance's truth row: its own
    entropy, which rebuilds that instance, and from which neither a later instance nor the games' sealed
    variants can be drawn (the attack: rebuild instance 3, not yet built, from instance 0's recorded seed)."""
    import hmac

    from heuresis.stages.games.variants import variant_entropy
    from heuresis.stages.instances import instance_seed

    cfg = _sealed_cfg(paper_config)
    seed = draw_secret()
    spec = instance_spec(cfg, "lg", "test", environ={"HEURESIS_TEST_SEED": seed})
    write_split(spec, "lg", "test", 1, tmp_path / "data", tmp_path / "truth", test_seed=seed)
    row = load_truth(tmp_path / "truth")[0].record
    leaked = int(row["seed_entropy"])
    # the derivation as documented (docs/provenance.md), computed here by hand
    key = hashlib.sha256(("heuresis-test-entropy:" + seed).encode()).digest()
    assert leaked == int.from_bytes(hmac.new(key, b"instance:lg/test/0000", hashlib.sha256).digest(), "little")
    # the recorded seed rebuilds its own instance ...
    own = np.random.SeedSequence(entropy=leaked, spawn_key=tuple(row["seed_spawn_key"]))
    assert own.entropy == instance_seed(leaked, "lg", "test", 0).entropy
    public = copy.deepcopy(instance_spec(cfg, "lg"))
    rebuilt = generate_instance({**public, "seed": leaked}, "lg", "test", 0)
    assert np.allclose(rebuilt.data, load_data(tmp_path / "data", 0))
    # ... and no other: instance 3 drawn from it is not the sealed instance 3
    sealed3 = generate_instance(spec, "lg", "test", 3, test_seed=seed)
    guessed3 = generate_instance({**public, "seed": leaked}, "lg", "test", 3)
    assert not np.allclose(guessed3.data, sealed3.data)
    assert int(load_truth(tmp_path / "truth")[0].record["seed_entropy"]) != sealed3.entropy
    # the games' sealed variants draw from a derivation of their own, neither the leaked entropy nor the old digest
    variants = variant_entropy({"test_seed": "sealed", "commitment": commitment(seed)}, seed)
    whole = int.from_bytes(hashlib.sha256(("heuresis-test-entropy:" + seed).encode()).digest(), "little")
    assert variants not in (leaked, sealed3.entropy, whole)
    assert variants == int.from_bytes(hmac.new(key, b"games-test-variants", hashlib.sha256).digest(), "little")


def test_a_commitment_verifies_after_rotation(paper_config, tmp_path, capsys):
    """A period's seed is sealed, its commitment published with the results; after the period the
    seed is published, and anyone checks it against the commitment and regenerates the split."""
    cfg = _sealed_cfg(paper_config)
    seed = draw_secret()
    spec = instance_spec(cfg, "lg", "test", environ={"HEURESIS_TEST_SEED": seed})
    write_split(spec, "lg", "test", 2, tmp_path / "i", tmp_path / "t", test_seed=seed)
    recorded = json.loads(read_metadata(tmp_path / "i/index.parquet")["heuresis.provenance"])["seeds"]
    published = recorded["test_seed_commitment"]
    assert main(["verify-seed", seed, published]) == 0 and "ok" in capsys.readouterr().out
    assert main(["verify-seed", seed.upper(), published]) == 0        # hex case does not matter
    assert main(["verify-seed", draw_secret(), published]) == 1 and "MISMATCH" in capsys.readouterr().out
    # the next period's seed has another commitment; the published one regenerates its split exactly
    nxt = draw_secret()
    assert commitment(nxt) != published
    again = instance_spec(cfg, "lg", "test", environ={"HEURESIS_TEST_SEED": seed})
    assert np.array_equal(generate_instance(again, "lg", "test", 1, seed).data, load_data(tmp_path / "i", 1))
    # the commitment's documented format: sha256 of "heuresis-test-seed:" + seed, in hex
    assert published == hashlib.sha256(f"heuresis-test-seed:{seed}".encode()).hexdigest()


def test_draw_seed_prints_a_seed_and_its_commitment(capsys):
    assert main(["draw-seed"]) == 0
    lines = dict(line.split() for line in capsys.readouterr().out.splitlines())
    assert len(lines["seed"]) == 64 and lines["commitment"] == commitment(lines["seed"])


def test_a_commitment_record_binds_the_seed_before_the_run(paper_config, tmp_path, capsys, monkeypatch):
    """Commit, run, reveal: no test split without a record of the seed's commitment; the record keeps the
    first seed committed; captions carry its date; the revealed seed verifies against it."""
    cfg = _sealed_cfg(paper_config)
    record_path = tmp_path / "seal" / "commitment.json"
    cfg["secrets"]["commitment_file"] = str(record_path)
    seed = draw_secret()
    env = {"HEURESIS_TEST_SEED": seed}
    with pytest.raises(SecretUnavailable, match="no commitment record; `heuresis seal commit` writes it"):
        require_test_seed(cfg, env)
    assert disclosure(cfg, env)["committed"] is None
    record = write_commitment(seed, record_path, config_digest="cd" * 32, period="2027H1", now="2027-01-04T09:12:00Z")
    assert json.loads(record_path.read_text()) == record == {
        "kind": "heuresis-seal-commitment", "commitment": hashlib.sha256(f"heuresis-test-seed:{seed}".encode()).hexdigest(),
        "config_digest": "cd" * 32, "created": "2027-01-04T09:12:00Z", "period": "2027H1"}
    assert require_test_seed(cfg, env) == seed
    # another seed cannot be swapped in: neither built nor committed over the published record
    other = draw_secret()
    with pytest.raises(SecretUnavailable, match="does not match the commitment record"):
        require_test_seed(cfg, {"HEURESIS_TEST_SEED": other})
    with pytest.raises(SecretUnavailable, match="records another seed's commitment"):
        write_commitment(other, record_path, config_digest="cd" * 32)
    assert json.loads(record_path.read_text())["created"] == "2027-01-04T09:12:00Z"
    caption = disclosure_caption(disclosure(cfg, env))
    assert caption == f"Test split sealed, seed commitment sha256:{commitment(seed)}, committed 2027-01-04T09:12:00Z."
    # reveal: the seed checks against the record; a malformed seed is refused, not a mismatch
    assert main(["verify-seed", seed, "--record", str(record_path)]) == 0
    assert "recorded 2027-01-04T09:12:00Z" in capsys.readouterr().out
    assert main(["verify-seed", other, "--record", str(record_path)]) == 1 and "MISMATCH" in capsys.readouterr().out
    assert main(["verify-seed", "x", "--record", str(record_path)]) == 2
    assert "expected at least 32 hexadecimal digits" in capsys.readouterr().err
    # the CLI writes the record from the environment (never a command-line seed), once
    monkeypatch.setenv("HEURESIS_TEST_SEED", other)
    cfg_file = tmp_path / "c.yaml"
    cfg_file.write_text(f"secrets: {{commitment_file: {tmp_path / 'fresh.json'}}}\n")
    assert main(["seal", "commit", "--config", str(cfg_file), "--period", "p1"]) == 0
    assert json.loads((tmp_path / "fresh.json").read_text())["commitment"] == commitment(other)
    assert other not in capsys.readouterr().out
    monkeypatch.setenv("HEURESIS_TEST_SEED", seed)
    assert main(["seal", "commit", "--config", str(cfg_file)]) == 1
    assert "records another seed's commitment" in capsys.readouterr().err


def test_without_the_secret_the_paper_config_refuses_the_test_split(paper_config, tmp_path, capsys):
    cfg = _sealed_cfg(paper_config)
    spec = instance_spec(cfg, "lg", "test", environ={})
    assert spec["seed"] == {"sealed": None}
    with pytest.raises(SecretUnavailable):
        write_split(spec, "lg", "test", 1, tmp_path / "i", tmp_path / "t", test_seed=draw_secret())
    # a weak or malformed seed is refused naming where it came from, never echoing it
    with pytest.raises(SecretUnavailable, match="environment variable HEURESIS_TEST_SEED: expected at least 32") as exc:
        instance_spec(cfg, "lg", "test", environ={"HEURESIS_TEST_SEED": "1234"})
    assert "1234" not in str(exc.value)
    # the CLI fails before writing anything, naming the variable
    cfg_file = tmp_path / "small.yaml"
    cfg_file.write_text("instances: {d: 5, n: 100, n_dev: 1, n_test: 1}\n")
    env = os.environ.pop("HEURESIS_TEST_SEED", None)
    try:
        assert main(["instances", "--config", "config/config.yaml", "--config", str(cfg_file), "--family", "lg",
                     "--results", str(tmp_path / "res")]) == 2
    finally:
        if env is not None:
            os.environ["HEURESIS_TEST_SEED"] = env
    assert "HEURESIS_TEST_SEED" in capsys.readouterr().err and not (tmp_path / "res").exists()


def test_a_sealed_seed_from_a_file(paper_config, tmp_path, monkeypatch):
    """The seed's file is used only when owner-only and outside the working folder and what sandboxes see."""
    cfg = _sealed_cfg(paper_config)
    seed = draw_secret()
    (tmp_path / "seed").write_text(seed + "\n")
    cfg["secrets"]["test_seed_file"] = str(tmp_path / "seed")
    with pytest.raises(SecretUnavailable, match="readable by others \\(mode 644\\)"):
        instance_spec(cfg, "lg", "test", environ={})
    os.chmod(tmp_path / "seed", 0o600)
    assert instance_spec(cfg, "lg", "test", environ={})["seed"] == {"sealed": commitment(seed)}
    monkeypatch.chdir(tmp_path)                                 # the working folder (a checkout) holds it
    with pytest.raises(SecretUnavailable, match="lies under"):
        instance_spec(cfg, "lg", "test", environ={})
    monkeypatch.undo()
    venv_seed = Path(sys.prefix) / f".seed-{os.getpid()}"       # the Python environment sandboxes bind
    venv_seed.write_text(seed)
    try:
        os.chmod(venv_seed, 0o600)
        cfg["secrets"]["test_seed_file"] = str(venv_seed)
        with pytest.raises(SecretUnavailable, match="lies under"):
            instance_spec(cfg, "lg", "test", environ={})
    finally:
        venv_seed.unlink()
    cfg["secrets"]["test_seed_file"] = str(tmp_path / "absent")
    with pytest.raises(SecretUnavailable, match="config key secrets.test_seed_file: cannot read"):
        instance_spec(cfg, "lg", "test", environ={})


def test_the_quick_config_is_public_and_labelled(quick_config, tmp_path):
    """The small config reproduces from the repository alone: test like dev from `seed`, the public salt;
    every table says so in its caption."""
    assert quick_config["secrets"] == {**quick_config["secrets"], "salt": "public", "test_seed": "public"}
    env = {"HEURESIS_TEST_SEED": draw_secret()}                # ignored: the quick test split is public
    assert instance_spec(quick_config, "lg", "test", environ=env) == instance_spec(quick_config, "lg")
    record = disclosure(quick_config, env)
    assert record == {"salt": "public", "test_seed": "public"}
    import pandas as pd

    frame = pd.DataFrame({"a": [1]})
    write_paper_table(frame, frame, tmp_path / "t", caption="Table X.", provenance={}, secrets=record)
    md, tex = (tmp_path / "t.md").read_text(), (tmp_path / "t.tex").read_text()
    assert "UNSEALED" in md.splitlines()[0] and "UNSEALED" in tex
    assert json.loads(read_metadata(tmp_path / "t.parquet")["heuresis.provenance"])["secrets"] == record
    sealed = {"salt": "drawn", "test_seed": "sealed", "commitment": "ab" * 32}
    assert disclosure_caption(sealed) == f"Test split sealed, seed commitment sha256:{'ab' * 32}."


# --- the workflow ----------------------------------------------------------------------------------------
def test_the_workflow_refuses_a_sealed_test_split_without_its_seed(tmp_path):
    """The paper's regime: a dry run warns naming the variable; a run that would build a test split or draw
    a games test variant stops before any job; a dev target builds; with the seed set but no commitment
    record it stops again; with the record, the test split and the variant build and record the
    commitment (never the seed); a rotated seed redraws both and nothing else."""
    from tinyflow import copy_workflow, run_snakemake

    wd = copy_workflow(tmp_path / "wf")
    (wd / "config" / "sealed.yaml").write_text("instances: {d: 5, n: 100, n_dev: 1, n_test: 1}\n"
                                               "games: {test_variants: {count: 1, of: [deployment_zone_trap_categorical]},\n"
                                               "        search: {verify_fleets: 3}}\n")
    conf = ["--cores", "1", "--configfile", "config/sealed.yaml"]     # over config.yaml: sealed, drawn
    env = {k: v for k, v in os.environ.items() if k != "HEURESIS_TEST_SEED"}
    named = "set the environment variable HEURESIS_TEST_SEED"
    test_truth = "results/truth/lg/test/graphs.parquet"
    run = subprocess.run
    dry = run([sys.executable, "-m", "snakemake", "-n", test_truth, *conf], cwd=wd, env=env, capture_output=True, text=True)
    assert dry.returncode == 0 and named in dry.stdout + dry.stderr
    proc = run([sys.executable, "-m", "snakemake", test_truth, *conf], cwd=wd, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and named in proc.stdout + proc.stderr
    variant = "results/games/references/deployment_zone_trap_categorical@test0.parquet"   # a games test variant, from the seed
    proc = run([sys.executable, "-m", "snakemake", variant, *conf], cwd=wd, env=env, capture_output=True, text=True)
    assert proc.returncode != 0 and named in proc.stdout + proc.stderr
    assert not (wd / "results").exists()                               # nothing ran
    run_snakemake(wd, "results/truth/lg/dev/graphs.parquet", *conf, env={"HEURESIS_TEST_SEED": ""})
    seed = draw_secret()
    proc = run([sys.executable, "-m", "snakemake", test_truth, *conf], cwd=wd, capture_output=True, text=True,
               env={**env, "HEURESIS_TEST_SEED": seed})                 # the seed, but no commitment published
    assert proc.returncode != 0 and "heuresis seal commit" in proc.stdout + proc.stderr
    assert not (wd / "results/instances/lg/test").exists()
    commit = run([sys.executable, "-m", "heuresis.cli", "seal", "commit", "--config", "config/sealed.yaml"], cwd=wd,
                 capture_output=True, text=True, env={**env, "HEURESIS_TEST_SEED": seed})
    assert commit.returncode == 0 and (wd / "seal/commitment.json").exists(), commit.stderr
    run_snakemake(wd, test_truth, variant, *conf, env={"HEURESIS_TEST_SEED": seed})
    prov = json.loads(read_metadata(wd / "results/instances/lg/test/index.parquet")["heuresis.provenance"])
    assert prov["seeds"]["test_seed_commitment"] == commitment(seed)
    prov = json.loads(read_metadata(wd / variant)["heuresis.provenance"])
    assert prov["seeds"]["test_variants"] == {"test_seed": "sealed", "commitment": commitment(seed)}
    for p in list((wd / "results").rglob("*")) + list((wd / ".snakemake").rglob("*")) + list((wd / "logs").rglob("*")):
        if p.is_file():
            assert seed.encode() not in p.read_bytes(), p
    # a rotated seed (another commitment) rebuilds the test split, the dev split stays
    dry = run_snakemake(wd, "-n", test_truth, "results/truth/lg/dev/graphs.parquet", variant, *conf,
                        env={"HEURESIS_TEST_SEED": draw_secret()}).stdout
    outputs = sorted(line.strip() for line in dry.splitlines() if line.strip().startswith("output: results/"))
    assert len(outputs) == 2 and outputs[0] == f"output: {variant}", outputs
    assert outputs[1].startswith("output: results/instances/lg/test,"), outputs


def test_the_workflow_draws_the_salt_once(tmp_path):
    """secrets.salt: drawn: planning the first episode job draws the salt beside the truth; no later plan,
    not even a forced rerun of everything, draws another (it is no job's output, so Snakemake never deletes it)."""
    from tinyflow import CONFIG, copy_workflow, run_snakemake

    wd = copy_workflow(tmp_path / "wf")
    (wd / "config" / "drawn.yaml").write_text("secrets: {salt: drawn}\n")
    conf = ["--cores", "1", *CONFIG, "config/drawn.yaml"]
    dry = run_snakemake(wd, "-n", *conf).stdout
    salt = read_salt(wd / "results/truth/salt.json")
    inputs = [line for line in dry.splitlines() if line.strip().startswith("input:") and "results/episodes" not in line
              and "results/truth/salt.json" in line]
    assert inputs, "episode jobs do not read the salt"
    run_snakemake(wd, "-n", "-F", *conf)
    assert read_salt(wd / "results/truth/salt.json") == salt


def test_check_config_says_whether_the_test_split_can_be_built(root, capsys, monkeypatch):
    monkeypatch.delenv("HEURESIS_TEST_SEED", raising=False)
    main(["check-config", "--config", str(root / "config/config.yaml")])
    assert "test split sealed, but its seed is not available (HEURESIS_TEST_SEED not set)" in capsys.readouterr().out
    seed = draw_secret()
    monkeypatch.setenv("HEURESIS_TEST_SEED", seed)
    main(["check-config", "--config", str(root / "config/config.yaml")])
    out = capsys.readouterr().out
    assert f"test split sealed, commitment {commitment(seed)}" in out and seed not in out
