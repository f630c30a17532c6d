# The pilot of a paid run and its forecast (heuresis.stages.pilot; docs/agents.md, "Running real models at
# scale"): `heuresis forecast --pilot K` builds results/pilot/kK/forecast.md. The pilot plays K of the run's
# own LLM episodes per agent and budget setting, their request logs where the episode jobs keep theirs, so
# the full run replays them and pays nothing twice.


rule pilot:
    wildcard_constraints:
        agent=one_of(config["agents"]),
        k=r"[1-9]\d*",
    input:
        unpack(pilot_inputs),
    output:
        P.PILOT,
    log:
        log_of(P.PILOT),
    params:
        agent_spec=agent_spec,
        plan=pilot_plan,
        episodes=pilot_episode_configs,
        menu=config["references"]["algorithms"],
        grades=config["grades"],
        seed=config["seed"],
        salt=config["secrets"]["salt"],
    retries: MODEL_JOB_RETRIES
    threads: 1
    resources:
        mem_mb=3000,
        **llm_slots("agent"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/pilot.py"


rule forecast:
    wildcard_constraints:
        k=r"[1-9]\d*",
    input:
        pilot_tables,
    output:
        table=P.FORECAST,
        text=P.FORECAST_TEXT,
    log:
        log_of(P.FORECAST),
    params:
        forecast=forecast_params,
    localrule: True
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/forecast.py"
