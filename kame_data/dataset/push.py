"""`kame-data push`: upload a validated output folder to the Hugging Face hub as a dataset repo.

The token comes from HF_TOKEN only and never reaches a log line, an error message or a file:
every message that could echo it is scrubbed. Offline or unreachable, the push fails before any
upload starts, with the cause named.
"""

from __future__ import annotations

import logging
import os
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

from kame_data.dataset.folder import DatasetDir, DatasetError
from kame_data.scrub import register_secret, scrub

log = logging.getLogger("kame_data.dataset.push")

UPLOAD = ["README.md", "manifest.json", "rejects.jsonl", "data/*.parquet", "assets/*.png"]
REPLACE = ["data/*.parquet", "assets/*.png"]  # stale shards from an earlier push are deleted
REPO_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
CONNECT_TIMEOUT = 5.0
class PushError(RuntimeError):
    """The push did not happen; the message says why (never with the token in it)."""


def _offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


def _endpoint() -> str:
    from huggingface_hub import constants

    return (os.environ.get("HF_ENDPOINT") or constants.ENDPOINT).rstrip("/")


def _check_reachable(endpoint: str) -> None:
    """A plain TCP connect with a short timeout: an unreachable hub fails in seconds, not after retries."""
    url = urlparse(endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        raise PushError(f"HF_ENDPOINT {endpoint!r} is not an http(s) URL")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname, port), timeout=CONNECT_TIMEOUT):
            pass
    except OSError as e:
        raise PushError(f"cannot reach the hub at {endpoint} ({e.__class__.__name__}: {e}); "
                        "check the network or HF_ENDPOINT") from None


def push_dataset(out_dir: str | Path, repo_id: str, private: bool | None = None, revision: str | None = None,
                 validate: bool = True, commit_message: str | None = None) -> str:
    """Validate OUT, create the dataset repo if needed and upload the card, manifest, shards and plots.

    Returns the repo URL. Raises PushError for a missing token, offline mode, an unreachable hub,
    an invalid dataset or a refusal from the hub.
    """
    out = Path(out_dir)
    if not REPO_ID.match(repo_id):
        raise PushError(f"repo {repo_id!r} is not of the form NAMESPACE/NAME")
    token = os.environ.get("HF_TOKEN", "").strip()
    register_secret(token)  # scrubbed from any error text, as the LLM key is
    if not token:
        raise PushError("HF_TOKEN is not set: create a token with write access on the hub and export HF_TOKEN")
    if _offline():
        raise PushError("HF_HUB_OFFLINE is set: pushing needs the network; unset HF_HUB_OFFLINE to push")
    try:
        ds = DatasetDir.open(out)
    except DatasetError as e:
        raise PushError(str(e)) from None
    endpoint = _endpoint()
    _check_reachable(endpoint)  # before validating: an unreachable hub should not cost a full read
    try:
        if validate:  # checks every shard's sha256 too
            from kame_data.dataset.validate import validate_dataset

            validate_dataset(out)
        else:
            ds.verify_checksums()
    except DatasetError as e:
        raise PushError(f"{out} is not a valid dataset, not pushing: {e}") from e

    from huggingface_hub import HfApi

    api = HfApi(endpoint=endpoint, token=token)
    log.info("pushing %s to %s/datasets/%s", out, endpoint, repo_id)
    try:
        url = api.create_repo(repo_id, repo_type="dataset", private=private, exist_ok=True)
        api.upload_folder(repo_id=repo_id, repo_type="dataset", folder_path=str(out), revision=revision,
                          allow_patterns=UPLOAD, delete_patterns=REPLACE,
                          commit_message=commit_message or f"kame-data: {out.name}")
    except Exception as e:  # hub, HTTP and network errors all end the push the same way
        raise PushError(f"the hub at {endpoint} refused or failed the push: "
                        f"{scrub(f'{e.__class__.__name__}: {e}')}") from None
    log.info("pushed %s", url)
    return str(url)
