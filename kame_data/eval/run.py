"""`eval run`: a tandem checkpoint answers the spoken question set, turn by turn, through the same
generation path as `kame-data infer`, with the oracle stream off, live, or late.

Per question the model hears one timeline: turn 1's clip, `answer_seconds` of silence to answer in,
turn 2's clip, silence again. The oracle (when on) is asked at every ladder step over the user's
words (level 0: nothing of a true reply exists at evaluation), as a back-end would be: for turn 2
it has seen turn 1 and its own final answer to it. Its events reach the stream `delay` seconds late,
or as a KAME server would serve them under a latency preset (docs/design.md, "Oracle arrival").

Whisper hears the model's channel: a turn's answer is what it says from the start of that turn's
clip to the next one; latency is its first word's start minus the end of the user's speech
(negative when it talked over the question; None when it never spoke: `took_turn` false). The
back-end's final text per turn (its prediction from the whole question) is a second answer set, as
the paper scores it. Each finished question is written to OUT/runs/RUN/q{id}.json: a killed run
resumes there.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

from kame_data import atomic
from kame_data.eval.answers import answer_record, write_answers
from kame_data.llm.config import BackendConfig

ORACLES = ("none", "embedded", "openai")
WORD_SECONDS = 0.3  # where the back-end's own earlier answer is placed in turn 2's context (its words' pace)


@dataclass
class EvalRunConfig:
    oracle: str = "none"  # none | embedded | openai
    delay: float = 0.0  # constant oracle latency (s): every event this much later
    latency: Any = None  # an oracle.latency preset or mapping: served timing instead of `delay`
    answer_seconds: float = 20.0  # silence after each user turn for the model to answer in
    answer_text: str = "whisper"  # whisper (what the model said) | stream (its text stream)
    interval: float = 0.5  # oracle ladder step (s)
    backend: BackendConfig | None = None  # the simulator for embedded / openai
    seed: int = 0
    temperature: float = 0.8
    text_temperature: float = 0.7
    device: str = "cpu"
    codec: str | None = None
    tokenizer: str | None = None
    name: str = ""  # the run's id (default: checkpoint name and oracle setting)


@dataclass
class TurnResult:
    answer: str
    latency: float | None
    took_turn: bool
    oracle_final: str = ""
    stream_text: str = ""
    events: int = 0


@dataclass
class QuestionResult:
    question_id: int
    turns: list[TurnResult] = field(default_factory=list)


def run_id(checkpoint: Path, cfg: EvalRunConfig) -> str:
    if cfg.name:
        return cfg.name
    base = Path(checkpoint).name or "model"
    if cfg.oracle == "none":
        return f"{base}-oracle-none"
    late = f"latency-{cfg.latency}" if isinstance(cfg.latency, str) else f"delay-{cfg.delay:g}s"
    return f"{base}-oracle-{cfg.oracle}-{late}"


def _words(turn: dict, offset: float, speaker: str) -> list[dict]:
    return [{"speaker": speaker, "word": w["word"], "start": round(offset + w["start"], 3),
             "end": round(offset + w["end"], 3)} for w in turn["words"]]


def _placed(text: str, start: float) -> list[dict]:
    """An answer's words at a speaking pace from `start` (the back-end's own reply in its history)."""
    return [{"speaker": "A", "word": w, "start": round(start + i * WORD_SECONDS, 3),
             "end": round(start + (i + 1) * WORD_SECONDS - 0.05, 3)} for i, w in enumerate(text.split())]


def oracle_events(question: dict, starts: list[float], cfg: EvalRunConfig, backend) -> tuple[list[dict], list[str]]:
    """Events over the question's timeline and the back-end's final text per turn."""
    from kame_data.oracle.ladder import floor_words, ladder
    from kame_data.records import CHANNEL, Word
    from kame_data.train.infer import ask_steps

    events, finals, history = [], [], []
    for t, (turn, start) in enumerate(zip(question["turns"], starts)):
        history = history + _words(turn, start, "B")
        # The ladder asks for the reply of the speaker who answers next: a placeholder answer after
        # the turn makes the assistant that speaker (level 0 shows nothing of it).
        answer_at = start + turn["speech_end"] + 0.2
        placeholder = _placed("answer", answer_at)
        words = floor_words([Word(w["speaker"], w["word"], w["start"], w["end"]) for w in history + placeholder])
        steps = [dataclasses.replace(s, level=0) for s in ladder(words, cfg.interval, CHANNEL["A"], CHANNEL)
                 if s.timestamp_ms >= int(start * 1000)]
        asked = ask_steps(steps, cfg.backend, backend) if steps else []
        events += asked
        final = asked[-1]["prediction"] if asked else ""
        finals.append(final)
        history = history + _placed(final, answer_at)
    shift = 0 if cfg.latency is not None else int(round(cfg.delay * 1000))
    return [{**e, "timestamp_ms": int(e["timestamp_ms"]) + shift} for e in events], finals


class Answerer:
    """A loaded checkpoint, its codec and tokenizer, Whisper and the oracle backend, for many questions."""

    def __init__(self, checkpoint: Path, cfg: EvalRunConfig):
        import torch

        from kame_data.train.infer import InferConfig, codec_for, tokenizer_for
        from kame_data.train.weights import load_model, read_checkpoint

        self.cfg = cfg
        self.infer_cfg = InferConfig(oracle="none", delay=cfg.delay, latency=cfg.latency, seed=cfg.seed,
                                     temperature=cfg.temperature, text_temperature=cfg.text_temperature,
                                     device=cfg.device, codec=cfg.codec, tokenizer=cfg.tokenizer)
        self.ckpt = read_checkpoint(checkpoint)
        self.tok, self.codec = tokenizer_for(self.ckpt, self.infer_cfg), codec_for(self.ckpt, self.infer_cfg)
        dtype = torch.bfloat16 if torch.device(cfg.device).type == "cuda" else torch.float32
        self.model = load_model(self.ckpt, cfg.device, dtype).eval()
        self.backend = None
        if cfg.oracle != "none":
            from kame_data.llm.config import open_backend

            self.backend = open_backend(cfg.backend)
        self._aligner = None

    def close(self) -> None:
        if self.backend is not None:
            self.backend.close()

    @property
    def aligner(self):
        if self._aligner is None:
            from kame_data.speech.whisper import WhisperAligner

            self._aligner = WhisperAligner()
        return self._aligner

    def answer(self, question: dict, built: Path) -> tuple[QuestionResult, np.ndarray]:
        """The model's answers to both turns, and the dialogue (reply left, user right) at the codec's rate."""
        import soundfile as sf
        import torch

        from kame_data.audio import resample
        from kame_data.records import CHANNEL
        from kame_data.train.infer import generate, served_arrivals, text_of
        from kame_data.train.streams import TEXT_PAD_ID, build_events, oracle_frames

        rate = self.codec.sample_rate
        pieces, starts = [], []
        at = 0.0
        for turn in question["turns"]:
            audio, sr = sf.read(built / turn["audio"], dtype="float32")
            clip = resample(audio, sr, rate)
            starts.append(at)
            pieces += [clip, np.zeros(int(self.cfg.answer_seconds * rate), np.float32)]
            at += (len(clip) + len(pieces[-1])) / rate
        user = np.concatenate(pieces)
        ends = [s + t["speech_end"] for s, t in zip(starts, question["turns"])]
        events, finals = ([], ["" for _ in starts]) if self.backend is None else \
            oracle_events(question, starts, self.cfg, self.backend)
        row_id = f"mt_bench-{question['question_id']}"
        arrivals = served_arrivals(events, row_id, {"seed": self.cfg.seed}, self.infer_cfg,
                                   len(user) / rate) if events else None
        codes = self.codec.encode(user)
        lm = self.model.lm
        T = codes.shape[1]
        words = [w for s, t in zip(starts, question["turns"]) for w in _words(t, s, "B")]
        ev, _ = build_events(events, CHANNEL["A"], "A", words, T, self.tok.encode_text, arrivals=arrivals,
                             char_ends=self.tok.char_ends if arrivals is not None else None)
        oracle = oracle_frames(ev, T, self.model.oracle_start_id, TEXT_PAD_ID)
        texts, own = generate(self.model, torch.from_numpy(codes[: lm.n_q - lm.dep_q]).to(self.cfg.device), oracle,
                              self.infer_cfg)
        with torch.no_grad():
            reply = self.codec.model.decode(torch.from_numpy(own)[None].to(self.cfg.device))[0, 0].float().cpu().numpy()
        frame_rate = float(self.codec.model.frame_rate)
        _, stream = text_of(texts, self.tok, frame_rate)
        heard = self.aligner.transcribe(resample(reply, rate, 16000), 16000)
        result = QuestionResult(question["question_id"])
        for t, (start, end) in enumerate(zip(starts, ends)):
            stop = starts[t + 1] if t + 1 < len(starts) else len(user) / rate
            said = [h for h in heard if start <= h.start < stop]
            spoken = [p["piece"] for p in stream if start <= p["time"] < stop]
            latency = round(said[0].start - end, 3) if said else None
            n_events = sum(1 for e in events if start * 1000 <= e["timestamp_ms"] < stop * 1000)
            result.turns.append(TurnResult(
                answer=" ".join(h.word.strip() for h in said), latency=latency, took_turn=bool(said),
                oracle_final=finals[t], stream_text="".join(spoken).replace("\u2581", " ").strip(), events=n_events))
        n = min(len(reply), len(user))
        return result, np.stack([reply[:n], user[:n]], axis=1)


def run_eval(checkpoint: Path, built: Path, out: Path, cfg: EvalRunConfig,
             progress: Callable[[int], Any] | None = None, answerer: Answerer | None = None) -> dict[str, Path]:
    """Answer every built question (resuming from OUT/runs/RUN/); write the answer files."""
    from kame_data.audio import wav_bytes
    from kame_data.eval.build import read_built

    if cfg.oracle not in ORACLES:
        raise ValueError(f"--oracle: expected one of {', '.join(ORACLES)}, got {cfg.oracle!r}")
    if cfg.answer_text not in ("whisper", "stream"):
        raise ValueError(f"--answer-text: expected whisper or stream, got {cfg.answer_text!r}")
    questions = read_built(built)
    rid = run_id(checkpoint, cfg)
    folder = Path(out) / "runs" / rid
    folder.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict] = {}
    todo = []
    for q in questions:
        done = folder / f"q{q['question_id']}.json"
        if done.is_file():
            results[q["question_id"]] = json.loads(done.read_text("utf-8"))
            if progress:
                progress(1)
        else:
            todo.append(q)
    own = answerer is None and bool(todo)
    answerer = Answerer(checkpoint, cfg) if own else answerer
    try:
        for q in todo:
            result, dialogue = answerer.answer(q, Path(built))
            atomic.write_bytes(folder / f"q{q['question_id']}.wav", wav_bytes(dialogue, answerer.codec.sample_rate))
            row = dataclasses.asdict(result)
            atomic.write_json(folder / f"q{q['question_id']}.json", row)  # last: the question is done
            results[q["question_id"]] = row
            if progress:
                progress(1)
    finally:
        if own:
            answerer.close()
    extra = {"oracle_source": cfg.oracle, "oracle_latency": None if cfg.oracle == "none" or cfg.latency is not None
             else cfg.delay, "latency_preset": cfg.latency if isinstance(cfg.latency, str) else None}
    key = "answer" if cfg.answer_text == "whisper" else "stream_text"
    rows = [answer_record(qid, rid, [t[key] for t in r["turns"]],
                          extra={**extra, "turns": [{"latency": t["latency"], "took_turn": t["took_turn"]}
                                                    for t in r["turns"]]})
            for qid, r in sorted(results.items())]
    files = {"answers": write_answers(Path(out) / ANSWERS / f"{rid}.jsonl", rows)}
    if cfg.oracle != "none":
        finals = [answer_record(qid, f"{rid}-backend", [t["oracle_final"] for t in r["turns"]], extra=extra)
                  for qid, r in sorted(results.items())]
        files["backend"] = write_answers(Path(out) / ANSWERS / f"{rid}-backend.jsonl", finals)
    return {**files, **fastchat_folder(questions, Path(out))}


ANSWERS = "model_answer"  # FastChat's bench-folder layout: question.jsonl, model_answer/, reference_answer/


def fastchat_folder(questions: list[dict], out: Path) -> dict[str, Path]:
    """OUT as a FastChat bench folder (fastchat/llm_judge/data/BENCH): the question file of exactly
    the questions answered (a subset run too, so FastChat's check_data finds every answer) and the
    shipped reference answers for them, so its gen_judgment and show_result run on OUT unchanged."""
    from kame_data.eval.answers import read_answers
    from kame_data.eval.judge import shipped_references

    asked = [{"question_id": q["question_id"], "category": q["category"], "turns": [t["text"] for t in q["turns"]],
              **({"reference": list(q["reference"])} if q.get("reference") else {})} for q in questions]
    ids = {q["question_id"] for q in asked}
    refs = [row for qid, row in sorted(read_answers(shipped_references()).items()) if qid in ids]
    atomic.write_jsonl(out / "question.jsonl", asked)
    files = {"questions": out / "question.jsonl"}
    if refs:
        atomic.write_jsonl(out / "reference_answer" / "gpt-4.jsonl", refs)
        files["references"] = out / "reference_answer" / "gpt-4.jsonl"
    return files
