"""Secrets of a run (docs/provenance.md, "Secrets"): the masking salt and the sealed test seed.

Two values no agent may know, because each would let it recompute what the harness hides:

* **the salt** (config ``secrets.salt``): every per-episode secret (the masked algorithm names,
  the tools' subsample draws) derives from it by HMAC-SHA256
  (:func:`heuresis.harness.episode.episode_seed`).  ``drawn``: 32 random bytes drawn once per
  results tree (:func:`write_salt`, when the workflow first plans an episode job) into
  ``results/truth/salt.json`` beside the hidden truth, reused by every later run and rerun of
  that tree (the workflow never redraws it; deleting it draws a new one); ``public``: the fixed
  :data:`PUBLIC_SALT` written here, so a small run is reproducible from the repository alone (and
  its masks recomputable: its tables say so).
* **the test seed** (config ``secrets.test_seed``): ``sealed``: the test split's instances derive
  from a seed kept outside the repository (the environment variable ``secrets.test_seed_env``, or
  the file ``secrets.test_seed_file``), of which only the commitment :func:`commitment` is
  published (provenance, every table's caption); ``public``: the test split derives from the
  config's ``seed``, like the dev split, and everything built from it is labelled unsealed.

A sealed seed is at least 32 hexadecimal digits (128 bits; :func:`draw_secret` gives 64), so its
commitment cannot be inverted by trying seeds, and all of it reaches every draw made from it.  Each
use of the seed gets its own entropy, derived one-way (:func:`sealed_entropy`: HMAC-SHA256 keyed by
the seed's digest, over the use's name: one test instance, the games' test variants): an artifact
records at most the entropy of its own use, from which no other instance or variant can be derived.
Its commitment is ``sha256("heuresis-test-seed:" + seed)`` in hex.

Commit, run, reveal: ``heuresis seal commit`` writes the commitment record
(``secrets.commitment_file``: the commitment, the config's digest, the date, the period), which is
published before the test run (a signed tag of the repository holding it dates it); a sealed test
split is built only when the record exists and matches the seed (:func:`require_test_seed`), so a
seed cannot be swapped after its commitment was published, and every table's caption names the
commitment and its date.  After the period the seed is published and ``heuresis verify-seed SEED
--record FILE`` checks it against the earlier record (:func:`verify_seed`).
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
import json
import os
import re
import secrets
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path

from heuresis.artifacts.paths import SALT

__all__ = [
    "COMMITMENT_RECORD",
    "PUBLIC_SALT",
    "SALT_FILE",
    "SecretUnavailable",
    "check_seed",
    "commitment",
    "commitment_record",
    "disclosure",
    "disclosure_caption",
    "draw_secret",
    "read_salt",
    "read_test_seed",
    "require_test_seed",
    "run_salt",
    "salt_digest",
    "sealed_entropy",
    "test_seed_spec",
    "verify_seed",
    "write_commitment",
    "write_salt",
]

PUBLIC_SALT = "heuresis-public-salt-v1"     # secrets.salt: public (documented, so anyone recomputes the masks)
SALT_FILE = SALT       # where the workflow keeps a drawn salt (beside the truth)
SALT_MODE = 0o400      # the salt file: its owner (the harness's user) reads it, nobody else
_COMMIT_PREFIX = "heuresis-test-seed:"      # commitment = sha256(prefix + seed)
_ENTROPY_PREFIX = "heuresis-test-entropy:"  # the key of every derivation = sha256(prefix + seed), all 32 bytes
_SALT_PREFIX = "heuresis-salt:"             # recorded digest of a salt = sha256(prefix + salt)
_SECRET = re.compile(r"[0-9a-f]{32,}")
COMMITMENT_RECORD = "heuresis-seal-commitment"   # the record's "kind"
#: Folders every sandbox sees (the system, read-only): no sealed seed file may lie under them.
SANDBOX_VISIBLE = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")


class SecretUnavailable(ValueError):
    """A sealed secret the configuration needs is not available (or not well-formed)."""


def draw_secret() -> str:
    """A fresh secret: 32 random bytes from the operating system, as 64 hexadecimal digits."""
    return secrets.token_hex(32)


def _check_secret(value: str, where: str) -> str:
    value = value.strip().lower()
    if not _SECRET.fullmatch(value):
        raise SecretUnavailable(f"{where}: expected at least 32 hexadecimal digits, got {len(value)} characters "
                                "that are not (draw one with `heuresis draw-seed`)")
    return value


# --- the salt -----------------------------------------------------------------------------------
def write_salt(path: str | Path = SALT_FILE) -> str:
    """Draw a salt into ``path`` unless one is there already; return the salt the file holds.

    The file is created exclusively (written to a temporary file, then hard-linked to ``path``,
    which fails if ``path`` exists), so two concurrent callers keep one salt; it is readable by its
    owner only (mode 0400), never by a sandbox's user or another local user.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        salt = draw_secret()
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                json.dump({"salt": salt, "sha256": salt_digest(salt)}, fh)
            os.chmod(tmp, SALT_MODE)
            try:
                os.link(tmp, path)
            except FileExistsError:   # another process drew one first: keep its salt
                pass
        finally:
            Path(tmp).unlink(missing_ok=True)
    return read_salt(path)


def read_salt(path: str | Path = SALT_FILE) -> str:
    """The salt of a results tree, from the file :func:`write_salt` made.

    A salt file others may read (a tree made before the mode was 0400, or copied) is made owner-only
    first; one that cannot be is refused, naming the file and its mode.
    """
    path = Path(path)
    try:
        mode = path.stat().st_mode & 0o777
        if mode & 0o077:
            try:
                os.chmod(path, SALT_MODE)
            except OSError:
                raise SecretUnavailable(f"{path}: the salt file is readable by others (mode {mode:o}) and cannot be "
                                        f"made owner-only (chmod {SALT_MODE:o} it as its owner)") from None
        salt = json.loads(path.read_text())["salt"]
    except FileNotFoundError:
        raise SecretUnavailable(f"{path}: no salt (secrets.salt: drawn); the workflow draws it when it plans "
                                "the first episode job") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise SecretUnavailable(f"{path}: not a salt file ({exc})") from None
    return _check_secret(str(salt), str(path))


def run_salt(mode: str, path: str | Path | None = SALT_FILE) -> str:
    """The salt of a run: :data:`PUBLIC_SALT` for ``secrets.salt: public``, else the drawn one in ``path``."""
    if mode == "public":
        return PUBLIC_SALT
    if mode != "drawn":
        raise ValueError(f"config key secrets.salt: {mode!r}; allowed: drawn, public")
    return read_salt(path)  # type: ignore[arg-type]


def salt_digest(salt: str) -> str:
    """The digest recorded for audit (provenance, transcripts): it identifies the salt, never reveals it."""
    return hashlib.sha256((_SALT_PREFIX + salt).encode()).hexdigest()


# --- the test seed --------------------------------------------------------------------------------
def commitment(seed: str) -> str:
    """The published commitment of a sealed test seed: ``sha256("heuresis-test-seed:" + seed)``, hex."""
    return hashlib.sha256((_COMMIT_PREFIX + seed.strip().lower()).encode()).hexdigest()


def verify_seed(seed: str, committed: str) -> bool:
    """Whether a published seed (well-formed: :func:`check_seed`) matches a commitment recorded before."""
    return bool(_SECRET.fullmatch(seed.strip().lower())) and hmac.compare_digest(commitment(seed),
                                                                                 committed.strip().lower())


def sealed_entropy(seed: str, use: str) -> int:
    """The ``SeedSequence`` entropy of one use of a sealed seed (256 bits), derived one-way.

    ``HMAC-SHA256(key=sha256("heuresis-test-entropy:" + seed), msg=use)``: the entropy of one use
    (``"instance:lg/test/0003"``, ``"games-test-variants"``) reveals neither the seed nor any other
    use's entropy, so a published truth row rebuilds its own instance and nothing else.
    """
    if not use:
        raise ValueError("a sealed entropy needs the name of its use")
    key = hashlib.sha256((_ENTROPY_PREFIX + seed.strip().lower()).encode()).digest()
    return int.from_bytes(hmac.new(key, use.encode(), hashlib.sha256).digest(), "little")


def check_seed(seed: str) -> str:
    """A well-formed seed (at least 32 hexadecimal digits), lower-cased; else :class:`SecretUnavailable`."""
    return _check_secret(seed, "the seed")


def _check_seed_file(path: Path) -> None:
    """A sealed seed's file is owner-only and lies where no sandbox and no repository checkout shows it."""
    real = path.resolve()
    mode = real.stat().st_mode & 0o777
    if mode & 0o077:
        raise SecretUnavailable(f"config key secrets.test_seed_file: {path} is readable by others (mode {mode:o}); "
                                "make it owner-only: chmod 600")
    visible = [*SANDBOX_VISIBLE, sys.prefix, sys.base_prefix, str(Path.cwd())]
    for folder in visible:
        root = Path(folder).resolve()
        if real == root or root in real.parents:
            raise SecretUnavailable(f"config key secrets.test_seed_file: {path} lies under {folder}, which sandboxes "
                                    "or the working folder show; keep the seed elsewhere (e.g. ~/.config/heuresis/)")


# --- the commitment record ------------------------------------------------------------------------
def write_commitment(seed: str, path: str | Path, *, config_digest: str, period: str | None = None,
                     now: str | None = None) -> dict:
    """Write the commitment record of ``seed`` to ``path`` (exclusively: a record already there is kept).

    The record (``kind``, ``commitment``, ``config_digest``, ``created`` in UTC, ``period``) is
    what is published before the test run.  A record of another seed at ``path`` is an error: a
    rotation commits the new seed in a new record, after the old one was published.
    """
    seed = check_seed(seed)
    path = Path(path)
    if path.exists():
        old = commitment_record(path)
        if old["commitment"] != commitment(seed):
            raise SecretUnavailable(f"{path} records another seed's commitment ({old['commitment']}); a new "
                                    "seed needs a new record (move the published one aside first)")
        return old
    created = now or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {"kind": COMMITMENT_RECORD, "commitment": commitment(seed), "config_digest": config_digest,
              "created": created, "period": period}
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh, indent=1)
            fh.write("\n")
        os.chmod(tmp, 0o644)   # public by design
        try:
            os.link(tmp, path)
        except FileExistsError:
            return write_commitment(seed, path, config_digest=config_digest, period=period, now=now)
    finally:
        Path(tmp).unlink(missing_ok=True)
    return record


def commitment_record(path: str | Path) -> dict:
    """The commitment record at ``path``, checked for its fields; :class:`SecretUnavailable` if absent or not one."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except FileNotFoundError:
        raise SecretUnavailable(f"{path}: no commitment record; `heuresis seal commit` writes it (publish it before "
                                "the test run)") from None
    except (OSError, ValueError) as exc:
        raise SecretUnavailable(f"{path}: not a commitment record ({exc})") from None
    if (not isinstance(record, dict) or record.get("kind") != COMMITMENT_RECORD
            or not re.fullmatch(r"[0-9a-f]{64}", str(record.get("commitment"))) or not record.get("created")):
        raise SecretUnavailable(f"{path}: not a commitment record (kind {COMMITMENT_RECORD!r}, a sha256 commitment "
                                "and its date expected)")
    return record


def read_test_seed(secrets_cfg: Mapping, environ: Mapping[str, str] | None = None) -> str | None:
    """The sealed test seed from ``secrets.test_seed_file`` or the variable ``secrets.test_seed_env``; None if absent.

    A file named in the config must exist; a value that is not a well-formed seed is an error
    naming where it came from (never the value).
    """
    environ = os.environ if environ is None else environ
    file = secrets_cfg.get("test_seed_file")
    if file:
        path = Path(file).expanduser()
        try:
            _check_seed_file(path)
            return _check_secret(path.read_text(), f"config key secrets.test_seed_file ({path})")
        except OSError as exc:
            raise SecretUnavailable(f"config key secrets.test_seed_file: cannot read {path} ({exc.strerror})") from None
    var = secrets_cfg["test_seed_env"]
    value = environ.get(var)
    if not value:
        return None
    return _check_secret(value, f"environment variable {var}")


def _missing_message(secrets_cfg: Mapping) -> str:
    return (f"the test split is sealed (config key secrets.test_seed: sealed) and its seed is not available: set "
            f"the environment variable {secrets_cfg['test_seed_env']} (or name a file in secrets.test_seed_file) "
            "to the sealed seed; `heuresis draw-seed` draws a new one and prints its commitment. A run without "
            "the secret cannot write test results; set secrets.test_seed: public to run on a public test split, "
            "labelled unsealed")


def require_test_seed(config: Mapping, environ: Mapping[str, str] | None = None) -> str:
    """The sealed test seed, once its commitment record exists and matches it.

    :class:`SecretUnavailable` names what is missing: the variable to set, or the record to write
    (``heuresis seal commit``) and publish before the test run.
    """
    seed = read_test_seed(config["secrets"], environ)
    if seed is None:
        raise SecretUnavailable(_missing_message(config["secrets"]))
    path = config["secrets"]["commitment_file"]
    record = commitment_record(path)
    if not hmac.compare_digest(record["commitment"], commitment(seed)):
        raise SecretUnavailable(f"the sealed seed does not match the commitment record {path} "
                                f"({record['commitment']}, {record['created']}): the seed published for is not this one")
    return seed


def test_seed_spec(config: Mapping, environ: Mapping[str, str] | None = None) -> dict:
    """What the test split's instances depend on besides the config: never the seed itself.

    ``{"test_seed": "public"}``, or ``{"test_seed": "sealed", "commitment": C}`` (``C`` is None
    when the seed is not available: the workflow refuses to build the test split then).
    """
    sec = config["secrets"]
    if sec["test_seed"] == "public":
        return {"test_seed": "public"}
    seed = read_test_seed(sec, environ)
    return {"test_seed": "sealed", "commitment": None if seed is None else commitment(seed)}


# --- disclosure -----------------------------------------------------------------------------------
def disclosure(config: Mapping, environ: Mapping[str, str] | None = None) -> dict:
    """The secrets regime of a run, as provenance records it and captions show it (never a secret).

    A sealed split's entry adds ``committed``, the date of its commitment record (None: no record
    matching the seed, so no test split can be built).
    """
    spec = test_seed_spec(config, environ)
    if spec["test_seed"] == "sealed":
        committed = None
        try:
            record = commitment_record(config["secrets"]["commitment_file"])
            if spec["commitment"] is not None and record["commitment"] == spec["commitment"]:
                committed = str(record["created"])
        except SecretUnavailable:
            pass
        spec = {**spec, "committed": committed}
    return {"salt": config["secrets"]["salt"], **spec}


def disclosure_caption(record: Mapping) -> str:
    """The sentence every paper table's caption ends with: sealed (with the commitment) or UNSEALED."""
    parts = []
    if record.get("test_seed") == "sealed":
        date = f", committed {record['committed']}" if record.get("committed") else ""
        parts.append(f"Test split sealed, seed commitment sha256:{record.get('commitment') or 'unavailable'}{date}.")
    else:
        parts.append("UNSEALED: the test split derives from the public config seed (secrets.test_seed: public); "
                     "anyone can regenerate it.")
    if record.get("salt") == "public":
        parts.append("UNSEALED: masks from the public salt (secrets.salt: public).")
    return " ".join(parts)
