"""Starter model and data for homework 3 (FSDP: from "does not fit" to "fits").

``build_model(size)`` returns a GPT-style decoder whose transformer blocks are
``model.blocks`` (an ``nn.ModuleList`` of ``Block``): wrap each block as its own
FSDP unit. ``make_dataset(size)`` returns a synthetic but learnable data set of
``(input_ids, labels)`` pairs; nothing is downloaded. ``SIZES`` lists the named sizes:
``1b`` is the real homework (two 16 GB cards), ``small`` mirrors its memory
arithmetic at CPU scale, ``tiny`` is for quick tests.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import Dataset


@dataclass(frozen=True)
class Size:
    """Shape of one named model size, plus the batch the grader's numbers assume."""

    d_model: int
    n_layers: int
    n_heads: int
    vocab: int
    seq_len: int
    batch_size: int  # per rank
    used_tokens: int = 8  # the data only uses this many token ids: loss falls fast

    @property
    def params(self) -> int:
        """Exact parameter count of ``build_model`` for this size (tied embeddings)."""
        d = self.d_model
        block = 12 * d * d + 13 * d  # attention 4d^2+4d, MLP 8d^2+5d, two LayerNorms 4d
        return self.vocab * d + self.seq_len * d + self.n_layers * block + 2 * d


SIZES: dict[str, Size] = {
    "1b": Size(d_model=2048, n_layers=22, n_heads=16, vocab=32000, seq_len=512, batch_size=1),
    "small": Size(d_model=384, n_layers=6, n_heads=6, vocab=4096, seq_len=32, batch_size=2),
    "tiny": Size(d_model=256, n_layers=8, n_heads=4, vocab=1024, seq_len=16, batch_size=1),
}


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and a 4x MLP."""

    def __init__(self, d: int, heads: int):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.fc = nn.Linear(d, 4 * d)
        self.out = nn.Linear(4 * d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).unbind(2)
        y = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                           is_causal=True)
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token + position embeddings, ``blocks``, a final LayerNorm and a tied output head."""

    def __init__(self, size: Size):
        super().__init__()
        self.size = size
        self.tok = nn.Embedding(size.vocab, size.d_model)
        self.pos = nn.Embedding(size.seq_len, size.d_model)
        self.blocks = nn.ModuleList(Block(size.d_model, size.n_heads) for _ in range(size.n_layers))
        self.ln = nn.LayerNorm(size.d_model)
        self.apply(self._init)

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, input_ids: torch.Tensor, labels: torch.Tensor | None = None) -> torch.Tensor:
        """Logits, or the mean cross-entropy when ``labels`` are given."""
        pos = torch.arange(input_ids.shape[1], device=input_ids.device)
        x = self.tok(input_ids) + self.pos(pos)
        for block in self.blocks:
            x = block(x)
        logits = F.linear(self.ln(x), self.tok.weight)
        if labels is None:
            return logits
        return F.cross_entropy(logits.flatten(0, 1), labels.flatten())


def build_model(size: str) -> GPT:
    """A freshly initialised model of a named size (see ``SIZES``)."""
    return GPT(SIZES[size])


class MotifData(Dataset):
    """Sequences that repeat a random 4-token motif drawn from a few token ids.

    Sample ``i`` is generated from seed ``i`` on demand, so the data set holds no memory
    and every rank can build it identically.
    """

    def __init__(self, size: Size, length: int = 4096):
        self.size, self.length = size, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        g = torch.Generator().manual_seed(int(i))
        motif = torch.randint(0, min(self.size.used_tokens, self.size.vocab), (4,), generator=g)
        seq = motif.repeat(math.ceil((self.size.seq_len + 1) / 4))[: self.size.seq_len + 1]
        return seq[:-1].clone(), seq[1:].clone()


def make_dataset(size: str) -> MotifData:
    """The synthetic training set for a named size: ``(input_ids, labels)`` LongTensors.

    4096 samples; under grading exactly as many as the graded run takes (``DISTGRADE_DATA_LEN``), so that the run is
    one epoch and the grader can tell data split between the ranks from ranks that each walk all of it."""
    n = os.environ.get("DISTGRADE_DATA_LEN", "")
    return MotifData(SIZES[size], int(n) if n.isdigit() and 0 < int(n) <= 4096 else 4096)
