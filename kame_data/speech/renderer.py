"""Rendering one dialogue with engines loaded in this process: each turn through a voice of its
role's pool, timed, checked, its pauses shaped, then mixed into two channels.

Voices are drawn per dialogue from each role's pool by a hash of (seed, dialogue id, role), so a
rerun speaks every dialogue with the same voices. With QA on, Whisper listens to every turn: a
role whose turns it cannot understand (WER) or whose word starts disagree with what it heard is
re-rendered with the pool's next voice, and the dialogue is rejected when no voice passes. With
the answer round-trip on, an assistant voice that loses the answer is replaced the same way.

The speak step owns one renderer when it runs in-process, and every worker process owns its own
(speech/speak_workers.py); so the step itself keeps only the lifecycle, the pool and screening.
"""

from __future__ import annotations

import logging
import random
from dataclasses import replace
from typing import Any

import numpy as np

from kame_data.accelerator import whisper_device
from kame_data.audio import resample
from kame_data.costs import piece
from kame_data.records import (
    ASSISTANT,
    ROLE,
    SPEAKER,
    USER,
    Dialogue,
    Reject,
    RenderedDialogue,
    TurnTiming,
    Word,
)
from kame_data.speech.answer import answer_lost, answer_lost_in
from kame_data.speech.config import SpeakConfig
from kame_data.speech.live import add_backchannels, plan_barge_ins, render_clip, reply_gaps
from kame_data.speech.mix import loudness_normalise, mix_turns
from kame_data.speech.pauses import long_gaps, pause_kinds, shape_pauses, untangle_overlaps
from kame_data.speech.screen import voice_wers
from kame_data.speech.synthesis import TTSEngine
from kame_data.speech.text_checks import unspeakable
from kame_data.speech.turn_qa import Turn, finish_turn, qa_failure
from kame_data.speech.voice import VoiceConfig, faster, open_engine
from kame_data.speech.voices import cast

log = logging.getLogger(__name__)

SLOWER = 1 / 1.15  # an assistant voice that lost the answer tries again at this tempo
TEMPOS = (1.1, 1.2)  # a turn whose long word leaves no pause to cut is spoken again this much faster


def _draw(value: Any, rng: random.Random) -> float:
    return rng.uniform(*value) if isinstance(value, tuple) else float(value)


class DialogueRenderer:
    """Renders dialogues one at a time with the voices of both pools, loaded once (on first use)."""

    def __init__(self, config: SpeakConfig, seed: int, run_gap: float, step: str):
        """`run_gap`: the oracle's run rule (a word ending this long after the previous one ends a
        run); every pause inside a turn is kept below it. `step`: the step name rejects carry."""
        self.cfg = config
        self.seed = seed
        self.run_gap = run_gap
        self.step = step
        self.engines: dict[VoiceConfig, TTSEngine] = {}
        self.aligner = None
        self.threads: int | None = 1
        self.dropped: set[str] = set()  # labels of voices screening left out
        self._clips: dict = {}  # (voice, text) -> a rendered backchannel
        self._assistant_heard: str | None = None  # QA's transcript of the last render's assistant turns
        self._checking = config.qa.enabled  # whether QA checks the dialogue being rendered (qa.sample)
        self._answer_heard = False  # whether the answer round trip heard the dialogue being rendered

    def load(self, threads: int = 1) -> None:
        """Load every voice of both pools (and Whisper when needed) in this process."""
        self.threads = threads
        if not self.engines:
            # numpy's BLAS with several threads sums in another order, which moves Whisper's word
            # timings by a frame: one thread makes a render the same whatever OMP_NUM_THREADS says.
            from threadpoolctl import threadpool_limits

            threadpool_limits(1, user_api="blas")
        for voice in self.cfg.voices:
            if voice not in self.engines:
                self.engines[voice] = open_engine(voice, threads)
        needs_aligner = self.cfg.qa.enabled or self.cfg.screen.enabled or self.cfg.answer.enabled \
            or not all(v.timed for v in self.engines)
        if needs_aligner and self.aligner is None:
            from kame_data.speech.whisper import WhisperAligner

            self.aligner = WhisperAligner(threads)

    def voice_wers(self, voices: list[VoiceConfig]) -> list[float]:
        """Loaded voices' median WERs on the screening sentences (screen.voice_wers)."""
        c = self.cfg
        with piece("speak.screen", whole_process=True):
            return voice_wers([self.engines[v] for v in voices], self.aligner, c.screen, c.sample_rate, c.target_dbfs)

    def candidates(self, dialogue_id: str, role: str) -> list[VoiceConfig]:
        """The role's pool (less voices screening left out), starting at the voice this dialogue
        draws by weight; the rest are QA fallbacks."""
        pool = [v for v in self.cfg.pool(role) if v.label not in self.dropped]
        return cast(pool, f"{self.seed}:voice:{dialogue_id}:{role}", self.cfg.balance)

    def render(self, dialogue: Dialogue) -> RenderedDialogue | Reject:
        """Render, then (with `speak.answer`) check the answer survived; a voice that loses it is
        left out for this dialogue and the next assistant voice tried."""
        skip: list[str] = []
        slowed: set[str] = set()  # assistant voices speaking SLOWER for this dialogue
        tried: list[str] = []
        while True:
            r = self._render_once(dialogue, skip, slowed)
            if not isinstance(r, RenderedDialogue):
                return r  # refused before the answer could be heard (a turn too long, every voice failing QA)
            lost = self._answer_lost(dialogue, r)
            if lost is None:
                return replace(r, answer_checked=True) if self._answer_heard else r
            heard_with = next(t.voice for t, turn in zip(r.timings, dialogue.turns) if turn.role == ASSISTANT)
            tried.append(heard_with)
            log.info("speak %s: the answer is lost with %s (%s)", dialogue.id, heard_with, lost)
            # The same voice, slower, first: Whisper base hears Joe's quick "fourteen" as "four"
            # or "$40" and the slower reading right; then the next voice.
            base = next((v for v in self.candidates(dialogue.id, ASSISTANT)
                         if heard_with in (v.label, faster(v, SLOWER).label)), None)
            if base is not None and base.label not in slowed:
                slowed.add(base.label)
                continue
            skip.append(base.label if base is not None else heard_with)
            if not [v for v in self.candidates(dialogue.id, ASSISTANT) if v.label not in skip]:
                return Reject(self.step, dialogue.id, "answer_lost", f"{lost} (voices tried: {', '.join(tried)})")

    def _answer_lost(self, dialogue: Dialogue, r: RenderedDialogue) -> str | None:
        """The answer round-trip. Channel 0 holds only the assistant, so unless a barge-in cut its
        words the mixed turns say what QA's Whisper already heard in each turn: that transcript is
        checked, and Whisper listens to the mixed channel again only after a cut (or without QA)."""
        self._answer_heard = self.cfg.answer.enabled and (self._checking or not self.cfg.qa.enabled)
        if not self._answer_heard:
            return None  # with QA on, the round trip is part of it: the dialogues QA's sample draws
        with piece("speak.answer", whole_process=True):
            cut = any(c for t, c in zip(dialogue.turns, r.turn_cut_words) if t.role == ASSISTANT)
            if not cut and self._assistant_heard is not None:
                return answer_lost_in(dialogue.answer, self._assistant_heard, self.cfg.answer)
            return answer_lost(self.aligner, dialogue.answer, r, self.cfg.answer)

    def _render_once(self, dialogue: Dialogue, skip: list[str],
                     slowed: set[str] = frozenset()) -> RenderedDialogue | Reject:
        for k, turn in enumerate(dialogue.turns):
            problem = unspeakable(turn.spoken, self.cfg.max_turn_seconds)
            if problem:
                return Reject(self.step, dialogue.id, problem[0], f"turn {k}: {problem[1]}")
        self.load()
        self._checking = self.cfg.qa.checks(self.seed, dialogue.id, whisper_device()[0] == "cuda")
        turns: dict[int, Turn] = {}
        retries = 0
        chosen: dict[str, VoiceConfig] = {}
        try:
            first = self._first_pass(dialogue, skip, slowed)
        except Exception as e:  # an engine failing on one text must not stop the run
            log.warning("speak %s failed: %s", dialogue.id, e, exc_info=True)
            return Reject(self.step, dialogue.id, "tts_error", f"{type(e).__name__}: {e}", transient=True)
        for role in (USER, ASSISTANT):
            indices = [k for k, t in enumerate(dialogue.turns) if t.role == role]
            if not indices:
                continue
            candidates = self._role_candidates(dialogue.id, role, skip, chosen.get(USER), slowed)
            failure: tuple[str, str] | None = None
            for attempt, voice in enumerate(candidates):
                try:
                    if attempt == 0 and first.get(role, (None,))[0] == voice:
                        spoken = first[role][1]
                    else:
                        jobs = [(voice, dialogue.turns[k].speaker, dialogue.turns[k].spoken) for k in indices]
                        spoken = dict(zip(indices, self._speak_turns(jobs)))
                    self._quicken(voice, dialogue, spoken)
                except Exception as e:  # an engine failing on one text must not stop the run
                    log.warning("speak %s turn with %s failed: %s", dialogue.id, voice.label, e, exc_info=True)
                    return Reject(self.step, dialogue.id, "tts_error", f"{voice.label}: {type(e).__name__}: {e}",
                                  transient=True)  # an engine or aligner fault, not the text's: retried on rerun
                failure = qa_failure(self.cfg, spoken) or self._pause_failure(spoken)
                if failure is None:
                    turns.update(spoken)
                    chosen[role] = voice
                    retries += attempt
                    break
                log.info("speak %s: %s fails QA (%s); trying the next voice", dialogue.id, voice.label, failure[1])
            if role not in chosen:
                assert failure is not None
                return Reject(self.step, dialogue.id, failure[0],
                              f"{role}: {failure[1]} (voices tried: {', '.join(v.label for v in candidates)})")
        ordered = [turns[k] for k in range(len(dialogue.turns))]
        mine = [t.heard for t, turn in zip(ordered, dialogue.turns) if turn.role == ASSISTANT]
        self._assistant_heard = " ".join(mine) if mine and all(h is not None for h in mine) else None
        for k, t in enumerate(ordered):
            if not len(t.spoken.audio) or float(np.max(np.abs(t.spoken.audio))) < 1e-3:
                return Reject(self.step, dialogue.id, "silent_audio", f"turn {k} synthesised to silence")
        with piece("speak.mix", whole_process=True):
            return self._mix(dialogue, ordered, retries, chosen)

    def _role_candidates(self, dialogue_id: str, role: str, skip: list[str],
                         user: VoiceConfig | None, slowed: set[str] = frozenset()) -> list[VoiceConfig]:
        """The voices a role tries in order (never the user's voice first for the assistant); an
        assistant voice in `slowed` speaks at SLOWER."""
        candidates = [v for v in self.candidates(dialogue_id, role) if v.label not in skip]
        if role == ASSISTANT and len(candidates) > 1 and user is not None and candidates[0].label == user.label:
            candidates = candidates[1:] + candidates[:1]  # two speakers, two voices
        if role == ASSISTANT and slowed:
            candidates = [faster(v, SLOWER) if v.label in slowed else v for v in candidates]
            for v in candidates:
                if v not in self.engines:
                    self.engines[v] = open_engine(v, self.threads)
        return candidates

    def _first_pass(self, dialogue: Dialogue, skip: list[str],
                    slowed: set[str] = frozenset()) -> dict[str, tuple[VoiceConfig, dict[int, Turn]]]:
        """Every turn in its role's first voice, heard by Whisper together (one pass for the whole
        dialogue when it fits in a window): what the role loop uses unless a voice fails QA, in the
        order the turns were always synthesised (the user's, then the assistant's)."""
        jobs, owners = [], []
        user = None
        for role in (USER, ASSISTANT):
            indices = [k for k, t in enumerate(dialogue.turns) if t.role == role]
            candidates = self._role_candidates(dialogue.id, role, skip, user, slowed) if indices else []
            if not candidates:
                continue
            voice = candidates[0]
            user = voice if role == USER else user
            for k in indices:
                jobs.append((voice, dialogue.turns[k].speaker, dialogue.turns[k].spoken))
                owners.append((role, voice, k))
        out: dict[str, tuple[VoiceConfig, dict[int, Turn]]] = {}
        for (role, voice, k), turn in zip(owners, self._speak_turns(jobs)):
            out.setdefault(role, (voice, {}))[1][k] = turn
        return out

    def _mix(self, dialogue: Dialogue, turns: list[Turn], retries: int,
             chosen: dict[str, VoiceConfig]) -> RenderedDialogue | Reject:
        rng = random.Random(f"{self.seed}:gap:{dialogue.id}")
        spoken = [t.spoken for t in turns]
        gaps = [self.cfg.gap_for(spoken[k].speaker, spoken[k - 1].speaker).draw(
                    rng, same_speaker=spoken[k].speaker == spoken[k - 1].speaker) for k in range(1, len(spoken))]
        gaps = untangle_overlaps([(t.speaker, t.spans[0][1] - t.spans[0][0]) for t in spoken], gaps)
        lead_in, tail = _draw(self.cfg.lead_in, rng), _draw(self.cfg.tail, rng)
        live = random.Random(f"{self.seed}:turns:{dialogue.id}")  # its own stream: gaps stay as they were
        spoken, forced, cut = plan_barge_ins(spoken, dialogue.answer, self.cfg.turns, live, self.cfg.sample_rate)
        gaps = [forced.get(k + 1, g) for k, g in enumerate(gaps)]
        pcm, words, timings = mix_turns(spoken, gaps, self.cfg.sample_rate, lead_in, tail)
        late = [g for g in reply_gaps([t.speaker for t in spoken], timings)
                if self.cfg.reply.max_seconds is not None and g > self.cfg.reply.max_seconds]
        if late:
            return Reject(self.step, dialogue.id, "late_reply",
                          f"the assistant answers {late[0]:.2f} s after the user > {self.cfg.reply.max_seconds} s")
        pcm, words = add_backchannels(pcm, words, timings, spoken, lambda sp, text: self._clip(chosen, sp, text),
                                      self.cfg.turns, live, self.cfg.sample_rate)
        # Turns are normalised below full scale, so a full-scale sample means overlapping audio clipped.
        clipped = int(np.count_nonzero(np.abs(pcm.astype(np.int32)) >= 32767))
        if clipped:
            log.warning("speak %s: %d clipped samples", dialogue.id, clipped)
        qa = self.cfg.qa.enabled
        return RenderedDialogue(
            dialogue=dialogue,
            audio=pcm,
            sample_rate=self.cfg.sample_rate,
            words=[Word(speaker=s, word=w, start=a, end=b, backchannel=bc) for s, w, a, b, bc in words],
            timings=[TurnTiming(start=a, end=b, voice=s.voice) for (a, b), s in zip(timings, spoken)],
            turn_wer=tuple(t.wer for t in turns) if qa else (),
            turn_start_error_ms=tuple(t.start_error_ms for t in turns) if qa else (),
            clipped_samples=clipped,
            qa_retries=retries,
            turn_cut_words=tuple(cut) if any(cut) else (),
        )

    def _clip(self, chosen: dict[str, VoiceConfig], speaker: str, text: str):
        """A backchannel in the voice its speaker has in this dialogue: audio, words, spans."""
        key = (chosen[ROLE[speaker]], text)
        if key not in self._clips:
            self._clips[key] = render_clip(self.engines[key[0]], key[0].timed, text, self.cfg.sample_rate,
                                           self.cfg.target_dbfs + self.cfg.turns.backchannel_db)
        return self._clips[key]

    def _pause_failure(self, spoken: dict[int, Turn]) -> tuple[str, str] | None:
        """A pause no cut could bring under the run rule (a word that alone lasts about as long)."""
        for k, t in spoken.items():
            if t.long_gaps:
                i, gap = t.long_gaps[0]
                words = t.spoken.words
                return "early_truth", (f"turn {k}: {words[i]!r} ends {gap:.2f} s after {words[i - 1]!r}, which the "
                                       f"oracle reads as the end of the turn (runs end at {self.run_gap:g} s)")
        return None

    def _quicken(self, voice: VoiceConfig, dialogue: Dialogue, spoken: dict[int, Turn]) -> None:
        """Speak again, a little faster, each turn where a word alone nearly fills the run rule
        (nothing left to cut); its label then names the faster knob. Timed voices have done this
        before Whisper heard them (`_tempo`), so only voices Whisper times are spoken again here."""
        for k, t in spoken.items():
            for tempo in TEMPOS if t.long_gaps and not voice.timed else ():
                fast = faster(voice, tempo)
                if fast not in self.engines:
                    self.engines[fast] = open_engine(fast, self.threads)
                again = self._speak_turn(fast, t.spoken.speaker, dialogue.turns[k].spoken)
                if not again.long_gaps:
                    log.info("speak %s turn %d: spoken at %s to keep its pauses under the run rule",
                             dialogue.id, k, fast.label)
                    spoken[k] = again
                    break

    def _shape(self, voice: VoiceConfig, turn: Turn, spoken: str) -> Turn:
        """Pauses inside the turn under the run rule (and a thinking pause where the recipe asks)."""
        t = turn.spoken
        rng = random.Random(f"{self.seed}:pause:{voice.label}:{spoken}")
        shaped = shape_pauses(t.audio, self.cfg.sample_rate, t.spans, pause_kinds(spoken), self.run_gap,
                              self.cfg.pauses, rng, thinking=t.speaker == SPEAKER[USER])
        turn.spoken = replace(t, audio=shaped.audio, spans=shaped.spans)
        if self.cfg.pauses.bound:
            turn.long_gaps = long_gaps(shaped.spans, self.run_gap, skip=shaped.thinking_before)
        return turn

    def _speak_turn(self, voice: VoiceConfig, speaker: str, spoken: str) -> Turn:
        return self._speak_turns([(voice, speaker, spoken)])[0]

    def _speak_turns(self, jobs: list[tuple[VoiceConfig, str, str]]) -> list[Turn]:
        """Synthesise each (voice, speaker, text) in order, have Whisper hear them together
        (WhisperAligner.transcribe_many: one pass per 30 s window, not one per turn), then time,
        check and shape each. A turn that fails QA heard in company is heard again alone, so
        hearing turns together never fails one that alone would pass."""
        raws = [self._synthesise(voice, spoken) for voice, _, spoken in jobs]
        if self.cfg.pauses.bound:
            jobs, raws = self._tempo(jobs, raws)
        listen = [i for i, (voice, _, _) in enumerate(jobs)
                  if self.aligner is not None and (self._checking or not voice.timed)]
        heard: dict[int, list] = {}
        if listen:
            with piece("speak.whisper", whole_process=True):
                heard = dict(zip(listen, self.aligner.transcribe_many([(raws[i][1], self.cfg.sample_rate)
                                                                       for i in listen])))
        turns = []
        for i, ((voice, speaker, spoken), (syn, audio)) in enumerate(zip(jobs, raws)):
            turn = finish_turn(self.cfg, voice, speaker, spoken, syn, audio, heard.get(i))
            if len(listen) > 1 and i in heard and qa_failure(self.cfg, {i: turn}):
                with piece("speak.whisper", whole_process=True):
                    alone = self.aligner.transcribe(audio, self.cfg.sample_rate)
                turn = finish_turn(self.cfg, voice, speaker, spoken, syn, audio, alone)
            turns.append(turn)
        with piece("speak.shape", whole_process=True):
            return [self._shape(voice, turn, spoken) for (voice, _, spoken), turn in zip(jobs, turns)]

    def _synthesise(self, voice: VoiceConfig, spoken: str):
        """The engine's output and the turn's audio at the dataset's rate and loudness."""
        with piece("speak.engine", whole_process=True):
            syn = self.engines[voice].synthesize(spoken)
        with piece("speak.shape", whole_process=True):
            audio = loudness_normalise(resample(syn.audio, syn.sample_rate, self.cfg.sample_rate),
                                       self.cfg.target_dbfs)
        return syn, audio

    def _tempo(self, jobs: list[tuple[VoiceConfig, str, str]], raws: list) -> tuple[list, list]:
        """For voices that time their own words, the tempo each turn needs, decided before anyone
        listens: the engine's spans alone say whether a pause stays above the run rule after
        shaping, so a turn that must be spoken faster is heard once, in its final tempo, with its
        dialogue's other turns (not heard slow and then again alone)."""
        jobs, raws = list(jobs), list(raws)
        for i, (voice, speaker, spoken) in enumerate(jobs):
            if not voice.timed or not self._long_gaps(voice, speaker, spoken, raws[i]):
                continue
            for tempo in TEMPOS:
                fast = faster(voice, tempo)
                if fast not in self.engines:
                    self.engines[fast] = open_engine(fast, self.threads)
                raw = self._synthesise(fast, spoken)
                if not self._long_gaps(fast, speaker, spoken, raw):
                    log.info("speak: a turn spoken at %s to keep its pauses under the run rule", fast.label)
                    jobs[i], raws[i] = (fast, speaker, spoken), raw
                    break
        return jobs, raws

    def _long_gaps(self, voice: VoiceConfig, speaker: str, spoken: str, raw) -> bool:
        """Whether a timed turn, shaped, keeps a pause the run rule reads as its end."""
        with piece("speak.shape", whole_process=True):
            turn = finish_turn(self.cfg, voice, speaker, spoken, *raw, None)
            return bool(self._shape(voice, turn, spoken).long_gaps)
