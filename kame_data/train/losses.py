"""The training losses, as kame_finetune weighs them (SakanaAI/kame_finetune, finetune.py: `forward`).

Text: the cross-entropy of the text stream, over three kinds of frame: text tokens, end-of-pad
(the frame before a token) and pad. The reference averages text tokens and end-of-pad together
and adds `text_pad_weight` times the average over pads (`text_pad_norm: separate`); kame-data's
former rule was one mean in which pad and end-of-pad frames weigh `text_pad_weight` (`weighted`).

Audio: the model's own codebooks; the first (semantic) one weighs `semantic_weight` (100 in the
reference) and the others `acoustic_weight` (1) in one weighted mean.

Everything is kept as sums and counts per kind, which add up over micro-batches, eval batches and
data-parallel ranks, so a loss over several of them is the loss over their union.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from moshi.models.lm import LMOutput

from kame_data.train.streams import END_OF_PAD_ID, TEXT_PAD_ID

KINDS = ("text_token", "end_of_pad", "pad", "semantic", "acoustic")  # the order of `sums` and `counts`


@dataclass(frozen=True)
class LossRule:
    """How the per-kind sums become the text and audio losses (defaults: the reference's)."""

    text_pad_weight: float = 0.5
    text_pad_norm: str = "separate"  # separate | weighted
    semantic_weight: float = 100.0
    acoustic_weight: float = 1.0

    @classmethod
    def of(cls, loop) -> "LossRule":
        """From the recipe's `train` section (config.LoopConfig)."""
        return cls(loop.text_pad_weight, loop.text_pad_norm, loop.semantic_weight, loop.acoustic_weight)


def loss_parts(out: LMOutput, codes: torch.Tensor, dep_q: int) -> dict[str, torch.Tensor]:
    """Per-kind cross-entropy sums (with gradient) and counts over the valid positions of moshi's
    output masks, plus the per-frame text loss [B, T] (0 where invalid) that tests score frames by."""
    text_logits = out.text_logits[:, 0].float()  # [B, T, V]
    target = codes[:, 0]
    valid = out.text_mask[:, 0] & (target >= 0)
    V = text_logits.shape[-1]
    per_frame = F.cross_entropy(text_logits.reshape(-1, V).nan_to_num(), target.clamp(min=0).reshape(-1),
                                reduction="none").view_as(target) * valid
    pad, eop = valid & (target == TEXT_PAD_ID), valid & (target == END_OF_PAD_ID)
    text_masks = (valid & ~pad & ~eop, eop, pad)

    logits = out.logits.float()  # [B, dep_q, T, card]
    audio_target = codes[:, 1:1 + dep_q]
    amask = out.mask & (audio_target >= 0)
    C = logits.shape[-1]
    books = []
    for k in range(dep_q):
        m = amask[:, k]
        books.append(F.cross_entropy(logits[:, k][m].reshape(-1, C), audio_target[:, k][m], reduction="sum")
                     if m.any() else logits.sum() * 0.0)
    semantic = books[0]
    acoustic = torch.stack(books[1:]).sum() if dep_q > 1 else semantic * 0.0
    sums = torch.stack([(per_frame * m).sum() for m in text_masks] + [semantic, acoustic])
    counts = torch.stack([m.sum() for m in text_masks] + [amask[:, 0].sum(), amask[:, 1:].sum()]).float()
    return {"sums": sums, "counts": counts, "text_per_frame": per_frame, "text_mask": valid}


def combine(sums: torch.Tensor, counts: torch.Tensor, rule: LossRule) -> tuple[torch.Tensor, torch.Tensor]:
    """(text loss, audio loss) from per-kind sums and counts (see KINDS). Linear in `sums`, so the
    sums of one rank with the counts of the whole batch give that rank's share of the batch loss."""
    s_tok, s_eop, s_pad, s_sem, s_ac = sums.unbind()
    n_tok, n_eop, n_pad, n_sem, n_ac = counts.unbind()
    w = rule.text_pad_weight
    if rule.text_pad_norm == "separate":
        text = (s_tok + s_eop) / (n_tok + n_eop).clamp(min=1) + w * s_pad / n_pad.clamp(min=1)
    else:
        text = (s_tok + w * (s_eop + s_pad)) / (n_tok + w * (n_eop + n_pad)).clamp(min=1e-6)
    ws, wa = rule.semantic_weight, rule.acoustic_weight
    audio = (ws * s_sem + wa * s_ac) / (ws * n_sem + wa * n_ac).clamp(min=1e-6)
    return text, audio


def lm_losses(out: LMOutput, codes: torch.Tensor, dep_q: int, rule: LossRule = LossRule()) -> dict[str, torch.Tensor]:
    """`loss_parts` and the text and audio losses of this batch alone."""
    parts = loss_parts(out, codes, dep_q)
    text, audio = combine(parts["sums"], parts["counts"], rule)
    return {**parts, "text": text, "audio": audio}
