"""A speaker's timed words -> its per-frame text stream (docs/design.md, "Training streams"), numpy only.

Two placements (`tokenize.text_placement`):

- `chars`, the reference's (SakanaAI/kame_finetune, tools/tokenize_text.py): the speaker's words
  are joined with single spaces and tokenised as one text; each word's time span is shared equally
  among its characters (its leading space included), and a token starts at the time of the first
  character it covers. So a long word's later tokens land later inside the word, not in the frames
  right after its start.
- `word_start`, kame-data's former placement: each word is tokenised alone and its tokens go one
  per frame from the frame of the word's start.

Both then write each token in the first free frame at or after its own (a token never overwrites
another), and turn the pad right before a token into end-of-pad.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from kame_data.train.streams import END_OF_PAD_ID, FRAME_RATE, TEXT_PAD_ID, Encode, frame_of_seconds, text_frame

SPACE = "\u2581"  # SentencePiece's mark for a space inside a piece
Pieces = Callable[[str], list[tuple[int, str]]]  # text -> (id, piece text) in order; byte runs already merged


def text_stream(words: Iterable[tuple[str, float]], encode: Encode, frames: int, arithmetic: str = "reference",
                pad_id: int = TEXT_PAD_ID, end_pad_id: int = END_OF_PAD_ID) -> np.ndarray:
    """`word_start` placement from (word, start seconds) pairs in time order: a word's tokens go
    one per frame from the frame of its start, or right after the previous word's tokens when
    those run past it (so no token is lost); tokens past the end are cut."""
    out = np.full(frames, pad_id, dtype=np.int64)
    cursor = 0
    for word, start in words:
        toks = encode(word)
        if not toks:
            continue
        pos = max(text_frame(start, arithmetic), cursor)
        if pos >= frames:
            break
        if pos > 0 and out[pos - 1] == pad_id:
            out[pos - 1] = end_pad_id
        n = min(len(toks), frames - pos)
        out[pos:pos + n] = toks[:n]
        cursor = pos + n
    return out


def token_times(words: Sequence[tuple[str, float, float]], pieces: Pieces) -> list[tuple[float, float, int]]:
    """(start, end, id) of each token of one speaker's (word, start, end) list, by characters.

    The first word is stripped and every later one gets one leading space; the joined text's first
    piece carries SentencePiece's dummy space, which covers no character (a first piece that is only
    that space is dropped). A piece left without characters is dropped too (the reference stops
    there with an alignment error unless told to warn).
    """
    ordered = sorted(words, key=lambda w: w[1])  # stable: words starting together keep their order
    texts = [w[0].strip() if i == 0 else " " + w[0].strip() for i, w in enumerate(ordered)]
    spans: list[tuple[float, float]] = []
    for text, (_, start, end) in zip(texts, ordered):
        share = (end - start) / len(text) if text else 0.0
        spans += [(start + k * share, start + (k + 1) * share) for k in range(len(text))]
    out: list[tuple[float, float, int]] = []
    used = 0
    for k, (tid, piece) in enumerate(pieces("".join(texts))):
        width = len(piece)
        if k == 0 and piece.startswith(SPACE):
            if piece == SPACE:
                continue
            width -= 1
        covered = spans[used:used + width]
        if not covered:
            continue
        out.append((covered[0][0], covered[-1][1], tid))
        used += len(covered)
    return out


def text_stream_by_chars(words: Sequence[tuple[str, float, float]], pieces: Pieces, frames: int,
                         arithmetic: str = "reference", pad_id: int = TEXT_PAD_ID,
                         end_pad_id: int = END_OF_PAD_ID) -> np.ndarray:
    """`chars` placement (see the module docstring) from (word, start, end) triples.

    As in the reference, tokens are placed within a stream reaching one second past the last
    token's end (a token pushed beyond it is dropped with all after it), which is then cut or padded
    to `frames`, the audio's length.
    """
    toks = token_times(words, pieces)
    if not toks:
        return np.full(frames, pad_id, dtype=np.int64)
    last_end = toks[-1][1]
    span = int((last_end + 1) * FRAME_RATE) if arithmetic == "reference" else frame_of_seconds(last_end + 1)
    out = np.full(max(span, frames), pad_id, dtype=np.int64)
    for start, _, tid in toks:
        f = max(0, text_frame(start, arithmetic))
        while f < span and out[f] != pad_id:
            f += 1
        if f >= span:
            break
        out[f] = tid
        if f > 0 and out[f - 1] == pad_id:
            out[f - 1] = end_pad_id
    return out[:frames]
