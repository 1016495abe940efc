"""The default embedded model is SmolLM2's shipped Q4_1 weights re-encoded as Q8_0 (llm/llamacpp.py):
derived once per machine into the cache folder, whole, reused after, and still the same model."""

import pytest

from kame_data.llm import llamacpp
from kame_data.llm.llamacpp import SMOLLM2_FILE, SMOLLM2_Q8_FILE, embedded_model_path


def quant_types(path) -> set[int]:
    """The GGML types of the 2-D weight tensors of a GGUF file, from its header (GGUF v3 layout)."""
    import struct

    with open(path, "rb") as fh:
        assert fh.read(4) == b"GGUF"
        version, n_tensors, n_kv = struct.unpack("<IQQ", fh.read(20))
        assert version >= 2

        def string() -> bytes:
            (n,) = struct.unpack("<Q", fh.read(8))
            return fh.read(n)

        sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

        def value(kind: int) -> None:
            if kind == 8:
                string()
            elif kind == 9:
                inner, count = struct.unpack("<IQ", fh.read(12))
                for _ in range(count):
                    value(inner)
            else:
                fh.read(sizes[kind])

        for _ in range(n_kv):
            string()
            (kind,) = struct.unpack("<I", fh.read(4))
            value(kind)
        types = set()
        for _ in range(n_tensors):
            string()
            (dims,) = struct.unpack("<I", fh.read(4))
            fh.read(8 * dims)
            ggml_type, _offset = struct.unpack("<IQ", fh.read(12))
            if dims == 2:
                types.add(ggml_type)
        return types


Q4_1, Q8_0 = 3, 8  # ggml_type values


@pytest.mark.slow
def test_default_is_the_shipped_weights_as_q8_0_made_once(tmp_path, monkeypatch):
    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path))
    shipped = embedded_model_path("smollm2-135m-q4_1")
    assert shipped.name == SMOLLM2_FILE and Q4_1 in quant_types(shipped)

    derived = embedded_model_path()
    assert derived.name == SMOLLM2_Q8_FILE and derived.is_relative_to(tmp_path)
    assert quant_types(derived) == {Q8_0}
    assert [p.name for p in derived.parent.iterdir()] == [SMOLLM2_Q8_FILE]  # no temporary file left
    stamp = derived.stat().st_mtime_ns

    calls = []
    monkeypatch.setattr(llamacpp, "worker_pool", lambda *a: calls.append(a))  # a second derivation would fail
    assert embedded_model_path("smollm2-135m") == derived and derived.stat().st_mtime_ns == stamp
    assert calls == []


def test_a_failed_derivation_leaves_nothing_behind(tmp_path, monkeypatch):
    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(llamacpp, "_quantize", _refuse)
    with pytest.raises(RuntimeError, match="could not re-encode"):
        llamacpp._requantized(embedded_model_path("smollm2-135m-q4_1"), SMOLLM2_Q8_FILE)
    assert [p for p in tmp_path.rglob("*") if p.is_file()] == []


def _refuse(src: str, dst: str) -> None:
    with open(dst, "wb") as fh:
        fh.write(b"half a file")
    raise RuntimeError(f"llama.cpp could not re-encode {src}")


@pytest.mark.slow
def test_both_weights_answer_alike(tmp_path, monkeypatch):
    """Greedy answers of the two encodings to plain questions agree: the re-encoding keeps the model."""
    from llama_cpp import Llama

    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path))
    prompts = ["The capital of France is", "Two plus two equals", "The largest planet in the solar system is"]
    answers = {}
    for name in ("smollm2-135m-q4_1", "smollm2-135m"):
        llm = Llama(model_path=str(embedded_model_path(name)), n_ctx=256, n_threads=1, verbose=False, seed=0)
        answers[name] = [llm.create_completion(p, max_tokens=6, temperature=0.0)["choices"][0]["text"]
                         for p in prompts]
        del llm
    assert "Paris" in answers["smollm2-135m"][0]
    same = sum(a.split()[:2] == b.split()[:2] for a, b in zip(answers["smollm2-135m-q4_1"], answers["smollm2-135m"]))
    assert same >= 2, answers


def test_unknown_embedded_model_names_the_choices():
    with pytest.raises(ValueError, match="smollm2-135m-q4_1"):
        embedded_model_path("smollm3")
