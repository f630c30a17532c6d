# Stage 4, episodes (docs/design.md §5): one job runs one agent under one condition on a shard of a family's
# split; it writes the episodes and calls tables and one JSON transcript per episode
# (results/transcripts/{agent}/{condition_id}/{family}/{split}/{index:04d}.json).


rule episodes:
    wildcard_constraints:
        agent=one_of(config["agents"]),
        condition_id=CONDITION_ID_PATTERN,
    input:
        data=P.INSTANCES,
        truth=P.TRUTH_GRAPHS,
        pc_kci=episode_pc_kci,
        salt=episode_salt,
    output:
        episodes=P.EPISODES,
        calls=P.EPISODE_CALLS,
        requests=P.EPISODE_REQUESTS,
    log:
        log_of(P.EPISODES),
    benchmark:
        benchmark_of(P.EPISODES)
    params:
        agent_spec=agent_spec,
        prompts=episode_prompts,
        indices=episode_indices,
        episodes=episode_config,
        menu=config["references"]["algorithms"],
        grades=config["grades"],
        seed=config["seed"],
        salt=config["secrets"]["salt"],
        transcripts=P.EPISODE_TRANSCRIPTS,
        attempt=attempt_of(P.EPISODES),
    retries: MODEL_JOB_RETRIES
    threads: 1
    resources:
        mem_mb=3000,
        runtime=episode_runtime,
        **llm_slots("agent"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/episodes.py"
