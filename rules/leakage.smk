# Figure 1a, the leakage probe: each LLM agent of config leakage.agents is asked for the public
# networks' graphs from their variable names and from X1..Xd controls (one job per agent and
# network, its answers checkpointed: adding a network asks only about that network); the figure
# rule says so when no LLM agent is configured.


rule leakage:
    wildcard_constraints:
        agent=one_of(LEAKAGE_AGENTS),
        network=one_of(config["leakage"]["networks"]),
    output:
        P.LEAKAGE,
    log:
        log_of(P.LEAKAGE),
    params:
        spec=leakage_spec,
        prompts=leakage_prompts,
        repeats=config["leakage"]["repeats"],
        seed=config["leakage"]["seed"],
        attempt=attempt_of(P.LEAKAGE),
    retries: MODEL_JOB_RETRIES
    threads: 1
    resources:
        mem_mb=1000,
        runtime=leakage_runtime,
        **llm_slots("agent"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/leakage.py"
