"""Deterministic noise for VITS models: same text and settings, same audio, in any process.

Piper's VITS graph draws its noise with `RandomNormalLike`, whose generator state carries over
between calls, so the audio of a sentence depends on what was spoken before. Resumable, cached
rendering needs the same audio for the same input, so each `RandomNormalLike` node is replaced
by a counter-based generator: element i of the noise is a hash of (i, the phoneme ids), mapped
to a normal deviate with Box-Muller. Different texts get different noise; the same text the same.
"""

from __future__ import annotations

import math

import onnx
from onnx import TensorProto, helper


def _const(name: str, value: float) -> onnx.NodeProto:
    return helper.make_node("Constant", [], [name], value=helper.make_tensor(name + "_v", TensorProto.FLOAT, [], [value]))


def replace_random_normal(model: onnx.ModelProto, text_input: str = "input") -> int:
    """Rewrite every RandomNormalLike in place; returns how many were replaced."""
    graph = model.graph
    new_nodes: list[onnx.NodeProto] = []
    replaced = 0
    prefix = "kame_noise"
    # text-dependent offset: sum of the phoneme ids (an int64 tensor), as float
    seed_nodes = [
        helper.make_node("Cast", [text_input], [f"{prefix}_ids_f"], to=TensorProto.FLOAT),
        helper.make_node("ReduceSum", [f"{prefix}_ids_f"], [f"{prefix}_seed"], keepdims=0),
        _const(f"{prefix}_seed_scale", 0.618034),
        helper.make_node("Mul", [f"{prefix}_seed", f"{prefix}_seed_scale"], [f"{prefix}_offset"]),
    ]
    for node in graph.node:
        if node.op_type != "RandomNormalLike":
            new_nodes.append(node)
            continue
        p = f"{prefix}{replaced}"
        like, out = node.input[0], node.output[0]
        new_nodes += [
            helper.make_node("Shape", [like], [f"{p}_shape"]),
            helper.make_node("ConstantOfShape", [f"{p}_shape"], [f"{p}_ones"],
                             value=helper.make_tensor(f"{p}_one", TensorProto.FLOAT, [1], [1.0])),
            helper.make_node("Reshape", [f"{p}_ones", f"{p}_flat_shape"], [f"{p}_flat"]),
            helper.make_node("CumSum", [f"{p}_flat", f"{p}_axis"], [f"{p}_idx"]),
            helper.make_node("Add", [f"{p}_idx", f"{prefix}_offset"], [f"{p}_i"]),
        ]
        graph.initializer.extend([
            helper.make_tensor(f"{p}_flat_shape", TensorProto.INT64, [1], [-1]),
            helper.make_tensor(f"{p}_axis", TensorProto.INT64, [], [0]),
        ])
        # two uniforms in (0, 1) from fract(sin(i * a + b) * 43758.5453), then Box-Muller
        for k, (a, b) in enumerate(((12.9898, 0.1 + replaced), (78.233, 0.7 + replaced))):
            new_nodes += [
                _const(f"{p}_a{k}", a), _const(f"{p}_b{k}", b), _const(f"{p}_m{k}", 43758.5453),
                helper.make_node("Mul", [f"{p}_i", f"{p}_a{k}"], [f"{p}_x{k}"]),
                helper.make_node("Add", [f"{p}_x{k}", f"{p}_b{k}"], [f"{p}_y{k}"]),
                helper.make_node("Sin", [f"{p}_y{k}"], [f"{p}_s{k}"]),
                helper.make_node("Mul", [f"{p}_s{k}", f"{p}_m{k}"], [f"{p}_t{k}"]),
                helper.make_node("Floor", [f"{p}_t{k}"], [f"{p}_fl{k}"]),
                helper.make_node("Sub", [f"{p}_t{k}", f"{p}_fl{k}"], [f"{p}_u{k}"]),
            ]
        new_nodes += [
            _const(f"{p}_eps", 1e-7), _const(f"{p}_m2", -2.0), _const(f"{p}_tau", 2 * math.pi),
            helper.make_node("Add", [f"{p}_u0", f"{p}_eps"], [f"{p}_u0e"]),
            helper.make_node("Log", [f"{p}_u0e"], [f"{p}_log"]),
            helper.make_node("Mul", [f"{p}_log", f"{p}_m2"], [f"{p}_r2"]),
            helper.make_node("Sqrt", [f"{p}_r2"], [f"{p}_r"]),
            helper.make_node("Mul", [f"{p}_u1", f"{p}_tau"], [f"{p}_ang"]),
            helper.make_node("Cos", [f"{p}_ang"], [f"{p}_cos"]),
            helper.make_node("Mul", [f"{p}_r", f"{p}_cos"], [f"{p}_nflat"]),
            helper.make_node("Reshape", [f"{p}_nflat", f"{p}_shape"], [out]),
        ]
        replaced += 1
    if replaced:
        del graph.node[:]
        graph.node.extend(seed_nodes + new_nodes)
    return replaced
