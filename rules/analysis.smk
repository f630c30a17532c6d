# Analysis stage (docs/design.md §6-7): every episode scored once (results/analysis/episode_scores.parquet),
# then each table (Parquet + Markdown + LaTeX) and figure (PDF + PNG) is its own rule reading it.
# The scores do not depend on the bootstrap settings: changing them reruns only the tables and figures.


rule episode_scores:
    input:
        episodes=episode_outputs(),
        calls=episode_calls(),
        pc_kci=episode_references(),
        truth=episode_truth(),
        headroom=P.HEADROOM_SCORES,
    output:
        scores=P.EPISODE_SCORES,
    log:
        log_of(P.EPISODE_SCORES),
    params:
        menu=MENU,
        scopes=EPISODE_SCOPES,  # the (family, split) of each truth input, in order
    group:
        "analysis"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=20,
    conda:
        "../environment.yml"
    script:
        "../workflow/scripts/episode_scores.py"
