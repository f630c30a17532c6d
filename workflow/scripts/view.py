"""Snakemake adapter for the viewer's static export (logic: heuresis.view.export_site)."""

from heuresis.artifacts.logs import stage_logger
from heuresis.view import export_site

sm = snakemake  # noqa: F821  (injected by Snakemake)
log = stage_logger(sm.log[0])
export_site(sm.params.results, sm.output.site, log=log)
