"""The card's speech sections: which voices speak and how well, per-turn quality, turn-taking and
reply timing, and what the user's acoustics were. Every figure comes from the manifest's `quality`
(built from the rows when the run wrote them), so the card cannot disagree with the data."""

from __future__ import annotations

from typing import Any

# Keys of manifest["quality"] these sections show (the card's generic quality table skips them).
SPEECH_KEYS = ("voices", "distinct_voices", "turn_dnsmos", "turn_vad_outside_s", "turn_vad_word_share",
               "turn_lufs", "reply_gap_s", "turn_taking", "acoustics")
_MEASURES = {
    "turn_dnsmos": "DNSMOS overall (1-5, higher is better)",
    "turn_vad_word_share": "share of word time the VAD hears as speech",
    "turn_vad_outside_s": "seconds of VAD speech outside the words",
    "turn_lufs": "loudness (LUFS)",
}


def _fmt(v: Any, pct: bool = False) -> str:
    if v is None:
        return "–"
    return f"{v:.1%}" if pct else f"{v:g}"


def _pool_line(pool: dict[str, Any], cast: list[str]) -> str:
    """The user pool as the speaker models hear it (manifest speak.speaker_pool), counted over the
    user voices the rows actually hold (`cast`) where the manifest has the pool's groups."""
    worst = max(pool.get("to_assistant", {}).items(), key=lambda kv: kv[1], default=None)
    joined = "; ".join(", ".join(g) for g in pool.get("one_speaker", []))
    groups = pool.get("groups")
    speakers = pool["speakers"] if groups is None or not cast else sum(1 for g in groups if set(g) & set(cast))
    models = pool.get("speaker_models") or {}
    by_model = ", ".join(f"{m['model']} {m['speakers']} (one speaker at {m['threshold']:g} or more)"
                         for m in models.values())
    voices = f"{len(cast)} of its {pool['voices']} voices cast" if groups is not None and cast else f"{pool['voices']} voices"
    unmeasured = [c for c in cast if groups is not None and not any(c in g for g in groups)]
    if unmeasured:
        voices += f" ({len(unmeasured)} of them never measured: {', '.join(unmeasured)})"
    return (f"User pool: {voices}; {speakers} distinct speakers among them as measured by `kame-data voices check`"
            + (f" (the pool's {pool['measured']} measured voices by each speaker model: {by_model}; voices either model "
               "hears as one person, or variants of one engine voice, count once)" if models else
               f" (speaker model {pool.get('speaker_model')}, one speaker at {pool.get('threshold')} or more)")
            + (f"; heard as one speaker: {joined}" if joined else "")
            + (f"; closest to the assistant: {worst[0]} at {worst[1]:g}" if worst else "") + ".")


def _sampled(checked: dict[str, Any] | None) -> str:
    """Says how many turns QA heard when `speak.qa.sample` left some unchecked."""
    if not checked or checked["checked"] >= checked["turns"]:
        return ""
    return (f" checked ({checked['checked']} of {checked['turns']} turns, {checked['share']:.0%}: "
            "speak.qa.sample draws the dialogues Whisper hears)")


def speech_sections(manifest: dict[str, Any]) -> list[str]:
    q = manifest.get("quality") or {}
    if not q.get("voices"):
        return []
    screen = (manifest.get("speak") or {}).get("voice_screen") or {}
    pool = (manifest.get("speak") or {}).get("speaker_pool") or {}
    reply = ((manifest.get("recipe") or {}).get("speak") or {}).get("reply") or {}
    distinct = q.get("distinct_voices") or {}
    lines = ["", "### Voices", "",
             f"{len(q['voices'])} distinct voices: " + ", ".join(f"{n} {role}" for role, n in sorted(distinct.items()))
             + ". Share: of that role's turns. WER: Whisper base against the spoken text, per turn"
             + _sampled(q.get("qa_checked"))
             + (" (screening: median over fixed sentences before casting)" if screen else "") + ".", "",
             "| voice | role | turns | share | minutes | median WER | median DNSMOS |"
             + (" screening WER |" if screen else "") + (" to the assistant | closest voice |" if pool else ""),
             "|---|---|---|---|---|---|---|" + ("---|" if screen else "") + ("---|---|" if pool else "")]
    if pool:
        lines[4:4] = ["", _pool_line(pool, [k for k, v in q["voices"].items() if v["role"] == "user"])]
    for label, v in q["voices"].items():
        near = pool.get("closest", {}).get(label)
        lines.append(f"| {label} | {v['role']} | {v['turns']} | {_fmt(v['share'], True)} | {v['minutes']} | "
                     f"{_fmt(v['median_wer'])} | {_fmt(v['median_dnsmos'])} |"
                     + (f" {_fmt(screen.get(label))} |" if screen else "")
                     + (f" {_fmt(pool.get('to_assistant', {}).get(label))} | "
                        f"{f'{near[0]} {near[1]:g}' + (f' ({near[2]})' if len(near) > 2 else '') if near else '–'} |" if pool else ""))
    lines += round_trip_lines(q, (manifest.get("recipe") or {}).get("speak") or {})
    measured = [k for k in _MEASURES if k in q]
    if measured:
        lines += ["", "### Per-turn quality (clean render)", "", "| measure | turns | median | p95 | min | max |",
                  "|---|---|---|---|---|---|"]
        lines += [f"| {_MEASURES[k]} | {q[k]['n']} | {q[k]['median']} | {q[k]['p95']} | {q[k]['min']} | {q[k]['max']} |"
                  for k in measured]
    lines += ["", "### Turn-taking and reply timing", "", "| what | value |", "|---|---|"]
    gap = q.get("reply_gap_s")
    if gap:
        limit = reply.get("max_p95")
        lines.append(f"| assistant reply start after the user's last word (s) | median {gap['median']}, "
                     f"p95 {gap['p95']}" + (f" (limit {limit}: {'within' if gap['p95'] <= limit else 'OVER'})"
                                            if limit is not None else "") + f", min {gap['min']}, max {gap['max']} |")
        lines.append(f"| replies that start before the user has finished | {_fmt(gap['overlapping'], True)} |")
    live = q.get("turn_taking") or {}
    for key, text in (("backchannels", "backchannels"), ("overlaps", "overlapping turn changes"),
                      ("barge_ins", "user barge-ins (assistant cut off)")):
        if key in live:
            lines.append(f"| {text} | {live[key]} |")
    if "dialogues_with_backchannel_or_overlap" in live:
        lines.append(f"| dialogues with a backchannel, overlap or barge-in | "
                     f"{_fmt(live['dialogues_with_backchannel_or_overlap'], True)} |")
    ac = q.get("acoustics")
    if ac:
        snr = ac["snr_db"]
        lines += ["", "### Acoustics of the user channel", "",
                  f"{ac['dialogues']} dialogues have a user channel with background noise (SNR median {snr['median']} dB, "
                  f"{snr['min']}-{snr['max']} dB), {_fmt(ac['in_a_room'], True)} of them in a simulated room; the "
                  "assistant channel is the clean render. Each row's `acoustics` column holds what was drawn."]
    return lines


def round_trip_lines(q: dict[str, Any], speak: dict[str, Any]) -> list[str]:
    """What Whisper heard: the share of turns checked (speak.qa.sample on the CPU, gpu_sample on a
    GPU), the WER distribution of those turns, and the answer round trip's dialogues and failures
    with the failure rate's 95% interval (on a sample, the rate is an estimate)."""
    wer, checked, answer = q.get("wer"), q.get("qa_checked"), q.get("answer_check")
    qa = speak.get("qa") or {}
    if not qa.get("enabled"):
        return ["", "### Speech round trip (Whisper)", "",
                "Off: the recipe leaves `speak.qa` off, so Whisper heard no turn (no WER check, no answer round "
                "trip). Turn it on with `speak: {qa: {enabled: true}}`."]
    if not wer and not answer:
        return []
    lines = ["", "### Speech round trip (Whisper)", "", "| what | value |", "|---|---|"]
    if checked:
        drawn = ", ".join(f"{k} {qa[k]:g}" for k in ("sample", "gpu_sample") if qa.get(k) is not None)
        lines.append(f"| turns heard | {checked['checked']:,} of {checked['turns']:,} ({_fmt(checked['share'], True)})"
                     + (f"; speak.qa: {drawn}" if drawn else "") + " |")
    if wer:
        lines.append(f"| per-turn WER of the turns heard | median {wer['median']}, mean {wer['mean']}, "
                     f"p90 {wer.get('p90', '–')}, max {wer['max']} |")
    if answer:
        low, high = answer["ci95"]
        lines.append(f"| answer round trip: dialogues heard | {answer['dialogues']:,} |")
        lines.append(f"| answer lost (rejected after every voice) | {answer['lost']:,} ({_fmt(answer['rate'], True)}, "
                     f"95% interval {_fmt(low, True)}-{_fmt(high, True)}) |")
    return lines
