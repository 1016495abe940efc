"""One-line texts of a row's speech figures for the review page: a turn's WER, DNSMOS, VAD and
loudness, and what the acoustics step did to the user channel."""

from __future__ import annotations

from typing import Any


def turn_quality_text(turn: dict[str, Any]) -> str:
    parts = []
    if turn.get("wer") is not None:
        parts.append(f"WER {turn['wer']:.2f}")
    if turn.get("dnsmos") is not None:
        parts.append(f"DNSMOS {turn['dnsmos']:.2f}")
    if turn.get("vad_word_share") is not None:
        parts.append(f"VAD speech in {turn['vad_word_share']:.0%} of word time, {turn.get('vad_outside_s') or 0:.2f} s outside")
    if turn.get("lufs") is not None:
        parts.append(f"{turn['lufs']:.1f} LUFS")
    if turn.get("cut_words"):
        parts.append(f"cut off by a barge-in ({turn['cut_words']} words unsaid)")
    return " · ".join(parts)


def acoustics_text(acoustics: dict[str, Any] | None) -> str:
    if not acoustics:
        return ""
    room = acoustics.get("room")
    where = (f"room RT60 {room['rt60']:.2f} s, {room['distance']:.1f} m from the mic" if room else "no room")
    return (f"user channel: {acoustics['noise']} noise at {acoustics['snr_db']:.1f} dB SNR, {where}, "
            f"{acoustics['mic']} mic, gain {acoustics['gain_db']:+.1f} dB")
