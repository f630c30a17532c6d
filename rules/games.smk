# The games track (docs/games.md): references per scenario, plays per
# agent x mode x scenario (checkpointed per play; transcripts under results/games/transcripts/),
# judgements per judge x agent x mode x scenario (adding a scenario judges only its plays), then
# each table and figure as its own rule.


rule games_references:
    wildcard_constraints:
        scenario="|".join(GAME_SCENARIOS) or "none",
    input:
        game_scenario_file,
    output:
        "results/games/references/{scenario}.parquet",
    log:
        "logs/games/references/{scenario}.log",
    benchmark:
        "results/benchmarks/games/references/{scenario}.tsv"
    params:
        folder=GAME_FOLDER,
        search=GAMES["search"],
    threads: 1
    resources:
        mem_mb=1500,
        runtime=15,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/games_references.py"


rule games_plays:
    wildcard_constraints:
        agent="|".join(GAMES["agents"]) or "none",
        mode="|".join(GAME_MODES),
        scenario="|".join(GAME_SCENARIOS) or "none",
    input:
        scenario=game_scenario_file,
        references="results/games/references/{scenario}.parquet",
    output:
        plays="results/games/plays/{agent}/{mode}/{scenario}.parquet",
        calls="results/games/plays/{agent}/{mode}/{scenario}.calls.parquet",
        requests="results/games/plays/{agent}/{mode}/{scenario}.requests.parquet",
    log:
        "logs/games/plays/{agent}/{mode}/{scenario}.log",
    benchmark:
        "results/benchmarks/games/plays/{agent}/{mode}/{scenario}.tsv"
    params:
        spec=game_agent_spec,
        folder=GAME_FOLDER,
        plays=game_play_count,
        seed=GAMES["seed"],
        max_turns=lambda wildcards: _max_turns_of(config, wildcards.agent),
        task_variant=GAMES["task_variant"],
        max_tool_calls=GAMES["max_tool_calls_per_turn"],
        code_tool=config["episodes"]["code_tool"],
        transcripts="results/games/transcripts/{agent}/{mode}/{scenario}",
        attempt=attempt_of("results/games/plays/{agent}/{mode}/{scenario}.parquet"),
    threads: 1
    resources:
        mem_mb=1500,
        runtime=game_play_runtime,
        **llm_slots("agent"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/games_plays.py"


rule games_judgements:
    wildcard_constraints:
        judge="|".join(GAMES["judges"]) or "none",
        agent="|".join(GAMES["agents"]) or "none",
        mode="|".join(GAME_MODES),
        scenario="|".join(GAME_SCENARIOS) or "none",
    input:
        plays="results/games/plays/{agent}/{mode}/{scenario}.parquet",
        references="results/games/references/{scenario}.parquet",
    output:
        judgements="results/games/judgements/{judge}/{agent}/{mode}/{scenario}.parquet",
        requests="results/games/judgements/{judge}/{agent}/{mode}/{scenario}.requests.parquet",
    log:
        "logs/games/judgements/{judge}/{agent}/{mode}/{scenario}.log",
    params:
        spec=game_judge_spec,
        folder=GAME_FOLDER,
        max_tokens=GAMES["judge_max_tokens"],
        attempt=attempt_of("results/games/judgements/{judge}/{agent}/{mode}/{scenario}.parquet"),
    threads: 1
    resources:
        mem_mb=1000,
        runtime=game_judgement_runtime,
        **llm_slots("judge"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/games_judgements.py"


for _table in GAME_TABLES:

    rule:
        name:
            _table
        input:
            references=game_references(),
            plays=game_plays(),
            judgements=game_judgements(),
        output:
            parquet=f"results/tables/{_table}.parquet",
            md=report(
                f"results/tables/{_table}.md",
                caption=f"../workflow/report/{'games_family' if _table in GAME_FAMILY_TABLES else _table}.rst",
                category="Games",
            ),
            tex=f"results/tables/{_table}.tex",
        log:
            f"logs/tables/{_table}.log",
        group:
            "games_targets"
        params:
            target=_table,
            judges=GAMES["judges"],
            bootstrap=game_bootstrap(),
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/games_targets.py"


for _figure in GAME_FIGURES:

    rule:
        name:
            _figure
        input:
            references=game_references(),
            plays=game_plays(),
            judgements=game_judgements(),
        output:
            pdf=f"results/figures/{_figure}.pdf",
            png=report(
                f"results/figures/{_figure}.png",
                caption=f"../workflow/report/{_figure}.rst",
                category="Games",
            ),
        log:
            f"logs/figures/{_figure}.log",
        group:
            "games_targets"
        params:
            target=_figure,
            judges=GAMES["judges"],
            bootstrap=game_bootstrap(),
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        conda:
            "../environment.yml"
        script:
            "../workflow/scripts/games_targets.py"
