"""`kame-data infer`: a trained tandem model answers one dialogue's user channel.

The model hears the row's user audio (Mimi codes of channel B) frame by frame and generates the
assistant's text token and audio codes of each frame with moshi's `LMGen` (sampling, as KAME's
server does), while the oracle stream is fed beside its text input exactly as training feeds it
(docs/design.md, "Training streams"; one frame later than the text, so step s sees the oracle token
of frame s - 1 - text delay). The oracle stream comes from

- `row`: the row's own ladder, as the trainer tokenises it (start token, then the prediction, or
  the hint once the user's turn was fully heard);
- `none`: all pad (the model without an oracle);
- `openai`: a live OpenAI-compatible simulator asked, at each step of the ladder over the row's
  words, for the assistant's next words from the conversation alone (level 0: at inference there is
  no true reply to hint at).

`latency` (an oracle.latency preset or mapping; docs/design.md, "Oracle arrival") times the events
as a KAME server would deliver them: each reply starts where its first chunk resets the buffer,
tokens that arrive late are lost, an older reply plays until a newer one is adopted. Without it,
`delay` seconds move every event later (a constant latency, the shortcut kept from before).
Mimi decodes the generated codes; OUT gets reply.wav, dialogue.wav (reply left, user right),
reply.txt and infer.json (settings, per-frame tokens, the events fed).
"""

from __future__ import annotations

import dataclasses
import io
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kame_data.atomic import write_bytes, write_json, write_text
from kame_data.llm.config import BackendConfig
from kame_data.train.errors import TrainError
from kame_data.train.model import compile_context
from kame_data.train.streams import TEXT_PAD_ID, build_events, frame_of_ms, oracle_frames
from kame_data.train.tokenize import Codec, TextTokenizer, read_audio
from kame_data.train.weights import Checkpoint, load_model, read_checkpoint

log = logging.getLogger(__name__)

ORACLE_SOURCES = ("row", "none", "openai")
SPECIAL_TEXT = (0, 3)  # Moshi's end-of-pad and pad: no text


@dataclass
class InferConfig:
    oracle: str = "row"  # row | none | openai
    delay: float = 0.0  # seconds between an oracle request and its answer reaching the stream
    latency: Any = None  # an oracle.latency preset or mapping: served timing instead of `delay`
    seed: int = 0
    temperature: float = 0.8  # audio; 0 = greedy
    text_temperature: float = 0.7
    top_k: int = 250
    top_k_text: int = 25
    device: str = "cpu"
    max_seconds: float | None = None  # stop after this much of the dialogue
    codec: str | None = None  # default: the codec the checkpoint was trained with
    tokenizer: str | None = None  # default: the checkpoint's tokenizer.model
    backend: BackendConfig | None = None  # oracle=openai: the simulator


@dataclass
class InferResult:
    out: Path
    frames: int
    text: str
    seconds: float
    events: int
    files: list[Path] = field(default_factory=list)


def _row(dataset: Path, row_id: str) -> tuple[dict, dict]:
    """The row and the dataset's recipe (for the ladder's step)."""
    from kame_data.dataset.folder import DatasetDir, DatasetError

    try:
        ds = DatasetDir.open(dataset, need_manifest=False)
        rows = list(ds.rows(ids=[row_id]))
    except DatasetError as e:
        raise TrainError(str(e)) from e
    if not rows:
        raise TrainError(f"{dataset}: no row with id {row_id!r}")
    return rows[0], ((ds.manifest or {}).get("recipe") or {})


def codec_for(ckpt: Checkpoint, cfg: InferConfig) -> Codec:
    """The Mimi the checkpoint was trained with (or cfg.codec)."""
    tok = (ckpt.train_config or {}).get("tokenize", {})
    spec = cfg.codec or tok.get("codec")
    if not spec:
        raise TrainError(f"{ckpt.source}: which codec made its audio codes is not recorded beside it; pass --codec")
    return Codec(spec, seed=int((ckpt.train_config or {}).get("seed", 0)), bins=int(tok.get("tiny_codec_bins", 64)),
                 device=cfg.device)


def tokenizer_for(ckpt: Checkpoint, cfg: InferConfig) -> TextTokenizer:
    """The checkpoint's SentencePiece model (or cfg.tokenizer)."""
    path = Path(cfg.tokenizer) if cfg.tokenizer else ckpt.tokenizer
    if path is None or not path.is_file():
        raise TrainError(f"{ckpt.source}: no tokenizer.model beside it; pass --tokenizer")
    return TextTokenizer(path.read_bytes())


def live_events(row: dict, recipe: dict, backend_cfg: BackendConfig, backend=None) -> list[dict]:
    """The assistant's oracle events from a live simulator: one request per step of the ladder over
    the row's floor words, shown the conversation so far and nothing of the true reply. `backend`:
    an open backend to ask (kept open), else one is opened from `backend_cfg` and closed."""
    from kame_data.oracle.ladder import floor_words, ladder
    from kame_data.records import CHANNEL, Word

    words = floor_words([Word(w["speaker"], w["word"], w["start"], w["end"], bool(w.get("backchannel")))
                         for w in row["words"]])
    interval = float((recipe.get("oracle") or {}).get("interval", 0.5))
    steps = [dataclasses.replace(s, level=0) for s in ladder(words, interval, CHANNEL["A"], CHANNEL)]
    return ask_steps(steps, backend_cfg, backend)


def ask_steps(steps: list, backend_cfg: BackendConfig, backend=None) -> list[dict]:
    """Oracle events for ladder steps (their levels as given), asked of `backend` (or a fresh one)."""
    from kame_data.llm.config import open_backend
    from kame_data.oracle.prompts import build_request
    from kame_data.oracle.replies import clean_prediction

    own = backend is None
    backend = open_backend(backend_cfg) if own else backend
    try:
        answers = backend.complete([build_request(s, backend_cfg.max_tokens, backend_cfg.temperature, seed=0)
                                    for s in steps])
    finally:
        if own:
            backend.close()
    failed = [a.error for a in answers if a.error]
    if failed:
        raise TrainError(f"the oracle backend failed on {len(failed)} of {len(steps)} requests (last: {failed[-1]})")
    return [{"timestamp_ms": s.timestamp_ms, "channel": s.channel, "prediction": clean_prediction(a.text),
             "hint": "", "current_spoken_ratio": s.current_spoken_ratio, "conversation_context": s.conversation_context}
            for s, a in zip(steps, answers)]


def oracle_events(row: dict, recipe: dict, cfg: InferConfig) -> list[dict]:
    """The events to feed, `delay` seconds late."""
    if cfg.oracle not in ORACLE_SOURCES:
        raise TrainError(f"--oracle: expected one of {', '.join(ORACLE_SOURCES)}, got {cfg.oracle!r}")
    if cfg.oracle == "none":
        return []
    if cfg.oracle == "row":
        events = [dict(e) for e in row["oracle"] or []]
    else:
        if cfg.backend is None:
            raise TrainError("--oracle openai needs a backend (--model, --base-url)")
        events = live_events(row, recipe, cfg.backend)
    shift = 0 if cfg.latency is not None else int(round(cfg.delay * 1000))
    return [{**e, "timestamp_ms": int(e["timestamp_ms"]) + shift} for e in events]


def served_arrivals(events: list[dict], row_id: str, recipe: dict, cfg: InferConfig,
                    seconds: float | None = None) -> list[dict | None] | None:
    """Per event, its arrival and served timing under `cfg.latency` (None without one), drawn as
    the write step draws a row's (the recipe seed, the row id, the channel), so `--latency` with the
    recipe's own model replays the row's oracle_arrival. `seconds`: the audio's length (a reply
    adopted after its last frame never plays)."""
    if cfg.latency is None:
        return None
    from kame_data.oracle.latency import parse_latency
    from kame_data.oracle.serve import FRAME_MS, timed_events

    try:
        model = parse_latency(cfg.latency)
    except ValueError as e:
        raise TrainError(f"--latency: {e}") from e
    frames = None if seconds is None else int(round(seconds * 1000)) // FRAME_MS
    # with its transcript the server's recognition is modelled (oracle/latency.transcripts); without, every
    # event is a new interim transcript
    return timed_events(model, [(int(e["channel"]), int(e["timestamp_ms"]), e.get("prediction") or "")
                                + ((e["conversation_context"], float(e.get("current_spoken_ratio") or 0.0))
                                   if e.get("conversation_context") else ())
                                for e in events], int(recipe.get("seed", 0)), row_id, frames)


def _wav(pcm: np.ndarray, sample_rate: int) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, np.clip(pcm, -1.0, 1.0), sample_rate, subtype="PCM_16", format="WAV")
    return buf.getvalue()


def generate(model, user_codes: torch.Tensor, oracle: np.ndarray, cfg: InferConfig) -> tuple[np.ndarray, np.ndarray]:
    """(text tokens [T], audio codes [dep_q, T]) generated over the user's codes [n_user, T]."""
    from moshi.models.lm import LMGen

    lm = model.lm
    T = user_codes.shape[1]
    greedy = cfg.temperature <= 0 and cfg.text_temperature <= 0
    gen = LMGen(lm, use_sampling=not greedy, temp=cfg.temperature, temp_text=cfg.text_temperature,
                top_k=cfg.top_k, top_k_text=cfg.top_k_text)
    lead = 1 + int(lm.delays[0])  # OracleLM.align_oracle: frame f's oracle token is seen at step f + lead
    pad = model.oracle_pad_id
    tokens = torch.full((1, 1), pad, dtype=torch.long, device=lm.device)
    texts, audio = [], []
    torch.manual_seed(cfg.seed)
    with torch.no_grad(), compile_context(False), gen.streaming(1), model.oracle_input(tokens):
        for s in range(T + gen.max_delay):
            f = min(max(s - 1, 0), T - 1)  # step s hears user frame s - 1, as in training (step 0 is the initial token)
            o = s - lead
            tokens.fill_(int(oracle[o]) if 0 <= o < T else pad)
            out = gen.step(user_codes[None, :, f:f + 1])
            if out is not None and len(texts) < T:
                texts.append(int(out[0, 0, 0]))
                audio.append(out[0, 1:, 0].cpu().numpy())
    return np.asarray(texts, dtype=np.int64), np.stack(audio, axis=1)


def text_of(tokens: np.ndarray, tok: TextTokenizer, frame_rate: float) -> tuple[str, list[dict[str, Any]]]:
    """The generated text, and each piece with the frame and time it was said at."""
    pieces = [{"frame": i, "time": round(i / frame_rate, 3), "piece": tok.sp.id_to_piece(int(t))}
              for i, t in enumerate(tokens) if int(t) not in SPECIAL_TEXT and 0 <= int(t) < tok.vocab_size]
    return "".join(p["piece"] for p in pieces).replace("\u2581", " ").strip(), pieces


def infer(checkpoint: str | Path, dataset: str | Path, row_id: str, out: str | Path,
          cfg: InferConfig | None = None) -> InferResult:
    """Run the model over the row's user channel and write the reply into OUT (see the module doc)."""
    cfg = cfg or InferConfig()
    t0 = time.perf_counter()
    ckpt = read_checkpoint(checkpoint)
    row, recipe = _row(Path(dataset), row_id)
    events = oracle_events(row, recipe, cfg)  # before loading anything heavy: a bad backend fails fast
    arrivals = served_arrivals(events, row_id, recipe, cfg, float(row["duration"]))
    tok, codec = tokenizer_for(ckpt, cfg), codec_for(ckpt, cfg)
    dtype = torch.bfloat16 if torch.device(cfg.device).type == "cuda" else torch.float32
    model = load_model(ckpt, cfg.device, dtype).eval()
    lm = model.lm
    audio, sr = read_audio(row)
    from kame_data.audio import resample
    from kame_data.records import CHANNEL

    user_pcm = resample(audio[:, CHANNEL["B"]], sr, codec.sample_rate)
    if cfg.max_seconds is not None:
        user_pcm = user_pcm[: int(cfg.max_seconds * codec.sample_rate)]
    codes = codec.encode(user_pcm)  # [8, T]
    n_user = lm.n_q - lm.dep_q
    T = codes.shape[1]
    ev, _ = build_events(events, CHANNEL["A"], "A", row["words"], T, tok.encode_text,
                         arrivals=arrivals, char_ends=tok.char_ends if arrivals is not None else None)
    oracle = oracle_frames(ev, T, model.oracle_start_id, TEXT_PAD_ID)
    t_gen = time.perf_counter()
    texts, own = generate(model, torch.from_numpy(codes[:n_user]).to(cfg.device), oracle, cfg)
    t_gen = time.perf_counter() - t_gen
    with torch.no_grad():
        pcm = codec.model.decode(torch.from_numpy(own)[None].to(cfg.device))[0, 0].float().cpu().numpy()
    frame_rate = float(codec.model.frame_rate)
    text, pieces = text_of(texts, tok, frame_rate)
    out = Path(out)
    n = min(len(pcm), len(user_pcm))
    stereo = np.stack([pcm[:n], user_pcm[:n]], axis=1)
    files = [out / "reply.wav", out / "dialogue.wav", out / "reply.txt", out / "infer.json"]
    write_bytes(files[0], _wav(pcm, codec.sample_rate))
    write_bytes(files[1], _wav(stereo, codec.sample_rate))
    write_text(files[2], text + "\n")
    seconds = time.perf_counter() - t0
    write_json(files[3], {
        "checkpoint": str(ckpt.source), "dataset": str(dataset), "id": row_id,
        "settings": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "backend"},
        "backend": {"kind": cfg.backend.kind, "model": cfg.backend.model} if cfg.backend else None,
        "frames": T, "frame_rate": frame_rate, "events_fed": len(ev),
        "events": [{"frame": frame_of_ms(e["timestamp_ms"]), **{k: e.get(k) for k in (
            "timestamp_ms", "conversation_context", "prediction", "hint", "current_spoken_ratio")},
                    **({"arrival": a} if a is not None else {})}
                   for e, a in zip(events, arrivals or [None] * len(events))],
        "text": text, "pieces": pieces, "text_tokens": texts.tolist(), "oracle_tokens": oracle.tolist(),
        "audio_codes": own.tolist(), "seconds": round(seconds, 3), "generate_seconds": round(t_gen, 3)})
    log.info("infer %s: %d frames, %d oracle events, %.1f s", row_id, T, len(ev), seconds)
    return InferResult(out, T, text, seconds, len(ev), files)
