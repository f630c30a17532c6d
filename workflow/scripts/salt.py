"""Snakemake adapter for the salt rule (logic: heuresis.sealing.write_salt)."""

from heuresis.logs import stage_logger
from heuresis.sealing import salt_digest, write_salt

sm = snakemake  # noqa: F821  (injected by Snakemake)
stage_logger(sm.log[0])(f"salt drawn into {sm.output[0]} (sha256 {salt_digest(write_salt(sm.output[0]))})")
