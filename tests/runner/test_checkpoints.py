"""Checkpoints that cannot run code and cannot lie: records through kame_data/codec.py, a checksum on
every blob, damaged ones named and recomputed, and a checkpoint identity that holds only what can
change a row."""

import json
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from kame_data.codec import CodecError, decode, encode, register_record
from kame_data.llm.config import BackendConfig
from kame_data.oracle.config import OracleConfig
from kame_data.records import (
    Dialogue,
    OracleEvent,
    Reject,
    RenderedDialogue,
    Sample,
    SourceItem,
    FollowUp,
    Turn,
    TurnTiming,
    Word,
)
from kame_data.runner.checkpoint import CheckpointStore, config_key
from kame_data.speech.config import SpeakConfig
from tests.conftest import FIXTURES
from tests.loopback_server import LoopbackServer


def sample_record() -> Sample:
    dialogue = Dialogue("d-1", "item-1", "gsm8k", "math", 0,
                        [Turn("user", "B", "What is 2 + 2?", "what is two plus two"),
                         Turn("assistant", "A", "It's 4.", "it's four")], answer=["four"])
    audio = (np.arange(4800, dtype=np.int16).reshape(2400, 2) * 7)
    rendered = RenderedDialogue(dialogue, audio, 24000, [Word("B", "what", 0.0, 0.31), Word("A", "mm-hm", 0.2, 0.4, True)],
                                [TurnTiming(0.0, 1.2, "heart"), TurnTiming(1.5, 2.0, "joe")],
                                turn_wer=(0.0, None), turn_start_error_ms=(12.5, None),
                                turn_quality=({"dnsmos": np.float32(3.25), "lufs": -23.000000000000004},),
                                acoustics={"snr_db": 17.5, "room": [4.0, 3.5, 2.7]}, turn_cut_words=(0, 2))
    event = OracleEvent(1000, "B: what is", "four", 3, "is", ["what", "is"], 0.6, 0, "it's four", 1)
    return Sample(rendered, [event])


def assert_same(a, b):
    """Equal records, arrays compared by dtype, shape and value."""
    assert type(a) is type(b)
    if isinstance(a, np.ndarray) or isinstance(a, np.generic):
        assert a.dtype == b.dtype and np.shape(a) == np.shape(b) and np.array_equal(a, b)
    elif hasattr(a, "__dataclass_fields__"):
        for name in a.__dataclass_fields__:
            assert_same(getattr(a, name), getattr(b, name))
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            assert_same(x, y)
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            assert_same(a[k], b[k])
    else:
        assert a == b or (a != a and b != b)  # NaN


def test_every_record_type_round_trips_exactly():
    item = SourceItem("mmlu_pro-1", "mmlu_pro", "law", "Q?", ["a", "b"], "a", "A", meta={"src": "x"},
                      followups=[FollowUp("and then?", "then this")])
    group = [sample_record(), Reject("oracle", "d-1@500", "empty_prediction", "none", False), item,
             {"$t": "a user dict that looks like a tag", 3: "int key"}, b"\x00bytes", (1, 2.5, None)]
    assert_same(decode(encode(group)), group)


json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2**63, 2**63 - 1), st.text(),
                      st.floats(allow_nan=True, allow_infinity=True))
nested = st.recursive(json_leaf | st.binary(max_size=20) | st.builds(
    lambda xs, dt: np.array(xs, dtype=dt), st.lists(st.integers(-100, 100), max_size=8),
    st.sampled_from(["int16", "float32", "float64", "int64"])),
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=5), children, max_size=4), max_leaves=20)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(nested)
def test_any_nested_value_round_trips(value):
    assert_same(decode(encode(value)), value)


def test_every_single_changed_byte_is_detected():
    blob = encode([sample_record()])
    rng = random.Random(7)
    positions = list(range(len(blob))) if len(blob) < 4000 else rng.sample(range(len(blob)), 4000)
    for at in positions:
        damaged = bytearray(blob)
        damaged[at] ^= 1 << rng.randrange(8)
        with pytest.raises(CodecError):
            decode(bytes(damaged))
    for cut in (0, 10, len(blob) // 2, len(blob) - 1):
        with pytest.raises(CodecError):
            decode(blob[:cut])


def test_a_planted_blob_cannot_name_other_types():
    """A blob written by someone else, checksum and all, still rebuilds only registered records."""
    import hashlib
    import struct

    from kame_data.codec import MAGIC

    doc = json.dumps({"$t": "os.system", "f": {"command": "echo owned"}}).encode()
    body = struct.pack("<Q", len(doc)) + doc
    with pytest.raises(CodecError, match="unknown record type"):
        decode(MAGIC + hashlib.sha256(body).digest() + body)
    with pytest.raises(CodecError):
        decode(b"\x80\x04\x95" + b"pickle bytes" * 10)

    class NotRegistered:
        pass

    with pytest.raises(TypeError):
        encode([NotRegistered()])


def test_a_step_registers_its_own_record_type():
    from dataclasses import dataclass

    @register_record
    @dataclass(frozen=True)
    class Toy:
        id: str
        weight: float

    assert decode(encode([Toy("t", 0.5)])) == [Toy("t", 0.5)]


def test_store_names_and_discards_a_damaged_checkpoint(tmp_path, caplog):
    store = CheckpointStore(tmp_path / "ckpt")
    store.put("speak", "ab12", [sample_record()])
    assert_same(store.get("speak", "ab12"), [sample_record()])
    path = tmp_path / "ckpt" / "speak" / "ab" / "ab12.rec"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x10
    path.write_bytes(bytes(data))
    with caplog.at_level("WARNING", logger="kame_data"):
        assert store.get("speak", "ab12") is None
    assert not path.exists() and store.damaged == [f"{store.root}/speak/ab/ab12.rec"]
    assert "speak/ab/ab12.rec" in caplog.text and "damaged checkpoint" in caplog.text


def test_operational_settings_are_not_part_of_a_step_identity():
    base = OracleConfig()
    same = OracleConfig(budget_usd=3.0, backend=BackendConfig(timeout=1.0, max_retries=0, concurrency=2, rpm=60, max_retry_after=5,
                                                                 instances=1, threads=2))
    assert config_key("oracle", base) == config_key("oracle", same)
    assert config_key("oracle", base) != config_key("oracle", OracleConfig(backend=BackendConfig(temperature=0.1)))
    assert config_key("speak", SpeakConfig(workers=1)) == config_key("speak", SpeakConfig(workers=2))


# --- whole runs --------------------------------------------------------------------------------

ITEMS = 36  # three checkpointed steps (script, speak, oracle) per item: > 100 checkpoints


def espeak_recipe(tmp: Path, base_url: str, name: str = "ckpt", **changes) -> Path:
    """GSM8K items with espeak voices (fast) and the oracle on the loopback OpenAI server."""
    raw = {"name": name, "seed": 5, "batch_size": 4,
           "sources": [{"kind": "gsm8k", "path": str(FIXTURES / "gsm8k_test_200.jsonl")}],
           "speak": {"assistant": {"engine": "espeak", "voice": "en-us"},
                     "user": {"engine": "espeak", "voice": "en-us+f3"}, "workers": 2},
           "oracle": {"backend": {"kind": "openai", "model": "loopback", "base_url": base_url, "timeout": 30}},
           "publish": {"rows_per_shard": 8}}
    for section, values in changes.items():
        if isinstance(values, dict):
            for k, v in values.items():
                if isinstance(v, dict):
                    raw[section].setdefault(k, {}).update(v)
                else:
                    raw[section][k] = v
        else:
            raw[section] = values
    path = tmp / f"{name}-{len(list(tmp.glob('*.yaml')))}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def table_rows(out: Path) -> list[dict]:
    return [r for p in sorted((out / "data").glob("*.parquet")) for r in pq.read_table(p).to_pylist()]


@pytest.mark.slow
def test_damaged_checkpoints_are_recomputed_and_operational_changes_recompute_nothing(tmp_path, monkeypatch):
    from kame_data.recipe import load_recipe
    from kame_data.runner import run_recipe

    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "out"
    with LoopbackServer(latency=0.0) as srv:
        first = run_recipe(load_recipe(espeak_recipe(tmp_path, srv.base_url)), out, limit=ITEMS)
        reference = table_rows(out)
        calls = srv.calls
        assert first.manifest["computed"]["oracle"] == first.manifest["counts"]["speak"] > 30

        # Workers, the server timeout and the budget cannot change a row: nothing is computed again.
        changed = espeak_recipe(tmp_path, srv.base_url, speak={"workers": 1},
                                oracle={"budget_usd": 50.0, "backend": {"timeout": 7.5}})
        again = run_recipe(load_recipe(changed), out, limit=ITEMS)
        # (quality and acoustics are off: they pass dialogues through and keep no checkpoints)
        assert {s: again.manifest["computed"][s] for s in ("script", "speak", "oracle")} == \
            {"script": 0, "speak": 0, "oracle": 0}
        assert srv.calls == calls and table_rows(out) == reference

        # 100 random checkpoints damaged in place: each one named, discarded and recomputed.
        files = sorted((out / ".checkpoints").rglob("*.rec"))
        assert len(files) >= 100
        rng = random.Random(11)
        damaged = rng.sample(files, 100)
        for p in damaged:
            data = bytearray(p.read_bytes())
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] ^= 1 << rng.randrange(8)
            p.write_bytes(bytes(data))
        per_step = Counter(p.relative_to(out / ".checkpoints").parts[0] for p in damaged)
        third = run_recipe(load_recipe(changed), out, limit=ITEMS)
    assert third.manifest["checkpoints_damaged"] == 100
    for step, n in per_step.items():
        assert third.manifest["computed"][step] == n, (step, third.manifest["computed"])
    log = (out / "run.log").read_text()
    named = set(re.findall(r"damaged checkpoint (\S+\.rec)", log))
    assert {str(p.resolve()) for p in damaged} <= named
    assert table_rows(out) == reference
