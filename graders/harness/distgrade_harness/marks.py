"""Which synthetic samples reached the model.

The grader writes every synthetic CIFAR image with a mark of its own (``graders.cifar``): a few
faint waves along the rows and a few along the columns, added to every channel. Which 4 of 8
frequencies each axis carries names the sample: 70 x 70 = 4,900 marks. A wave's strength at a
frequency does not change when the image is shifted (a random crop), mirrored (a flip), or scaled
and offset per channel (``ToTensor`` and ``Normalize``), so the mark is read from the batch that
enters the model's forward, whatever loaded it: a DataLoader, a sampler that lies, plain tensor
indexing. The class patterns are cleared of those frequencies in their row and column means.

A crop's zero padding leaves whole rows or columns constant; they are left out and the waves are
fitted by least squares on the rows (columns) that remain. A read is accepted only when the four
strongest frequencies stand clearly above the other four on both axes; anything else (another
data set, a resize, a rotation) reads as unknown and counts as not observed, never as a sample.

This file is shared: the grader writes marks with ``ids_to_freqs``; the harness reads them.
"""
from __future__ import annotations

import itertools
import math

SIZE = 32  # image side the marks are written for
FREQS = tuple(range(1, 17, 2))  # waves per image side, two apart: still separable on the 24 lines a crop may leave
PER_AXIS = 4  # frequencies set on each axis
COMBOS = tuple(itertools.combinations(FREQS, PER_AXIS))
CAPACITY = len(COMBOS) ** 2  # distinct marks
AMPLITUDE = 12.0  # each wave's amplitude, in 0..255 pixel units
MIN_GAP = 2.0  # weakest chosen frequency / strongest other, on each axis, for a read to count
MIN_LINES = 20  # rows (columns) left after a crop's padding for a read
_INDEX = {c: i for i, c in enumerate(COMBOS)}


def ids_to_freqs(sample: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(row frequencies, column frequencies) of the sample numbered ``sample`` (0 <= sample < CAPACITY)."""
    return COMBOS[sample // len(COMBOS)], COMBOS[sample % len(COMBOS)]


class Reader:
    """Reads the marks of a batch of images, all at once (``torch`` imported in the caller's process only)."""

    def __init__(self):
        import torch
        self.torch = torch
        y = torch.arange(SIZE, dtype=torch.float64)  # the waves in double precision, then float32
        cols = [torch.ones_like(y)]
        for k in FREQS:
            cols += [torch.cos(2 * math.pi * k * y / SIZE), torch.sin(2 * math.pi * k * y / SIZE)]
        self.basis = torch.stack(cols, 1).float()  # SIZE x (1 + 2 * len(FREQS))
        self.pinv = torch.linalg.pinv(self.basis)
        table = torch.full((1 << len(FREQS),), -1, dtype=torch.long)  # chosen frequencies as bits -> combination
        for i, combo in enumerate(COMBOS):
            table[sum(1 << FREQS.index(k) for k in combo)] = i
        self.table = table
        self.bits = 1 << torch.arange(len(FREQS))

    def _axis(self, profile, keep):
        """Combination index per image (-1: unreadable) from profiles (B x C x SIZE) over kept lines (B x SIZE)."""
        torch = self.torch
        coef = profile @ self.pinv.T  # B x C x (1 + 2k): exact where every line is kept (no padding)
        cut = ~keep.all(1)
        if bool(cut.any()):  # a crop's padding: least squares on the lines that remain
            w = keep[cut].to(profile.dtype)
            normal = torch.einsum("yi,by,yj->bij", self.basis, w, self.basis)
            normal = normal + 1e-6 * torch.eye(normal.shape[1], dtype=normal.dtype)  # a batch of solvable systems
            rhs = torch.einsum("yi,bcy->bic", self.basis, profile[cut] * w[:, None, :])
            coef[cut] = torch.linalg.solve(normal, rhs).transpose(1, 2)
        mags = (coef[:, :, 1::2] ** 2 + coef[:, :, 2::2] ** 2).sqrt()  # B x C x k
        mags = (mags / mags.sum(2, keepdim=True).clamp_min(1e-12)).sum(1)  # each channel's own scale; B x k
        ranked = mags.sort(1, descending=True)
        top = ranked.indices[:, :PER_AXIS]
        clear = ranked.values[:, PER_AXIS - 1] >= MIN_GAP * ranked.values[:, PER_AXIS]
        code = self.table[self.bits[top].sum(1)]
        return torch.where(clear & (keep.sum(1) >= MIN_LINES), code, torch.full_like(code, -1))

    def read(self, x) -> list[int] | None:
        """The sample number of each image of ``x`` (-1 where unreadable), or None when ``x`` is not a
        batch of 3-channel SIZE x SIZE images (or of such images flattened)."""
        torch = self.torch
        if x.dim() == 2 and x.shape[1] == 3 * SIZE * SIZE:
            x = x.reshape(-1, 3, SIZE, SIZE)
        if x.dim() != 4 or x.shape[1] != 3 or x.shape[2] != SIZE or x.shape[3] != SIZE or not x.is_floating_point():
            return None
        with torch.no_grad():
            x = x.detach().to(device="cpu", dtype=torch.float32)
            tol = 1e-5 * (1 + x.abs().amax((1, 2, 3)))[:, None, None]
            rows = ((x.amax(3) - x.amin(3)) > tol).any(1)  # B x SIZE: False where a row is all one value
            cols = ((x.amax(2) - x.amin(2)) > tol).any(1)
            rw, cw = rows.to(x.dtype), cols.to(x.dtype)
            row_profile = (x @ cw[:, None, :, None]).squeeze(3) / cw.sum(1).clamp_min(1)[:, None, None]
            col_profile = (rw[:, None, None, :] @ x).squeeze(2) / rw.sum(1).clamp_min(1)[:, None, None]
            r, c = self._axis(row_profile, rows), self._axis(col_profile, cols)
            ids = torch.where((r >= 0) & (c >= 0), r * len(COMBOS) + c, torch.full_like(r, -1))
            return ids.tolist()
