"""The speed probe that carries a calibration's rates to another CPU (kame_data/plan/speed_probe.py)."""

import json
import os
import subprocess

import pytest

from kame_data.plan import speed_probe
from kame_data.machine import cpu_description
from kame_data.plan.projection import load_calibration, to_this_cpu
from tests.conftest import CLI

THEIRS = {"version": speed_probe.PROBE_VERSION, "cpu": "Another CPU (SomeVendor:avx2)",
          "core_s": {k: 1.0 for k in speed_probe.KINDS}}
SLOWER = {"tts": 1.5, "whisper": 2.0, "dnsmos": 2.5, "llm": 0.8, "signal": 1.2, "general": 1.1}


def _cpu_rates(cal: dict) -> dict[str, float]:
    """Every number of a calibration that is CPU time, by its path."""
    out = {f"{k}.{n}": v for k in ("speak_core_s_per_audio_s", "steps", "setup_core_s_per_worker") for n, v in cal[k].items()}
    out |= {k: cal[k] for k in ("qa_core_s_per_audio_s", "script_template_core_s_per_dialogue",
                                "write_s_per_audio_s", "write_fixed_core_s")}
    return out | {f"llamacpp.{s}.{k}": v for s, r in cal["llamacpp"].items() for k, v in r.items()
                  if k in speed_probe.LLM_RATES}


def test_every_cpu_rate_of_the_shipped_calibration_has_a_probe_kind():
    kinds = speed_probe.rate_kinds()
    cal = load_calibration()
    for key in ("speak_core_s_per_audio_s", "steps"):
        assert set(cal[key]) <= set(kinds[key]), key  # a new engine or step part needs its kind
    assert set(v for k in kinds.values() for v in (k.values() if isinstance(k, dict) else [k])) <= set(speed_probe.KINDS)


def test_scaling_multiplies_each_cpu_rate_by_its_kinds_ratio_and_nothing_else():
    cal = load_calibration()
    ours = {**THEIRS, "core_s": SLOWER}
    factor = speed_probe.ratios(THEIRS, ours)
    assert factor == SLOWER
    scaled = speed_probe.scale(cal, factor)
    before, after = _cpu_rates(cal), _cpu_rates(scaled)
    assert before.keys() == after.keys()
    assert after["qa_core_s_per_audio_s"] == pytest.approx(2.0 * before["qa_core_s_per_audio_s"], rel=1e-3)
    assert after["steps.quality"] == pytest.approx(2.5 * before["steps.quality"], rel=1e-3, abs=1e-5)
    assert after["speak_core_s_per_audio_s.espeak"] == pytest.approx(1.1 * before["speak_core_s_per_audio_s.espeak"], rel=1e-2)
    assert after["llamacpp.oracle.core_s_per_call"] == pytest.approx(0.8 * before["llamacpp.oracle.core_s_per_call"], rel=1e-3)
    assert all(after[k] >= before[k] or k.startswith("llamacpp") for k in before)
    for same in ("words_per_second", "yields", "qa_gpu"):  # no CPU time: speaking rates, yields, a GPU's rate
        assert scaled[same] == cal[same]


def test_a_probe_of_another_version_is_refused():
    with pytest.raises(ValueError, match="version"):
        speed_probe.ratios({**THEIRS, "version": 0}, THEIRS)


def _another_cpus_calibration(tmp_path):
    cal = {**load_calibration(), "cpu": THEIRS["cpu"], "cpu_fingerprint": "SomeVendor:avx2", "probe": THEIRS,
           "remeasured": []}
    path = tmp_path / "calibration.json"
    path.write_text(json.dumps(cal), "utf-8")
    return cal, path


def test_plan_on_another_cpu_scales_the_rates_by_the_cached_probe(tmp_path):
    """The CLI path: a calibration from another CPU, this CPU's probe already in the cache folder."""
    cal, path = _another_cpus_calibration(tmp_path)
    cache = tmp_path / "cache"
    cache.mkdir()
    ours = {"version": speed_probe.PROBE_VERSION, "cpu": cpu_description(), "core_s": SLOWER}
    (cache / "speed-probe.json").write_text(json.dumps({f"{cpu_description()}|v{speed_probe.PROBE_VERSION}": ours}))
    env = {**os.environ, "KAME_DATA_CACHE_DIR": str(cache)}
    runs = {flag: subprocess.run(CLI + ["plan", "quickstart", "--json", "--calibration", str(path), flag],
                                 capture_output=True, text=True, timeout=120, env=env) for flag in ("--probe", "--no-probe")}
    assert all(r.returncode == 0 for r in runs.values()), {k: r.stderr for k, r in runs.items()}
    assert "measuring this CPU" not in runs["--probe"].stderr  # cached
    plans = {k: json.loads(r.stdout)["projection"] for k, r in runs.items()}
    notes = " ".join(plans["--probe"]["notes"])
    assert f"rates measured on {THEIRS['cpu']}, scaled to this CPU" in notes and "whisper x2.00" in notes
    assert "is not the one the rates were measured on" in " ".join(plans["--no-probe"]["notes"])
    work = {k: {s["stage"]: s["work"] for s in p["stages"]} for k, p in plans.items()}
    assert work["--probe"]["oracle"] < work["--no-probe"]["oracle"]  # llm x0.8
    assert work["--probe"]["quality"] > 2 * work["--no-probe"]["quality"]  # dnsmos x2.5 (+ set-up x1.1)


def test_on_the_calibrations_own_cpu_nothing_is_scaled(tmp_path):
    cal = {**load_calibration(), "cpu": cpu_description(), "probe": {**THEIRS, "cpu": cpu_description()}}
    assert to_this_cpu(cal) is cal
    unprobed = {**cal, "cpu": "Another CPU", "probe": None}
    assert to_this_cpu(unprobed) is unprobed  # no probe stored: the rates as they are (and plan's other-CPU note)


@pytest.mark.slow
def test_the_probe_measures_this_cpu_once_and_caches_it(tmp_path):
    """The real workloads (piper, Whisper, DNSMOS, llama.cpp, a room, JSON and Parquet), through plan."""
    _, path = _another_cpus_calibration(tmp_path)
    env = {**os.environ, "KAME_DATA_CACHE_DIR": str(tmp_path / "cache")}
    first = subprocess.run(CLI + ["plan", "quickstart", "--calibration", str(path)], capture_output=True, text=True,
                           timeout=600, env=env)
    assert first.returncode == 0, first.stderr
    assert "measuring this CPU against the calibration's" in first.stderr
    stored = json.loads((tmp_path / "cache" / "speed-probe.json").read_text())
    ours = stored[f"{cpu_description()}|v{speed_probe.PROBE_VERSION}"]
    assert set(ours["core_s"]) == set(speed_probe.KINDS) and all(v > 0 for v in ours["core_s"].values())
    assert ours["core_s"]["whisper"] > ours["core_s"]["general"]  # a 30 s Whisper window outweighs a table
    second = subprocess.run(CLI + ["plan", "quickstart", "--calibration", str(path)], capture_output=True, text=True,
                            timeout=120, env=env)
    assert second.returncode == 0 and "measuring this CPU" not in second.stderr
    assert "scaled to this CPU" in second.stdout


def test_a_probe_that_fails_leaves_the_rates_as_measured_and_says_why(tmp_path, monkeypatch):
    """The probe runs in a process of its own; one that dies (here: an interpreter that only fails)
    costs the scaling, not the plan."""
    from kame_data.plan.projection import Resources, project

    cal, _ = _another_cpus_calibration(tmp_path)
    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path / "fresh"))
    monkeypatch.setattr(speed_probe.sys, "executable", "/bin/false")
    kept = to_this_cpu(cal)
    assert "scaled" not in kept and kept["speak_core_s_per_audio_s"] == cal["speak_core_s_per_audio_s"]
    notes = project(10, {"piper": 60.0}, {}, 1.0, Resources(cores=2), kept).notes
    assert any(n.startswith("the speed probe failed (exit status 1)") for n in notes)
    assert any("is not the one the rates were measured on" in n for n in notes)
    assert not (tmp_path / "fresh" / "speed-probe.json").exists()  # nothing cached from a failure


def test_a_calibration_probed_by_another_probe_version_is_not_scaled(tmp_path, monkeypatch):
    cal, _ = _another_cpus_calibration(tmp_path)
    monkeypatch.setenv("KAME_DATA_CACHE_DIR", str(tmp_path))
    ours = {"version": speed_probe.PROBE_VERSION, "cpu": cpu_description(), "core_s": SLOWER}
    (tmp_path / "speed-probe.json").write_text(json.dumps({f"{cpu_description()}|v{speed_probe.PROBE_VERSION}": ours}))
    kept = to_this_cpu({**cal, "probe": {**THEIRS, "version": 0}})
    assert "scaled" not in kept and "measure the calibration again" in kept["probe_failed"]
