"""Speech figures of a rendered dialogue, small enough to keep per sample, and their summary for the
manifest and the card: voices and their shares, per-turn quality, reply timing, turn-taking and
acoustics. The per-sample form is what the runner keeps; `summarise` works on any list of them."""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from kame_data.speech.live import reply_gaps


def speech_figures(r: Any) -> dict[str, Any]:
    """The speech side of one RenderedDialogue (turn voices and figures, turn-taking, acoustics)."""
    turns = []
    for k, (turn, tm) in enumerate(zip(r.dialogue.turns, r.timings)):
        q = r.turn_quality[k] if k < len(getattr(r, "turn_quality", ())) else {}
        wer = r.turn_wer[k] if k < len(r.turn_wer) else None
        turns.append({"role": turn.role, "voice": tm.voice, "seconds": round(tm.end - tm.start, 3), "wer": wer,
                      **{n: q.get(n) for n in ("dnsmos", "vad_outside_s", "vad_word_share", "lufs")}})
    speakers = [t.speaker for t in r.dialogue.turns]
    timings = [(t.start, t.end) for t in r.timings]
    backchannels, last_end = 0, {}
    for w in r.words:
        if getattr(w, "backchannel", False):
            backchannels += w.start - last_end.get(w.speaker, -9.0) > 0.3
            last_end[w.speaker] = w.end
    overlaps = sum(1 for k in range(1, len(timings))
                   if speakers[k] != speakers[k - 1] and timings[k][0] < timings[k - 1][1])
    acoustics = getattr(r, "acoustics", {}) or {}
    return {"turns": turns, "reply_gaps": reply_gaps(speakers, timings), "backchannels": int(backchannels),
            "overlaps": overlaps, "barge_ins": sum(1 for c in getattr(r, "turn_cut_words", ()) if c),
            "acoustics": {"snr_db": acoustics.get("snr_db"), "rt60": (acoustics.get("room") or {}).get("rt60"),
                          "mic": acoustics.get("mic"), "noise": acoustics.get("noise")} if acoustics else None}


def _stats(xs: list[float], digits: int = 3) -> dict[str, Any]:
    a = np.asarray(xs, np.float64)
    return {"n": len(xs), "median": round(float(np.median(a)), digits), "mean": round(float(a.mean()), digits),
            "min": round(float(a.min()), digits), "p95": round(float(np.percentile(a, 95)), digits),
            "max": round(float(a.max()), digits)}


def summarise(samples: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """The manifest's speech figures from per-sample `speech_figures` dicts (under a "speech" key or not)."""
    samples = [s.get("speech", s) for s in samples if s.get("speech", s)]
    turns = [t for s in samples for t in s.get("turns", [])]
    out: dict[str, Any] = {}
    if not turns:
        return out
    voices: dict[str, dict[str, Any]] = {}
    per_role: dict[str, int] = {}
    for t in turns:
        v = voices.setdefault(t["voice"], {"role": t["role"], "turns": 0, "seconds": 0.0, "wer": [], "dnsmos": []})
        v["turns"] += 1
        v["seconds"] += t["seconds"]
        per_role[t["role"]] = per_role.get(t["role"], 0) + 1
        for key in ("wer", "dnsmos"):
            if t.get(key) is not None:
                v[key].append(t[key])
    out["voices"] = {
        label: {"role": v["role"], "turns": v["turns"], "share": round(v["turns"] / per_role[v["role"]], 4),
                "minutes": round(v["seconds"] / 60, 2),
                "median_wer": round(float(np.median(v["wer"])), 4) if v["wer"] else None,
                "median_dnsmos": round(float(np.median(v["dnsmos"])), 3) if v["dnsmos"] else None}
        for label, v in sorted(voices.items(), key=lambda kv: (kv[1]["role"], -kv[1]["turns"], kv[0]))}
    out["distinct_voices"] = {role: sum(1 for v in out["voices"].values() if v["role"] == role) for role in per_role}
    for key in ("dnsmos", "vad_outside_s", "vad_word_share", "lufs"):
        values = [t[key] for t in turns if t.get(key) is not None]
        if values:
            out[f"turn_{key}"] = _stats(values)
    gaps = [g for s in samples for g in s.get("reply_gaps", [])]
    if gaps:
        out["reply_gap_s"] = {**_stats(gaps), "overlapping": round(sum(g < 0 for g in gaps) / len(gaps), 4)}
    n = len(samples)
    live = {"backchannels": sum(s.get("backchannels", 0) for s in samples),
            "overlaps": sum(s.get("overlaps", 0) for s in samples),
            "barge_ins": sum(s.get("barge_ins", 0) for s in samples)}
    live["dialogues_with_backchannel_or_overlap"] = round(
        sum(1 for s in samples if s.get("backchannels") or s.get("overlaps") or s.get("barge_ins")) / n, 4)
    out["turn_taking"] = live
    ac = [s["acoustics"] for s in samples if s.get("acoustics")]
    if ac:
        out["acoustics"] = {"dialogues": len(ac), "snr_db": _stats([a["snr_db"] for a in ac], 2),
                            "in_a_room": round(sum(a["rt60"] is not None for a in ac) / len(ac), 4)}
    return out
