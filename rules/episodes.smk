# Stage 4, episodes (docs/design.md §5): one job runs one agent under one condition on a shard of a family's
# split; it writes the episodes and calls tables and one JSON transcript per episode
# (results/transcripts/{agent}/{condition_id}/{family}/{split}/{index:04d}.json).


rule episodes:
    wildcard_constraints:
        agent="|".join(config["agents"]) or "none",
        condition_id=CONDITION_ID_PATTERN,
    input:
        data="results/instances/{family}/{split}",
        truth="results/truth/{family}/{split}/graphs.parquet",
        pc_kci=episode_pc_kci,
        salt=episode_salt,
    output:
        episodes="results/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}.parquet",
        calls="results/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}.calls.parquet",
        requests="results/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}.requests.parquet",
    log:
        "logs/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}.log",
    benchmark:
        "results/benchmarks/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}.tsv"
    params:
        agent_spec=agent_spec,
        indices=episode_indices,
        episodes=episode_config,
        menu=config["references"]["algorithms"],
        grades=config["grades"],
        seed=config["seed"],
        salt=config["secrets"]["salt"],
        transcripts="results/transcripts/{agent}/{condition_id}/{family}/{split}",
        attempt=attempt_of("results/episodes/{agent}/{condition_id}/{family}/{split}/shard-{shard}.parquet"),
    threads: 1
    resources:
        mem_mb=3000,
        runtime=episode_runtime,
        **llm_slots("agent"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/episodes.py"
