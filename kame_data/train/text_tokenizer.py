"""The text tokenizer: SentencePiece with Moshi's special ids, Moshi's own model or a tiny one trained
on the dataset's text (tests, CPU runs)."""

from __future__ import annotations

import io

from kame_data.train.streams import encode_lines


class TextTokenizer:
    """SentencePiece with Moshi's special ids: 0 end-of-pad (Moshi's), 3 pad."""

    def __init__(self, model_bytes: bytes):
        import sentencepiece as spm

        self.model_bytes = model_bytes
        self.sp = spm.SentencePieceProcessor(model_proto=model_bytes)
        nl = self.sp.encode("\n")
        self.newline_id: int | None = nl[-1] if nl else None

    @property
    def vocab_size(self) -> int:
        return int(self.sp.get_piece_size())

    def encode(self, text: str) -> list[int]:
        return list(self.sp.encode(text))

    def pieces(self, text: str) -> list[tuple[int, str]]:
        """(id, piece text) for `text`, for placing tokens by characters (transcript.py). A run of
        byte-fallback pieces (`<0x..>`) becomes one piece, the characters it decodes to, with the id
        the vocabulary gives that text (usually unknown), as kame_finetune's tools/tokenize_text.py
        merges them."""
        ids, texts = list(self.sp.encode(text)), list(self.sp.encode(text, out_type=str))
        out: list[tuple[int, str]] = []
        run: list[str] = []
        for tid, piece in zip(ids, texts):
            if not (piece.startswith("<0x") and self.sp.is_byte(tid)):
                out.append((tid, piece))
                continue
            run.append(piece)
            decoded = self.sp.decode_pieces(run)
            if decoded and "\ufffd" not in decoded:  # a whole character
                out.append((int(self.sp.piece_to_id(decoded)), decoded))
                run = []
        if run:
            out.append((int(self.sp.unk_id()), "".join(run)))
        return out

    def encode_text(self, text: str) -> list[int]:
        return encode_lines(self.encode, text, self.newline_id)

    def char_ends(self, text: str) -> list[int]:
        """Per token of `encode_text(text)`: where its last character ends in `text` (exclusive),
        for timing tokens by the reply pieces they arrive in (the newline token ends at its line
        break)."""
        out: list[int] = []
        offset = 0
        for n, line in enumerate(text.split("\n")):
            if n and self.newline_id is not None:
                out.append(offset)  # the newline piece, at the break before this line
            pos = 0
            for piece in self.sp.encode(line, out_type=str):
                pos += len(piece.replace("\u2581", " "))
                out.append(offset + min(len(line), max(0, pos - 1)))  # less SentencePiece's leading space
            offset += len(line) + 1
        return out


def train_tiny_tokenizer(texts: list[str], vocab_size: int) -> TextTokenizer:
    """A small SentencePiece model trained on the dataset's own text, offline and deterministic:
    a stand-in for Moshi's 32k tokenizer in tests and CPU runs. Ids 0-3 are unk, bos, eos, pad,
    matching Moshi's layout (pad 3)."""
    import sentencepiece as spm

    buf = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=buf, vocab_size=vocab_size, model_type="unigram",
        character_coverage=1.0, hard_vocab_limit=False, unk_id=0, bos_id=1, eos_id=2, pad_id=3,
        num_threads=1, shuffle_input_sentence=False, minloglevel=2)
    return TextTokenizer(buf.getvalue())


def load_tokenizer(spec: str) -> TextTokenizer:
    from moshi.models import loaders

    from kame_data.train.model import resolve_file

    return TextTokenizer(resolve_file(spec, loaders.TEXT_TOKENIZER_NAME).read_bytes())


# ---------------------------------------------------------------------------------------- audio
