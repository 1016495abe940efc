"""`kame-data review`: one self-contained HTML page to see, hear and flag oracle ladders.

The page works offline (no CDN, no external file): audio is embedded as base64 `data:` URIs and
the data travels in `<script type="application/json">` blocks with `<`, `>` and `&` escaped, which
the page's own script renders with `textContent` only. A Content-Security-Policy admits that one
script by its hash, so even text that slipped through as markup could not run.

Audio: a dataset's WAV is 96 kB per second, and a browser parses about 100 MB of page per second,
so `auto` embeds the exact WAV bytes while the page stays small and Ogg/Opus (about 6 kB/s, the
same stereo channels) beyond that; `wav` or `opus` force one, `none` leaves audio out.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import logging
import random
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from statistics import mean
from typing import Any, Optional

from kame_data.atomic import write_text
from kame_data.dataset.folder import META_COLUMNS, DatasetDir, DatasetError
from kame_data.dataset.stats import RowStats, early_events
from kame_data.oracle.metrics import reply_spans, rouge_l, token_f1, true_replies
from kame_data.review.speech import acoustics_text, turn_quality_text

log = logging.getLogger(__name__)

AUDIO_MODES = ("auto", "wav", "opus", "none")
WAV_BUDGET = 48_000_000  # bytes of base64 WAV that `auto` embeds as is (about 0.5 s of parsing)
MIME = {"wav": "audio/wav", "opus": "audio/ogg"}
MAX_REJECT_ROWS = 500
OPUS_LEVEL = 0.92  # libsndfile's Opus compression level: about 50 kbit/s for 24 kHz stereo speech


@dataclass
class ReviewPage:
    path: Path
    cards: int  # dialogues with a card on the page
    dialogues: int  # dialogues in the dataset (the summary covers them all)
    audio: str  # "wav" | "opus" | "none"
    size: int  # bytes of the page


def script_json(obj: Any) -> str:
    """JSON safe inside a `<script>` element: no `<`, `>` or `&` can end it or open a comment."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        s = s.replace(ch, esc)
    return s


def _asset(name: str) -> str:
    return resources.files("kame_data.review").joinpath("assets", name).read_text("utf-8")


def _csp_hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode() + "'"


def _opus(wav: bytes) -> bytes:
    import soundfile as sf

    pcm, sr = sf.read(io.BytesIO(wav), dtype="int16", always_2d=True)
    buf = io.BytesIO()
    with sf.SoundFile(buf, "w", sr, pcm.shape[1], format="OGG", subtype="OPUS", compression_level=OPUS_LEVEL) as f:
        f.write(pcm)
    return buf.getvalue()


def _quantiles(xs: list[float]) -> list[float]:
    s = sorted(xs)
    return [round(s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))], 3) for q in (0.25, 0.5, 0.75)]


def _histogram(values: list[float], bins: int = 12) -> dict[str, list[float]]:
    if not values:
        return {"edges": [], "counts": []}
    lo, hi = min(values), max(values)
    step = max((hi - lo) / bins, 1e-9)
    for nice in (0.5, 1, 2, 5, 10, 15, 20, 30, 60, 120, 300):
        if nice >= step:
            step = nice
            break
    start = step * int(lo // step)
    n = int((hi - start) // step) + 1
    counts = [0] * n
    for v in values:
        counts[min(n - 1, int((v - start) // step))] += 1
    return {"edges": [round(start + i * step, 3) for i in range(n + 1)], "counts": counts}


def _card(row: dict[str, Any], audio_index: int) -> dict[str, Any]:
    words, events = row["words"], row["oracle"]
    spans = reply_spans(words, events)
    replies: list[str] = []
    reply_words: list[list[int]] = []
    out_events = []
    early = {i for i, _ in early_events(row)}
    arrived = row.get("oracle_arrival") or [None] * len(events)  # a latency model's timing (dataset/rows.py)
    for i, (e, span, truth) in enumerate(zip(events, spans, true_replies(words, events))):
        a = arrived[i]
        if truth not in replies:
            replies.append(truth)
            reply_words.append(span)
        out_events.append({"t": e["timestamp_ms"], "level": e["level"], "ratio": round(e["current_spoken_ratio"], 3),
                           "prediction": e["prediction"], "hint": e["hint"], "reply": replies.index(truth),
                           "f1": round(token_f1(e["prediction"], truth), 3),
                           "rouge": round(rouge_l(e["prediction"], truth), 3), "channel": e["channel"],
                           "early": i in early,
                           **({"arrival": a["piece_ms"][0] if a["frame"] is not None and a["piece_ms"] else None,
                               "served": f"{a['read']} read, {a['late']} late, {a['cut']} cut"
                               if a["frame"] is not None else ("never played" if a["sent"] else "never asked")}
                              if a is not None else {})})
    return {
        "id": row["id"], "item": row["item_id"], "source": row["source"], "category": row["category"],
        "variant": row["variant"], "duration": row["duration"],
        "turns": [{"speaker": t["speaker"], "role": t["role"], "start": t["start"], "end": t["end"],
                   "voice": t["voice"], "text": t["text"], "quality": turn_quality_text(t)} for t in row["turns"]],
        "words": [[w["speaker"], w["word"], w["start"], w["end"], int(bool(w.get("backchannel")))] for w in words],
        "acoustics": acoustics_text(row.get("acoustics")),
        "events": out_events, "replies": replies, "reply_words": reply_words, "audio": audio_index,
    }


def _summary(ds: DatasetDir, stats: RowStats) -> dict[str, Any]:
    """The page's summary: figures over every row, and the rejects."""
    rejects = ds.rejects()
    by_reason: dict[str, int] = {}
    for r in rejects:
        reason = str(r.get("reason", "?"))
        by_reason[reason] = by_reason.get(reason, 0) + 1
    if not rejects:
        by_reason = dict(ds.manifest.get("rejects", {}))
    f1s = {lv: [] for lv in range(6)} | (stats.f1_values or {})
    rouges = {lv: [] for lv in range(6)} | (stats.rouge_values or {})
    categories = {f"{source} / {category}": n for (source, category), n in stats.per_category.items()}
    return {
        "dialogues": stats.samples,
        "events": stats.events,
        "early_truth": stats.early_truth,
        "seconds": round(stats.seconds, 2),
        "levels": [{"level": lv, "events": len(xs), "f1_mean": round(mean(xs), 3) if xs else None,
                    "f1_q": _quantiles(xs) if xs else None,
                    "rouge_mean": round(mean(rouges[lv]), 3) if rouges[lv] else None,
                    "rouge_q": _quantiles(rouges[lv]) if rouges[lv] else None} for lv, xs in sorted(f1s.items())],
        "similarity_by_source": stats.manifest_fields()["oracle_similarity_by_source"],
        "durations": _histogram([d for per_source in stats.durations.values() for d in per_source]),
        "per_source": {s: g.dialogues for s, g in sorted(stats.per_source.items())},
        "per_category": dict(sorted(categories.items())),
        "rejects": dict(sorted(by_reason.items(), key=lambda kv: (-kv[1], kv[0]))),
        "reject_rows": [{k: str(r.get(k, "")) for k in ("stage", "id", "reason", "detail")}
                        for r in rejects[:MAX_REJECT_ROWS]],
        "reject_total": len(rejects),
    }


def _audio_blocks(ds: DatasetDir, ids: list[str], mode: str) -> list[str]:
    """base64 audio per id (in `ids` order), re-encoded to Opus in parallel when asked."""
    index = {rid: i for i, rid in enumerate(ids)}
    wavs: list[bytes] = [b""] * len(ids)
    for row in ds.rows(columns=["id", "audio"], ids=ids):
        wavs[index[row["id"]]] = row["audio"]["bytes"]
    if mode == "opus":
        digests = [hashlib.sha1(w).hexdigest() for w in wavs]
        unique = dict(zip(digests, wavs))  # replicated rows encode once
        with ThreadPoolExecutor() as pool:
            encoded = dict(zip(unique, pool.map(_opus, unique.values())))
        wavs = [encoded[d] for d in digests]
    return [base64.b64encode(w).decode("ascii") for w in wavs]


def build_page(out: str | Path, sample: Optional[int] = None, seed: int = 0, audio: str = "auto",
               title: Optional[str] = None) -> tuple[str, dict[str, Any]]:
    """The page's HTML and a few facts about it (cards, dialogues, audio mode)."""
    if audio not in AUDIO_MODES:
        raise DatasetError(f"audio must be one of {', '.join(AUDIO_MODES)}, not {audio!r}")
    ds = DatasetDir.open(out, check_shards=True)
    ds.verify_checksums()
    total = ds.num_rows()
    keep = set(random.Random(seed).sample(range(total), sample)) if sample is not None and sample < total else None
    stats, picked = RowStats(keep_f1=True), []
    columns = META_COLUMNS + (("acoustics",) if "acoustics" in ds.parquet(ds.shards()[0]).schema_arrow.names else ())
    for i, row in enumerate(ds.rows(columns)):
        stats.add_row(row)
        if keep is None or i in keep:
            picked.append(row)
    if not picked:
        raise DatasetError(f"{ds.root} has no rows to review")
    if audio == "auto":
        wav_b64 = sum(r["duration"] for r in picked) * 24000 * 4 * 4 / 3
        audio = "wav" if wav_b64 <= WAV_BUDGET else "opus"
        log.info("audio: %s (the WAV would take %.0f MB of page)", audio, wav_b64 / 1e6)
    ids = [r["id"] for r in picked]
    blocks = _audio_blocks(ds, ids, audio) if audio != "none" else []

    m = ds.manifest
    name = m.get("recipe_name") or ds.root.name
    data = {
        "title": title or f"kame-data review: {name}",
        "dataset": {"name": name, "path": str(ds.root), "config_hash": m.get("config_hash", ""),
                    "format": m.get("format", ""), "model": (m.get("llm") or {}).get("model", ""),
                    "backend": (m.get("llm") or {}).get("backend", "")},
        "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
        "audio": {"mode": audio, "mime": MIME.get(audio, "")},
        "summary": _summary(ds, stats),
        "dialogues": [_card(r, i if blocks else -1) for i, r in enumerate(picked)],
    }
    css, js = _asset("review.css"), _asset("review.js")
    csp = (f"default-src 'none'; script-src {_csp_hash(js)}; style-src {_csp_hash(css)}; "
           "media-src data: blob:; img-src data:; base-uri 'none'; form-action 'none'")
    head_title = html.escape(data["title"], quote=True)
    parts = [
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n",
        f"<meta http-equiv=\"Content-Security-Policy\" content=\"{csp}\">\n",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n",
        f"<title>{head_title}</title>\n<link rel=\"icon\" href=\"data:,\">\n<style>{css}</style>\n</head>\n",
        _asset("review.html"),
        f"<script type=\"application/json\" id=\"review-data\">{script_json(data)}</script>\n",
        f"<script>{js}</script>\n",
    ]
    # After the script: the first cards render before the parser reaches the (large) audio.
    parts += [f"<script type=\"application/json\" id=\"audio-{i}\">\"{b}\"</script>\n" for i, b in enumerate(blocks)]
    parts.append("</body></html>\n")
    return "".join(parts), {"cards": len(picked), "dialogues": stats.samples, "audio": audio}


def write_review(out: str | Path, dest: str | Path, sample: Optional[int] = None, seed: int = 0,
                 audio: str = "auto") -> ReviewPage:
    """Write the review page of dataset `out` to `dest` (atomically)."""
    page, facts = build_page(out, sample=sample, seed=seed, audio=audio)
    write_text(dest, page)
    size = len(page.encode("utf-8"))
    log.info("review page %s: %d cards, %.1f MB", dest, facts["cards"], size / 1e6)
    return ReviewPage(path=Path(dest), size=size, **facts)
