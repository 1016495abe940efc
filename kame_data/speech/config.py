"""The speech steps' configs: the speak step's (voice pools per role, turn gaps, pauses inside
turns, silences, loudness and speech QA), then those of the quality and acoustics steps after it."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Annotated, Literal

from kame_data.config_schema import Schema
from kame_data.records import ASSISTANT, USER
from kame_data.speech.answer import AnswerCheckConfig
from kame_data.speech.limits import AtLeastZero, Pair, Positive, Range, Share
from kame_data.speech.screen import ScreenConfig
from kame_data.speech.turntaking import TurnTakingConfig
from kame_data.speech.voice import VoiceConfig
from kame_data.speech.voices import resolve, role_default
from kame_data.step import operational


@dataclass(frozen=True)
class GapConfig:
    """The silence between one turn's last word and the next turn's first word (negative: overlap).

    `uniform` draws from [low, high] (`inherit`, for `speak.reply.gap` only: as `speak.gap`); `normal` from N(mean, sd) clipped to [min, max], which gives
    mostly short gaps and a few small overlaps when `min` < 0; `histogram` picks a bin of `edges`
    by `weights` and a point inside it (`kame-data fit-gaps` fits one from any word-aligned
    corpus). Two turns of the same speaker never overlap (at least `same_speaker_min` apart).
    """

    # uniform: from [low, high]; normal: N(mean, sd) clipped to [min, max]; histogram: a bin of `edges` by
    # `weights`, then a point inside it; inherit (speak.reply.gap only): as speak.gap
    distribution: Literal["uniform", "normal", "histogram", "inherit"] = "uniform"
    low: float = 0.25  # uniform: the shortest gap, in seconds
    high: float = 0.8  # uniform: the longest gap, in seconds
    mean: float = 0.4  # normal: the mean gap, in seconds
    sd: AtLeastZero = 0.25  # normal: the standard deviation, in seconds
    min: Annotated[float, Schema(minimum=-2)] = -0.3  # normal: the shortest gap (negative: an overlap), in seconds
    max: float = 1.5  # normal: the longest gap, in seconds
    same_speaker_min: AtLeastZero = 0.2  # two turns of the same speaker are at least this far apart, in seconds
    edges: tuple[float, ...] = ()  # histogram: ascending bin edges in seconds (negative: overlap)
    weights: tuple[AtLeastZero, ...] = ()  # histogram: one weight per bin

    def __post_init__(self) -> None:
        for name in ("edges", "weights"):
            object.__setattr__(self, name, tuple(float(x) for x in getattr(self, name)))
        if self.distribution == "histogram":
            e, w = self.edges, self.weights
            if len(e) < 2 or len(w) != len(e) - 1 or any(b <= a for a, b in zip(e, e[1:])) \
                    or min(w) < 0 or sum(w) <= 0:
                raise ValueError("a histogram gap needs ascending `edges` and one non-negative `weights` "
                                 f"entry per bin (got {len(e)} edges, {len(w)} weights)")

    def draw(self, rng: random.Random, same_speaker: bool = False) -> float:
        if self.distribution == "uniform":
            gap = rng.uniform(self.low, self.high)
        elif self.distribution == "normal":
            gap = min(max(rng.gauss(self.mean, self.sd), self.min), self.max)
        elif self.distribution == "histogram":
            u, acc, k = rng.random() * sum(self.weights), 0.0, len(self.weights) - 1
            for i, w in enumerate(self.weights):
                acc += w
                if u < acc:
                    k = i
                    break
            gap = rng.uniform(self.edges[k], self.edges[k + 1])
        else:
            raise ValueError(f"unknown gap distribution {self.distribution!r} (uniform, normal, histogram)")
        return max(gap, self.same_speaker_min) if same_speaker else gap

    def quantile(self, q: float, draws: int = 20000) -> float:
        """The q-quantile of the distribution, from a fixed sample (the same number every time)."""
        rng = random.Random(0)
        xs = sorted(self.draw(rng) for _ in range(draws))
        return xs[min(len(xs) - 1, int(q * len(xs)))]


# A recipe's gap: [low, high] (uniform) or a mapping (GapConfig).
Gap = Pair | GapConfig
Seconds = AtLeastZero | Range  # a fixed length, or [low, high] drawn per dialogue


@dataclass(frozen=True)
class QAConfig:
    """Off unless `enabled: true`: then Whisper checks every turn (or the `sample` share of dialogues):
    word error rate against the spoken text, and the median gap between our word starts and
    Whisper's (engine-timed turns only).

    The defaults: one word in three misheard is still a usable turn, two are not; Whisper base
    itself often puts word starts 50-100 ms early.
    """

    enabled: bool = False  # check turns with Whisper (off by default: no turn is heard unless this is true)
    max_wer: AtLeastZero = 0.4  # the highest word error rate a turn may have
    # the largest median gap between our word starts and Whisper's, in ms (engine-timed turns)
    max_start_error_ms: Positive = 200.0
    # the share of dialogues Whisper checks, drawn per dialogue from the seed: below 1 trades checking
    # for speed (engine-timed turns of the others are not heard at all); the card states the turns checked
    sample: Annotated[float, Schema(exclusiveMinimum=0, maximum=1)] = 1.0
    # the share when Whisper runs on a GPU (kame_data/accelerator.py), where hearing every turn is cheap;
    # default: `sample` (a paper-scale recipe checks 5% on the CPU and every turn on a GPU)
    gpu_sample: Annotated[float, Schema(exclusiveMinimum=0, maximum=1)] | None = None

    def __post_init__(self):
        for name in ("sample", "gpu_sample"):
            value = getattr(self, name)
            if value is not None and not 0 < value <= 1:
                raise ValueError(f"speak.qa.{name} must be in (0, 1], got {value}")

    def share(self, gpu: bool = False) -> float:
        """The share of dialogues checked, with Whisper on a GPU or not (0 with QA off)."""
        if not self.enabled:
            return 0.0
        return self.gpu_sample if gpu and self.gpu_sample is not None else self.sample

    def checks(self, seed: int, dialogue_id: str, gpu: bool = False) -> bool:
        """Whether QA checks this dialogue: the same answer for a dialogue whatever else is in the run
        (a drawn number below the share: the dialogues checked at 5% are among those checked at 50%)."""
        share = self.share(gpu)
        return share >= 1 or (share > 0 and random.Random(f"{seed}:qa:{dialogue_id}").random() < share)


@dataclass(frozen=True)
class ReplyConfig:
    """When the assistant answers: the gap from the user's last word to the assistant's first
    (negative: it starts before the user has finished). `gap` (default: `speak.gap`) draws it;
    a recipe whose distribution puts its 95th percentile above `max_p95` is refused, and a
    dialogue whose reply comes more than `max_seconds` late is rejected (`late_reply`)."""

    # the gap before the assistant answers: [low, high] draws uniformly; a mapping gives the distribution (a
    # histogram comes from kame-data fit-gaps); default: as speak.gap
    gap: Gap = field(default_factory=lambda: GapConfig(distribution="inherit"))
    max_p95: float | None = None  # a gap distribution whose 95th percentile is above this (seconds) is refused
    max_seconds: float | None = None  # a dialogue whose reply comes later than this (seconds) is rejected (late_reply)

    def __post_init__(self) -> None:
        if isinstance(self.gap, dict):
            object.__setattr__(self, "gap", GapConfig(**self.gap))
        elif isinstance(self.gap, (list, tuple)):
            object.__setattr__(self, "gap", GapConfig(low=float(self.gap[0]), high=float(self.gap[1])))
        if self.own_gap and self.max_p95 is not None and self.gap.quantile(0.95) > self.max_p95:
            raise ValueError(f"speak.reply: the reply gap's 95th percentile ({self.gap.quantile(0.95):.2f} s) "
                             f"is above max_p95 ({self.max_p95} s)")

    @property
    def own_gap(self) -> bool:
        """False: replies draw from `speak.gap` like every other turn."""
        return self.gap.distribution != "inherit"


@dataclass(frozen=True)
class PauseConfig:
    """Pauses inside a turn (see speech/pauses.py).

    The oracle ladder ends a speaker's run where a word ends 1.0 s or more after the previous one
    (records.CONTINUATION_GAP, docs/design.md); engines leave 0.8-1.1 s between sentences, which made a
    pause look like the end of the turn and handed the oracle the true reply early. With `bound`,
    a pause that would reach the run rule is redrawn from the range of its kind (after . ? ! from
    `sentence`, after , ; : from `clause`, else `word`), capped so the next word ends `margin`
    before the rule, and cut out of the silence. `bound: false` keeps the engines' pauses;
    `thinking` gives a user turn one long pause (seconds from `thinking_seconds`) at a sentence
    boundary with that probability. The ladder then ends the user's run at such a pause: level 5
    (the true reply) while the user has more to say; when the user goes on, the ratio falls back
    (the turn's words heard so far over all of them) and climbs again. Both therefore need
    `oracle.early_truth: keep`.
    """

    # redraw every pause the oracle's run rule (a word ending 1.0 s or more after the previous one) would read
    # as the end of the turn (false needs oracle.early_truth: keep)
    bound: bool = True
    sentence: Range = (0.4, 0.75)  # bound: the range a pause after . ? ! is redrawn from
    clause: Range = (0.2, 0.45)  # bound: the range a pause after , ; : is redrawn from
    word: Range = (0.05, 0.2)  # bound: the range any other pause is redrawn from
    # bound: seconds the next word ends before the run rule
    margin: Annotated[float, Schema(minimum=0, maximum=0.5)] = 0.05
    thinking: Share = 0.0  # probability of one long pause in a user turn (needs oracle.early_truth: keep)
    thinking_seconds: Range = (1.5, 3.0)  # the long pause's length

    def __post_init__(self) -> None:
        for name in ("sentence", "clause", "word", "thinking_seconds"):
            v = getattr(self, name)
            if len(v) != 2 or not 0 <= v[0] <= v[1]:
                raise ValueError(f"speak.pauses.{name}: give [low, high] seconds with 0 <= low <= high, got {v!r}")
            object.__setattr__(self, name, (float(v[0]), float(v[1])))
        if not 0 <= self.thinking <= 1:
            raise ValueError(f"speak.pauses.thinking is a probability, got {self.thinking!r}")

    @property
    def long_pauses(self) -> bool:
        """Whether turns may hold pauses the run rule reads as the end of the turn."""
        return not self.bound or self.thinking > 0


# A recipe's voice: a catalogue name or a mapping; a role's pool: one voice or a list of them.
Voice = Annotated[str, Schema(minLength=1)] | VoiceConfig
VoicePool = Voice | Annotated[tuple[Voice, ...], Schema(minItems=1)]


@dataclass(frozen=True)
class SpeakConfig:
    """The speak step's section: both roles' voices, the silences between and inside turns, loudness
    and the speech checks."""

    sample_rate: Literal[24000] = 24000  # Hz of every rendered dialogue (Mimi's rate)
    # The assistant's voice: a catalogue voice by name (kame-data voices list), or a mapping: an engine voice, or
    # {name: <catalogue voice>, ...} to change its tags; or a list of them, a pool from which each dialogue draws
    # one (by a hash of the seed and its id). Default: the catalogue's (role_defaults in speech/voices.json).
    assistant: VoicePool = field(default_factory=lambda: role_default(ASSISTANT))
    # The user's voice: a catalogue voice by name (kame-data voices list), or a mapping: an engine voice, or
    # {name: <catalogue voice>, ...} to change its tags; or a list of them, a pool from which each dialogue draws
    # one (by a hash of the seed and its id). Default: the catalogue's (role_defaults in speech/voices.json).
    user: VoicePool = field(default_factory=lambda: role_default(USER))
    # Seconds from one turn's last word to the next turn's first (negative: overlap): [low, high] draws
    # uniformly; a mapping gives the distribution (a histogram comes from kame-data fit-gaps).
    gap: Gap = field(default_factory=GapConfig)
    pauses: PauseConfig = field(default_factory=PauseConfig)  # pauses inside a turn
    lead_in: Seconds = 0.3  # seconds of silence before the first word: a number, or [low, high]
    tail: Seconds = 0.4  # seconds of silence after the last word: a number, or [low, high]
    target_dbfs: Annotated[float, Schema(maximum=0)] = -20.0  # loudness every turn is normalised to, in dBFS
    max_turn_seconds: Positive = 90.0  # a longer rendered turn rejects the dialogue
    # Whisper listens to every turn; a voice above either threshold is replaced by the pool's next one, else the
    # dialogue is rejected
    qa: QAConfig = field(default_factory=QAConfig)
    workers: Annotated[int, Schema(minimum=1)] | None = operational(None)  # worker processes (default: one per core)
    # casting: give each sex (or accent) of a pool the same chance of being cast
    balance: Literal["", "sex", "accent"] = ""
    # before casting, every pool voice reads fixed sentences to Whisper; voices above max_wer (median) are left out
    screen: ScreenConfig = field(default_factory=ScreenConfig)
    # when the assistant answers the user: its gap distribution (default: gap), a gate on its 95th percentile, a
    # per-dialogue limit
    reply: ReplyConfig = field(default_factory=ReplyConfig)
    # live turn-taking: listener backchannels and user barge-ins (off by default)
    turns: TurnTakingConfig = field(default_factory=TurnTakingConfig)
    # after mixing, Whisper listens to the assistant channel: the answer must still be heard (else another voice,
    # else answer_lost)
    answer: AnswerCheckConfig = field(default_factory=AnswerCheckConfig)

    def __post_init__(self) -> None:
        # Recipes arrive as plain mappings and lists: make every field its typed, hashable form.
        for role in ("assistant", "user"):
            object.__setattr__(self, role, resolve(getattr(self, role), role))
        for name, cls in (("screen", ScreenConfig), ("reply", ReplyConfig), ("turns", TurnTakingConfig),
                          ("answer", AnswerCheckConfig)):
            if isinstance(getattr(self, name), dict):
                object.__setattr__(self, name, cls(**getattr(self, name)))
        if self.balance not in ("", "sex", "accent"):
            raise ValueError(f"speak.balance: {self.balance!r} (use sex, accent or leave it out)")
        if isinstance(self.gap, (list, tuple)):
            if len(self.gap) != 2:
                raise ValueError(f"speak.gap: give [low, high] or a mapping, got {self.gap!r}")
            object.__setattr__(self, "gap", GapConfig(distribution="uniform", low=float(self.gap[0]),
                                                      high=float(self.gap[1])))
        elif isinstance(self.gap, dict):
            object.__setattr__(self, "gap", GapConfig(**self.gap))
        if isinstance(self.qa, dict):
            object.__setattr__(self, "qa", QAConfig(**self.qa))
        if isinstance(self.pauses, dict):
            object.__setattr__(self, "pauses", PauseConfig(**self.pauses))
        for name in ("lead_in", "tail"):
            v = getattr(self, name)
            if isinstance(v, list):
                object.__setattr__(self, name, tuple(v))
        if self.reply.max_p95 is not None and not self.reply.own_gap and self.gap.quantile(0.95) > self.reply.max_p95:
            raise ValueError(f"speak.reply: the gap's 95th percentile ({self.gap.quantile(0.95):.2f} s) is above "
                             f"max_p95 ({self.reply.max_p95} s)")

    def gap_for(self, speaker: str, previous: str) -> GapConfig:
        """The distribution of the gap before a turn of `speaker` after one of `previous`."""
        if speaker == "A" and previous == "B" and self.reply.own_gap:
            return self.reply.gap
        return self.gap

    def pool(self, role: str) -> tuple[VoiceConfig, ...]:
        return self.assistant if role == ASSISTANT else self.user  # type: ignore[return-value]

    @property
    def voices(self) -> list[VoiceConfig]:
        """Every distinct voice of both pools, in order."""
        return list(dict.fromkeys(self.pool(ASSISTANT) + self.pool(USER)))


@dataclass(frozen=True)
class QualityConfig:
    """The recipe's `quality:` section. None disables a threshold (the figure is still measured)."""

    enabled: bool = False  # measure every turn
    dnsmos: bool = True  # the slowest measure (about 0.03 s of one core per second of speech at the default hop)
    # Seconds between the starts of DNSMOS's 9.01 s windows over a turn (the last window ends with the turn).
    # Microsoft's scoring script slides by 1 s, which costs nine model passes per second of a long turn for a
    # mean that moves by hundredths; the default scores each stretch of the turn once.
    dnsmos_hop: Annotated[float, Schema(minimum=0.5, maximum=9.01)] = 9.01
    min_dnsmos: Annotated[float, Schema(minimum=1, maximum=5)] | None = None  # overall MOS (1-5) of every turn
    max_speech_outside: AtLeastZero | None = 1.0  # seconds of VAD speech outside the turn's words (± margin)
    min_word_speech: Share | None = 0.5  # share of the words' time VAD hears speech in
    max_clipped: Annotated[int, Schema(minimum=0)] | None = 0  # samples at full scale in a turn
    min_lufs: float | None = None  # the quietest loudness a turn may have (LUFS); null: off
    max_lufs: float | None = None  # the loudest a turn may be (LUFS); null: off
    margin: AtLeastZero = 0.15  # seconds around each word still counted as that word
    # Silero VAD's speech probability threshold
    vad_threshold: Annotated[float, Schema(exclusiveMinimum=0, exclusiveMaximum=1)] = 0.5


NOISES = ("white", "pink", "brown")  # the acoustics step's noise colours
# Band limits (Hz) of each microphone response: (high-pass, low-pass); None: not filtered.
MICS: dict[str, tuple[float | None, float | None]] = {
    "flat": (None, None), "headset": (100.0, 7000.0), "laptop": (180.0, 9000.0), "phone": (300.0, 3400.0)}


@dataclass(frozen=True)
class AcousticsConfig:
    """The recipe's `acoustics:` section (off by default)."""

    enabled: bool = False  # simulate the user's room, microphone and noise
    snr_db: Pair = (10.0, 30.0)  # [low, high] signal-to-noise ratio in dB, drawn uniformly per dialogue
    noise: Annotated[tuple[Literal[NOISES], ...], Schema(minItems=1)] = NOISES  # kinds drawn from
    reverb: Share = 0.6  # share of dialogues in a simulated room
    # [low, high] reverberation time of the simulated rooms, in seconds
    rt60: tuple[Positive, Positive] = (0.15, 0.6)
    # rooms in the bank a dialogue draws from (each simulated once, then cached)
    rooms: Annotated[int, Schema(minimum=1)] = 8
    # microphone responses drawn from
    mic: Annotated[tuple[Literal[tuple(MICS)], ...], Schema(minItems=1)] = tuple(MICS)
    gain_db: Pair = (-6.0, 3.0)  # [low, high] level change of the user channel in dB

    def __post_init__(self) -> None:
        for name in ("snr_db", "noise", "rt60", "mic", "gain_db"):
            object.__setattr__(self, name, tuple(getattr(self, name)))
        bad = [n for n in self.noise if n not in NOISES] + [m for m in self.mic if m not in MICS]
        if bad:
            raise ValueError(f"acoustics: unknown noise or microphone {bad[0]!r} "
                             f"(noise: {', '.join(NOISES)}; mic: {', '.join(MICS)})")
