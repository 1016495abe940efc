"""Storage every node sees: local paths keep rename atomicity, URLs go through pyarrow.fs (and
fsspec's filesystems through pyarrow's adapter); checkpoints and the LLM cache on either."""

import uuid

import pytest
import yaml

from kame_data.llm.base import ChatResult
from kame_data.llm.cache import RequestCache, SharedRequestCache, open_cache
from kame_data.recipe import load_recipe
from kame_data.runner.checkpoint import CheckpointStore
from kame_data.storage import Storage, StorageError, is_url
from tests.loopback_server import LoopbackServer


def memory_url() -> str:
    """fsspec's in-memory filesystem (pyarrow has no scheme for it): the adapter path, in-process."""
    return f"memory://kd-{uuid.uuid4().hex[:8]}/root"


def test_url_detection():
    assert is_url("s3://bucket/x") and is_url("memory://a") and is_url("file:///tmp/x")
    assert not is_url("/tmp/x") and not is_url("out/run") and not is_url("C:/data")


@pytest.mark.parametrize("kind", ["path", "file-url", "fsspec-url"])
def test_storage_reads_writes_counts_and_deletes(tmp_path, kind):
    root = {"path": str(tmp_path / "s"), "file-url": f"file://{tmp_path}/s", "fsspec-url": memory_url()}[kind]
    st = Storage(root)
    assert st.is_local == (kind != "fsspec-url")
    assert st.read("a/b/c.bin") is None
    st.write("a/b/c.bin", b"one")
    st.write("a/b/c.bin", b"two")  # replaced whole
    st.write("a/d/e.bin", b"x")
    st.write("a/d/f.json", b"{}")
    assert st.read("a/b/c.bin") == b"two"
    assert st.count("a", ".bin") == 2 and st.count("missing", ".bin") == 0
    st.delete("a/b/c.bin")
    st.delete("a/b/c.bin")  # twice is fine
    assert st.read("a/b/c.bin") is None and st.count("a", ".bin") == 1
    if st.is_local:
        assert not [p for p in (tmp_path / "s").rglob("*") if p.name.endswith(".tmp")]
    assert Storage(st.location).read("a/d/e.bin") == b"x"  # what another process opens again


def test_unknown_scheme_is_named():
    with pytest.raises(StorageError, match="nosuchfs://"):
        Storage("nosuchfs://bucket/x")


def test_checkpoints_on_a_url_and_unreadable_ones_recomputed():
    store = CheckpointStore(memory_url())
    assert store.get("speak", "ab12") is None
    store.put("speak", "ab12", [{"x": 1}])
    assert store.get("speak", "ab12") == [{"x": 1}] and store.count("speak") == 1
    store.storage.write("speak/cd/cd34.rec", b"not a record blob")
    assert store.get("speak", "cd34") is None and store.storage.read("speak/cd/cd34.rec") is None


def test_llm_cache_file_or_shared(tmp_path):
    assert isinstance(open_cache(tmp_path / "c.sqlite"), RequestCache)
    for where in (tmp_path / "shared-cache", memory_url()):
        cache = open_cache(where)
        assert isinstance(cache, SharedRequestCache)
        assert cache.get("k" * 64) is None
        cache.put("k" * 64, ChatResult("an answer, ünïcode", 12, 3))
        again = open_cache(cache.path).get("k" * 64)
        assert (again.text, again.prompt_tokens, again.completion_tokens, again.cached) == ("an answer, ünïcode", 12, 3,
                                                                                           True)


def test_stale_partial_checkpoints_on_a_shared_path_go_and_live_ones_stay(tmp_path):
    """A killed node's half-written checkpoint is removed at the next run's start; a fresh one may be
    another run's write in progress on the same shared folder and is left alone."""
    import os
    import time

    from kame_data.runner.run import _clean_partial_files

    d = tmp_path / "ckpt" / "oracle" / "ab"
    d.mkdir(parents=True)
    stale, live, done = d / ".abc.rec.x1.tmp", d / ".abd.rec.x2.tmp", d / "abe.rec"
    for p in (stale, live, done):
        p.write_bytes(b"x")
    old = time.time() - 7200
    os.utime(stale, (old, old))
    _clean_partial_files(tmp_path / "ckpt", ("*/*/.*.tmp",), min_age_s=3600)
    assert not stale.exists() and live.exists() and done.exists()


def test_a_run_resumes_from_checkpoints_and_answers_on_a_url(tmp_path):
    """The local executor with its checkpoints and LLM cache behind a URL: the second run computes
    nothing and asks the server nothing."""
    from kame_data.runner import run_recipe

    qs = load_recipe("quickstart")
    raw = {"name": "url", "seed": 3, "batch_size": 2,
           "sources": [{"kind": "gsm8k", "path": str(qs.resolve("data/quickstart_gsm8k.jsonl"))}],
           "speak": {"assistant": {"engine": "espeak", "voice": "en-us"},
                     "user": {"engine": "espeak", "voice": "en-us+f3"}, "workers": 1}}
    ckpt, cache = memory_url(), memory_url()
    with LoopbackServer(latency=0.0) as srv:
        raw["oracle"] = {"backend": {"kind": "openai", "model": "loopback", "base_url": srv.base_url}}
        path = tmp_path / "r.yaml"
        path.write_text(yaml.safe_dump(raw))
        first = run_recipe(load_recipe(path), tmp_path / "a", limit=2, checkpoints=ckpt, llm_cache=cache)
        calls = srv.calls
        second = run_recipe(load_recipe(path), tmp_path / "b", limit=2, checkpoints=ckpt, llm_cache=cache)
        assert srv.calls == calls > 0
    assert first.manifest["computed"] == {"script": 2, "speak": 2, "quality": 2, "acoustics": 2, "oracle": 2}
    # quality and acoustics are off here: they pass dialogues through and keep no checkpoints
    assert second.manifest["computed"] == {"script": 0, "speak": 0, "quality": 2, "acoustics": 2, "oracle": 0}
    assert first.rows == second.rows == 2 and not (tmp_path / "a" / ".checkpoints").exists()
    assert CheckpointStore(ckpt).count("oracle") == 2
