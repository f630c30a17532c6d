# The games track (docs/games.md): references per scenario, plays per
# agent x mode x scenario (checkpointed per play; transcripts under results/games/transcripts/),
# judgements per judge x agent x mode x scenario (adding a scenario judges only its plays), then
# each table and figure as its own rule.


rule games_references:
    wildcard_constraints:
        scenario=one_of(GAME_SCENARIOS),
    input:
        game_scenario_file,
    output:
        P.GAME_REFERENCES,
    log:
        log_of(P.GAME_REFERENCES),
    benchmark:
        benchmark_of(P.GAME_REFERENCES)
    params:
        folder=GAME_FOLDER,
        search=GAMES["search"],
        variants=game_variant_spec,
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
        agent=one_of(GAMES["agents"]),
        mode=one_of(GAME_MODES),
        scenario=one_of(GAME_SCENARIOS),
    input:
        scenario=game_scenario_file,
        references=P.GAME_REFERENCES,
    output:
        plays=P.GAME_PLAYS,
        calls=P.GAME_PLAY_CALLS,
        requests=P.GAME_PLAY_REQUESTS,
    log:
        log_of(P.GAME_PLAYS),
    benchmark:
        benchmark_of(P.GAME_PLAYS)
    params:
        spec=game_agent_spec,
        prompts=game_prompts,
        folder=GAME_FOLDER,
        plays=game_play_count,
        seed=GAMES["seed"],
        max_turns=game_max_turns,
        task_variant=GAMES["task_variant"],
        max_tool_calls=GAMES["max_tool_calls_per_turn"],
        protocols=GAMES["protocols"],
        code_tool=config["episodes"]["code_tool"],
        transcripts=P.GAME_TRANSCRIPTS,
        attempt=attempt_of(P.GAME_PLAYS),
    retries: MODEL_JOB_RETRIES
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
        judge=one_of(GAMES["judges"]),
        agent=one_of(GAMES["agents"]),
        mode=one_of(GAME_MODES),
        scenario=one_of(GAME_SCENARIOS),
    input:
        plays=P.GAME_PLAYS,
        references=P.GAME_REFERENCES,
    output:
        judgements=P.GAME_JUDGEMENTS,
        requests=P.GAME_JUDGEMENT_REQUESTS,
    log:
        log_of(P.GAME_JUDGEMENTS),
    params:
        spec=game_judge_spec,
        prompts=judge_prompts,
        folder=GAME_FOLDER,
        max_tokens=GAMES["judge_max_tokens"],
        protocols=GAMES["protocols"],
        attempt=attempt_of(P.GAME_JUDGEMENTS),
    retries: MODEL_JOB_RETRIES
    threads: 1
    resources:
        mem_mb=1000,
        runtime=game_judgement_runtime,
        **llm_slots("judge"),
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/games_judgements.py"
