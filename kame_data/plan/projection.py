"""Wall time and machine cost of a planned run on given resources, from per-stage rates measured
on a real machine (`benchmarks/calibrate.py`, stored as `kame_data/calibration.json`).

The pipeline overlaps its steps, so a run takes as long as its busiest resource: the CPU stages
(script, speech, an embedded LLM) share the cores of every node; the writer runs in the driver on
one core; a GPU or API backend is bound by its own throughput. Each stage's wall time is what it
would take alone on its resource; the total is the largest resource's time, and that resource's
biggest stage is the one that bounds the run.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from kame_data.llm.config import backend_spec
from kame_data.machine import cpu_fingerprint
from kame_data.oracle.stage import OracleStage
from kame_data.runner.write import WriteStep
from kame_data.script.stage import ScriptStage
from kame_data.speech.stage import SpeakStage

CALIBRATION = "calibration.json"


def load_calibration(path: str | os.PathLike | None = None) -> dict[str, Any]:
    """The rates measured by benchmarks/calibrate.py: a given file, else the bundled one."""
    if path is not None:
        return json.loads(Path(path).read_text("utf-8"))
    return json.loads(resources.files("kame_data").joinpath(CALIBRATION).read_text("utf-8"))


@dataclass(frozen=True)
class Resources:
    """What the run gets: per node `cores` and `gpus`, on `nodes` nodes; an LLM service's measured
    throughput (tokens/s, prompt and output together) where the backend is not embedded."""

    cores: int = 2
    gpus: int = 0
    nodes: int = 1
    llm_tokens_per_s: float | None = None
    usd_per_core_hour: float = 0.0
    usd_per_gpu_hour: float = 0.0

    @property
    def total_cores(self) -> int:
        return max(1, self.cores) * max(1, self.nodes)

    @property
    def total_gpus(self) -> int:
        return max(0, self.gpus) * max(1, self.nodes)


@dataclass
class StageTime:
    stage: str
    resource: str  # cpu | driver | gpu | api
    work: float | None  # core-seconds (cpu, driver) or seconds of the service (gpu, api); None: unknown
    wall_s: float | None  # alone on its resource
    basis: str  # where the figure comes from


@dataclass
class Projection:
    resources: Resources
    stages: list[StageTime] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def resource_wall(self) -> dict[str, float | None]:
        """Seconds each resource is busy: CPU stages add up on the shared cores."""
        out: dict[str, float | None] = {}
        for s in self.stages:
            key = s.resource if s.resource != "api" else f"api:{s.stage}"
            if s.wall_s is None:
                out[key] = None
            elif key in out:
                out[key] = None if out[key] is None else out[key] + s.wall_s
            else:
                out[key] = s.wall_s
        return out

    @property
    def total_s(self) -> float | None:
        walls = self.resource_wall().values()
        return None if any(w is None for w in walls) else max(walls, default=0.0)

    @property
    def bounding(self) -> StageTime | None:
        walls = self.resource_wall()
        known = {k: v for k, v in walls.items() if v is not None}
        if not known:
            return None
        top = max(known, key=known.get)
        pool = [s for s in self.stages if (s.resource if s.resource != "api" else f"api:{s.stage}") == top]
        return max(pool, key=lambda s: s.wall_s or 0.0)

    def machine_cost(self) -> float | None:
        total = self.total_s
        if total is None:
            return None
        r = self.resources
        return total / 3600 * (r.total_cores * r.usd_per_core_hour + r.total_gpus * r.usd_per_gpu_hour)

    def to_dict(self) -> dict[str, Any]:
        b = self.bounding
        return {"resources": self.resources.__dict__, "total_s": self.total_s,
                "bounding_stage": b.stage if b else None, "machine_cost_usd": self.machine_cost(),
                "stages": [s.__dict__ for s in self.stages], "notes": list(self.notes)}


def _llm_stage(stage: str, kind: str, calls: float, tokens: float, cal: dict, res: Resources,
               notes: list[str]) -> StageTime:
    """An LLM stage on its backend: one on this machine's cores costs measured core-seconds per
    call; a GPU or a service elsewhere runs at the throughput given for it."""
    where = backend_spec(kind).runs_on
    if where == "cpu":
        rate = cal[kind][stage]["core_s_per_call"]
        # loading the model, once per instance: one instance per core by default
        work, basis = _plus_setup(calls * rate, f"{kind} on the cores, {rate:.2f} core-s per call (calibration)",
                                  cal[kind][stage].get("setup_core_s_per_instance"), "instance", res)
        return StageTime(stage, "cpu", work, work / res.total_cores, basis)
    if res.llm_tokens_per_s:
        tps = res.llm_tokens_per_s
        return StageTime(stage, where, tokens / tps, tokens / tps, f"{kind} at {tps:,.0f} tokens/s (given)")
    if where == "gpu" and res.total_gpus == 0:
        notes.append(f"{stage}: the {kind} backend needs GPUs (--gpus)")
    notes.append(f"{stage}: the {kind} backend's throughput is not measured here: give --llm-tokens-per-s "
                 "(benchmarks/gpu_check.py prints it for vLLM on a GPU)")
    return StageTime(stage, where, None, None, f"{kind}: throughput unknown")


def _part_rate(part: str, declared: float, cal: dict[str, Any]) -> tuple[float, str]:
    """A part's core-s per audio second: the calibration's where it measured it, else the step's estimate."""
    measured = (cal.get("steps") or {}).get(part)
    if measured is not None:
        return float(measured), f"{part} {float(measured):.3f}"
    return declared, f"{part} {declared:.3f} (declared, not calibrated)"


def _plus_setup(work: float, basis: str, setup: float | None, per: str, res: Resources) -> tuple[float, str]:
    """A stage's work plus what each of its processes (`per`: worker, instance) spends once (start-up,
    imports, models): one per core, as a run starts them by default. Nothing at paper scale; most
    of a 40-dialogue run's acoustics."""
    if not setup:
        return work, basis
    return work + setup * res.total_cores, f"{basis} + {setup:.1f} core-s per {per} x {res.total_cores}"


def _with_setup(stage: str, work: float, basis: str, res: Resources, cal: dict[str, Any]) -> tuple[float, str]:
    """`_plus_setup` with the step's set-up per worker from the calibration (`setup_core_s_per_worker`)."""
    return _plus_setup(work, basis, (cal.get("setup_core_s_per_worker") or {}).get(stage), "worker", res)


def project(dialogues: int, role_seconds: dict[str, float], llm: dict[str, dict[str, Any]],
            qa: float | tuple[float, float], res: Resources, cal: dict[str, Any],
            step_parts: dict[str, dict[str, float]] | None = None, device: str = "auto") -> Projection:
    """`role_seconds`: seconds of speech per engine name over the whole run; `llm`: per LLM stage
    its backend kind, calls and tokens (only stages that call an LLM); `qa`: the share of the audio
    Whisper QA hears (speak.qa.sample; 0 with QA off), or (on the CPU, on a GPU: speak.qa.gpu_sample),
    which also draws the dialogues the answer round trip hears; `step_parts`: per step, the parts it switches
    on with their declared core-s per audio second (StepSpec.cost): a part named after its step is a
    CPU stage of its own (quality, acoustics), others add to their step's stage (the speak step's
    variants, turn-taking, answer round-trip); `device`: the recipe's (docs/design.md, "Devices"):
    with GPUs and a measured `qa_gpu` rate, Whisper QA is a GPU stage plus the CPU share it keeps."""
    p = Projection(res)
    step_parts = step_parts or {}
    audio_s = sum(role_seconds.values())
    speak = sum(secs * cal["speak_core_s_per_audio_s"][engine] for engine, secs in role_seconds.items())
    script_work = dialogues * cal["script_template_core_s_per_dialogue"]
    script, speak_name, oracle = ScriptStage.name, SpeakStage.name, OracleStage.name
    p.stages.append(StageTime(script, "cpu", script_work, script_work / res.total_cores,
                              "template rendering (calibration)"))
    if script in llm:
        s = llm[script]
        p.stages.append(_llm_stage(script, s["kind"], s["calls"], s["tokens"], cal, res, p.notes))
        p.stages[-1].stage = f"{script} (LLM)"
    basis = " + ".join(f"{e} {cal['speak_core_s_per_audio_s'][e]:.3f}" for e in role_seconds)
    cpu_share, gpu_share = qa if isinstance(qa, tuple) else (qa, qa)
    gpu_qa = cal.get("qa_gpu") if gpu_share and res.total_gpus and device != "cpu" else None
    qa = gpu_share if gpu_qa else cpu_share
    if qa:
        rate = cal["qa_core_s_per_audio_s"] * (gpu_qa["cpu_share"] if gpu_qa else 1.0)
        speak += audio_s * qa * rate
        basis += (f" + Whisper QA {rate:.3f}" + (f" (its CPU share beside the GPU, {gpu_qa['cpu_share']:.2f})" if gpu_qa else "")
                  + (f" x {qa:g} sampled" if qa < 1 else ""))
    basis += " (calibration)"
    for part, declared in step_parts.get(speak_name, {}).items():
        rate, said = _part_rate(part, declared, cal)
        if part == "answer" and 0 < qa < 1:  # with QA on, the round trip hears QA's sample only
            rate, said = rate * qa, f"{said} x {qa:g} sampled"
        speak += audio_s * rate
        basis += f" + {said}"
    speak, basis = _with_setup(speak_name, speak, f"core-s per audio-s: {basis}", res, cal)
    p.stages.append(StageTime(speak_name, "cpu", speak, speak / res.total_cores, basis))
    if gpu_qa:
        work = audio_s * qa * gpu_qa["gpu_s_per_audio_s"]
        p.stages.append(StageTime(f"{speak_name}:whisper", "gpu", work, work / res.total_gpus,
                                  f"GPU-s per audio-s: {gpu_qa['gpu_s_per_audio_s']:.3f}, measured: {gpu_qa['measured']}"))
    for step, parts in step_parts.items():
        if step == speak_name:
            continue
        for part, declared in parts.items():
            rate, said = _part_rate(part, declared, cal)
            name = part if part == step else f"{step}:{part}"
            work, basis = _with_setup(name, audio_s * rate, f"core-s per audio-s: {said}", res, cal)
            p.stages.append(StageTime(name, "cpu", work, work / res.total_cores, basis))
    if oracle in llm:
        o = llm[oracle]
        p.stages.append(_llm_stage(oracle, o["kind"], o["calls"], o["tokens"], cal, res, p.notes))
    write = audio_s * cal["write_s_per_audio_s"] + cal.get("write_fixed_core_s", 0.0)
    p.stages.append(StageTime(WriteStep.name, "driver", write, write, "Parquet shards in the driver, one core"
                              + (f" (+ {cal['write_fixed_core_s']:.1f} s per run: the card)" if cal.get("write_fixed_core_s") else "")))
    if res.gpus and not any(s.resource == "gpu" for s in p.stages):
        p.notes.append("no stage of this recipe uses the GPUs (an embedded model runs on the CPU cores; "
                       "a GPU backend such as vllm would, and Whisper QA with device: auto)")
    if gpu_qa:
        p.notes.append("on the GPUs: Whisper QA (measured). The TTS engines and DNSMOS stay on the CPU rates: on a GPU "
                       "(onnxruntime-gpu) they are unmeasured")
    p.notes.append(f"rates measured on {cal.get('machine', 'an unnamed machine')} ({cal.get('measured', '?')}"
                   + (f", {cal['cpu']}" if cal.get("cpu") else "") + "); scaled linearly in cores and nodes")
    p.notes.extend(other_cpu(cal))
    return p


def _calibration_cpus(cal: dict[str, Any]) -> set[str]:
    """The fingerprints of the CPUs that measured a calibration's rates: a part remeasured later
    (`calibrate.py --only`) names its own."""
    return {cal.get("cpu_fingerprint", "")} | {r.get("cpu_fingerprint", "") for r in cal.get("remeasured", [])}


def to_this_cpu(cal: dict[str, Any], probe: bool = True, say=None) -> dict[str, Any]:
    """The calibration carried to this machine's CPU: where another CPU measured it and stored its
    speed probe, each CPU rate is scaled by how much longer this CPU takes for that kind of work
    (kame_data/plan/speed_probe.py; measured once per CPU, about 15 s). Unchanged on the calibration's own
    CPU, with `probe` off, or for a calibration without a probe or mixed from several CPUs."""
    from kame_data.plan import speed_probe
    from kame_data.machine import cpu_description

    theirs = cal.get("probe")
    if not probe or not theirs or theirs.get("cpu") == cpu_description() or len(_calibration_cpus(cal)) > 1:
        return cal
    try:
        factor = speed_probe.ratios(theirs, ours := speed_probe.this_cpu(say=say or (lambda _: None)))
    except (speed_probe.ProbeFailed, ValueError) as e:  # a dead probe, or one of another version
        return cal | {"probe_failed": str(e)}
    return speed_probe.scale(cal, factor) | {"scaled": {"from": theirs["cpu"], "to": ours["cpu"], "factors": factor,
                                                        "unmeasured": sorted(set(speed_probe.KINDS) - set(factor))}}


def other_cpu(cal: dict[str, Any]) -> list[str]:
    """A note when the calibration's CPU is not this machine's: rates measured on one 2-core machine
    predicted 1.64x the CPU time the same work took on another (benchmarks/plan_check.py, 2026-12-05),
    so a plan for other hardware needs rates measured there, or scaled by the speed probe (to_this_cpu)."""
    here = cpu_fingerprint()
    if cal.get("scaled"):
        s = cal["scaled"]
        return [f"rates measured on {s['from']}, scaled to this CPU by its speed on each kind of work ("
                + ", ".join(f"{k} x{v:.2f}" for k, v in s["factors"].items())
                + (f"; not measured here, so as they are: {', '.join(s['unmeasured'])}" if s.get("unmeasured") else "")
                + "); a calibration measured here is closer: `python benchmarks/calibrate.py --out FILE`, "
                  "then plan with --calibration FILE"]
    theirs = _calibration_cpus(cal)
    if theirs == {here}:
        return []
    return ([cal["probe_failed"]] if cal.get("probe_failed") else []) + [f"this machine's CPU ({here}) is not the one the rates were measured on "
            f"({', '.join(sorted(t or 'not recorded' for t in theirs))}): two 2-core CPUs differed by 1.6x in all and up to 3.4x per step; "
            "measure yours with `python benchmarks/calibrate.py --out FILE`, then plan with --calibration FILE"]


def what_moves(stage: StageTime) -> str:
    """What would shorten a run this stage bounds."""
    if stage.resource == "driver":
        return "a faster core: the driver writes every shard on one"
    if stage.resource in ("api", "gpu"):
        return "a faster service or more of it (--llm-tokens-per-s is its measured throughput)"
    if stage.stage.startswith(ScriptStage.name) and stage.stage != ScriptStage.name:
        return "script rewrites on a served model (script.llm.backend), or the template style"
    if stage.stage == OracleStage.name:
        return ("the oracle on a served model (oracle.backend.kind: openai, or vllm on GPUs), or more cores / "
                "nodes; a longer oracle.interval makes fewer calls")
    if stage.stage == SpeakStage.name:
        return "more cores or nodes; faster voices (piper) or Whisper QA on a sample (speak.qa.sample)"
    return "more cores or nodes"


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "?"
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 2 * 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 3 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def format_projection(p: Projection) -> list[str]:
    r = p.resources
    head = (f"wall time on {r.nodes} node{'s' * (r.nodes != 1)} x {r.cores} cores"
            + (f" + {r.gpus} GPU{'s' * (r.gpus != 1)}" if r.gpus else "") + " (stages overlap):")
    lines = [head, f"  {'stage':<13} {'resource':<8} {'work':>14} {'wall alone':>11}  basis"]
    for s in p.stages:
        unit = "core-h" if s.resource in ("cpu", "driver") else "h"
        work = "?" if s.work is None else (f"{s.work / 3600:,.1f} {unit}" if s.work >= 360
                                            else f"{s.work:,.0f} {unit[:-2]}-s" if unit != "h" else f"{s.work:,.0f} s")
        lines.append(f"  {s.stage:<13} {s.resource:<8} {work:>14} {format_duration(s.wall_s):>11}  {s.basis}")
    b = p.bounding
    lines.append(f"  total {format_duration(p.total_s)}; bounded by {b.stage if b else '?'} "
                 f"({b.resource if b else '?'})")
    if b is not None:
        lines.append(f"  to shorten it: {what_moves(b)}")
    cost = p.machine_cost()
    if r.usd_per_core_hour or r.usd_per_gpu_hour:
        lines.append(f"  machine cost: ${cost:,.2f}" if cost is not None else "  machine cost: ?")
    return lines + [f"  note: {n}" for n in p.notes]
