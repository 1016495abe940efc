"""Error text from servers and engines passes through one scrubber before any log, progress.json,
rejects.jsonl or the terminal: a server that echoes the request's key leaks it nowhere."""

import json
import os
import subprocess
import uuid

import yaml

from kame_data.scrub import REDACTED, register_secret, scrub
from tests.conftest import CLI, FIXTURES
from tests.loopback_server import LoopbackServer


def test_scrub_patterns_and_registered_values():
    register_secret("kd-unit-0f3c9a7e51")
    cases = {
        "Authorization: Bearer abc.def-123": "Authorization: [redacted]",
        "header authorization=xyz123 rest": "header authorization=[redacted] rest",
        "got Bearer eyJhbGciOi.payload.sig back": "got Bearer [redacted] back",
        '{"api_key": "s3cr3t-value", "n": 1}': '{"api_key": "[redacted]", "n": 1}',
        "url?token=abcdef&x=1": "url?token=[redacted]&x=1",
        "Incorrect API key provided: sk-proj-AbCdEf0123456789xyz.": "Incorrect API key provided: [redacted].",
        "hub said hf_AbCdEfGhIjKlMnOp": "hub said [redacted]",
        "aws AKIAABCDEFGHIJKLMNOP here": "aws [redacted] here",
        "echo kd-unit-0f3c9a7e51 done": "echo [redacted] done",
    }
    for text, expected in cases.items():
        assert scrub(text) == expected, text
    plain = "speak mmlu_pro-12-v0 with piper:joe failed: RuntimeError: phonemizer returned 0 phonemes"
    assert scrub(plain) == plain  # ordinary error text is left alone
    assert REDACTED not in scrub("config_hash 3f9a1c0e2b7d4a55, sha256 " + "a" * 64)


def test_a_key_echoed_by_the_server_appears_in_no_output(tmp_path):
    """The server answers every request with 401 and an error body that echoes the key and the
    Authorization header; the run stops, and the key is nowhere: not on the terminal, not in
    progress.json, run.log, rejects.jsonl or any other file of the output folder."""
    key = f"kd-test-{uuid.uuid4().hex}"

    def echo_key(body, seen, headers):
        return (401, {"error": {"message": f"Incorrect API key provided: {key}. You sent "
                                           f"Authorization: {headers.get('Authorization')}",
                                "type": "invalid_request_error", "code": "invalid_api_key"}}, {})

    raw = {"name": "leak", "seed": 0,
           "sources": [{"kind": "gsm8k", "path": str(FIXTURES / "gsm8k_test_200.jsonl"), "limit": 2}],
           "script": {"style": "llm"}}
    with LoopbackServer(override=echo_key) as srv:
        raw["script"]["llm"] = {"backend": {"kind": "openai", "model": "m", "base_url": srv.base_url,
                                            "api_key_env": "KD_TEST_KEY"}}
        recipe = tmp_path / "r.yaml"
        recipe.write_text(yaml.safe_dump(raw))
        out = tmp_path / "out"
        env = {**os.environ, "KD_TEST_KEY": key}
        r = subprocess.run(CLI + ["run", str(recipe), "--out", str(out), "-q"], capture_output=True, text=True,
                           timeout=300, env=env)
        assert srv.calls >= 1  # the key really went to the server, and came back in its error
    assert r.returncode == 1
    assert "AuthenticationError" in r.stderr and "Incorrect API key provided: [redacted]" in r.stderr, r.stderr
    assert key not in r.stdout + r.stderr and "Traceback" not in r.stderr
    progress = json.loads((out / "progress.json").read_text())
    assert progress["state"] == "failed" and "[redacted]" in progress["error"]
    files = [p for p in out.rglob("*") if p.is_file()]
    assert {p.name for p in files} >= {"progress.json", "run.log", "rejects.jsonl"}
    for p in files:
        assert key.encode() not in p.read_bytes(), p
    assert "Incorrect API key provided: [redacted]" in (out / "run.log").read_text()
