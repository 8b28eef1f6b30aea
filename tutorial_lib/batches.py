"""Batches: collation (padding, BERT's masking) and the data stream that can resume anywhere.

* :func:`pad_ids` / :func:`pad_collate` — right-padded ``input_ids`` and ``attention_mask`` (and
  labels per row or per token); :func:`mask_tokens` — BERT's 80/10/10 masking;
* :func:`eval_loader` — an evaluation loader, shortest rows first;
* :class:`ResumableBatchSampler` / :func:`resumable_loader` — a ``DataLoader`` whose order is a
  function of (seed, pass over the data) only, so that a resumed run continues the data stream
  where it was interrupted (every training loader of the package is one).

:mod:`tutorial_lib.training` trains on these (and re-exports them under their old names).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, Sampler

from .models import IGNORE_INDEX

Batch = dict[str, torch.Tensor]


# --- data collation --------------------------------------------------------------------------


def mask_tokens(
    input_ids: torch.Tensor,
    *,
    mask_id: int,
    vocab_size: int,
    special_ids: Sequence[int],
    probability: float = 0.15,
    generator: torch.Generator | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's masking (Devlin et al. 2019, Sec. 3.1): choose ``probability`` of the non-special
    tokens as targets; replace 80% of them by [MASK], 10% by a random token, keep 10%.

    Returns ``(inputs, labels)`` with labels = IGNORE_INDEX at positions that are not targets.
    """
    labels = input_ids.clone()
    inputs = input_ids.clone()
    special = torch.isin(input_ids, torch.tensor(list(special_ids), device=input_ids.device))
    probs = torch.full(input_ids.shape, probability, device=input_ids.device)
    probs.masked_fill_(special, 0.0)
    targets = torch.bernoulli(probs, generator=generator).bool()
    labels[~targets] = IGNORE_INDEX
    u = torch.rand(input_ids.shape, generator=generator, device=input_ids.device)
    to_mask = targets & (u < 0.8)
    to_random = targets & (u >= 0.8) & (u < 0.9)
    inputs[to_mask] = mask_id
    random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
    inputs[to_random] = random_ids.to(input_ids.device)[to_random]
    return inputs, labels


def pad_ids(rows: Sequence[Sequence[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-pad token-id lists to the longest: ``(input_ids, attention_mask)``, both [B, T]."""
    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        ids[i, : len(r)] = torch.as_tensor(r, dtype=torch.long)
        mask[i, : len(r)] = 1
    return ids, mask


def pad_collate(pad_id: int) -> Callable[[list[dict]], Batch]:
    """Collate ``{"input_ids": list[int], "labels": ...}`` rows into right-padded tensors.

    ``labels`` may be one value per row (classification, regression) or one per token (a list,
    padded with IGNORE_INDEX: token classification).
    """

    def collate(rows: list[dict]) -> Batch:
        ids, mask = pad_ids([r["input_ids"] for r in rows], pad_id)
        batch = {"input_ids": ids, "attention_mask": mask}
        if "labels" in rows[0]:
            labels = [r["labels"] for r in rows]
            if isinstance(labels[0], (list, tuple)):
                labels = pad_ids(labels, IGNORE_INDEX)[0]
            batch["labels"] = torch.as_tensor(labels)
        return batch

    return collate


def input_lengths(rows: Sequence[Mapping]) -> list[int]:
    """The number of ``input_ids`` of every row."""
    return [len(r["input_ids"]) for r in rows]


def eval_loader(rows: Sequence[Mapping], batch_size: int, collate_fn: Callable,
                by_length: bool = True) -> DataLoader:
    """An evaluation loader; ``by_length``: it visits ``rows`` shortest ``input_ids`` first, so each
    padded batch is nearly as long as its own rows (on sentence data about half the tokens of the
    given order). Metrics over the whole set do not depend on the order; outputs per row come in
    it."""
    order = None
    if by_length:
        lengths = input_lengths(rows)
        order = sorted(range(len(rows)), key=lengths.__getitem__)
    return DataLoader(rows, batch_size=batch_size, sampler=order, collate_fn=collate_fn)


# --- a data stream that can resume anywhere -----------------------------------------------------


def _pass_seed(seed: int, pass_index: int) -> int:
    """A generator seed for one pass over the data, a function of (seed, pass) only."""
    return int(np.random.SeedSequence([seed, pass_index]).generate_state(1, dtype=np.uint64)[0])


class ResumableBatchSampler(Sampler[list[int]]):
    """Batches of dataset indices, pass after pass, that can start at any batch of the stream.

    Pass ``p`` visits the indices in the order ``torch.randperm(n)`` draws from a generator seeded
    with (``seed``, ``p``) (``range(n)`` without ``shuffle``), cut into batches; ``len()`` is the
    number of batches in one pass. Nothing here depends on the global random state or on how
    often the sampler was iterated, so batch ``i`` of the stream is a function of (seed, i):
    :meth:`seek` (called by the trainer of :func:`create_trainer` with its iteration when a run
    starts) makes a resumed run draw exactly the batches the interrupted one would have drawn.
    Ignite's ``Engine`` consumes one batch per iteration and starts a new pass (a new iterator)
    when one ends, also when its epochs are shorter or longer than a pass.

    ``rank``/``world_size``: under ``torchrun`` every process takes every ``world_size``-th index
    of the same permutation (the pass is cut to a multiple of ``world_size``, as PyTorch's
    ``DistributedSampler(drop_last=True)`` does).
    """

    def __init__(
        self,
        n: int,
        batch_size: int,
        *,
        seed: int = 0,
        shuffle: bool = True,
        drop_last: bool = False,
        rank: int = 0,
        world_size: int = 1,
        lengths: Sequence[int] | None = None,
        window: int = 8,
    ) -> None:
        if n < 1 or batch_size < 1:
            raise ValueError(f"need at least one example and batch_size >= 1, got n={n}, "
                             f"batch_size={batch_size}")
        if lengths is not None and len(lengths) != n:
            raise ValueError(f"lengths has {len(lengths)} entries for {n} examples")
        self.n, self.batch_size, self.seed, self.shuffle = n, batch_size, seed, shuffle
        self.lengths, self.window = (list(lengths) if lengths is not None else None), window
        self.drop_last, self.rank, self.world_size = drop_last, rank, world_size
        self.per_rank = n // world_size  # indices per process and pass
        self.position = 0  # index in the stream of the next batch to draw

    def __len__(self) -> int:
        if self.drop_last:
            return self.per_rank // self.batch_size
        return math.ceil(self.per_rank / self.batch_size)

    def order(self, pass_index: int) -> list[int]:
        """This process's indices in pass ``pass_index``."""
        if self.shuffle:
            gen = torch.Generator().manual_seed(_pass_seed(self.seed, pass_index))
            perm = torch.randperm(self.n, generator=gen)
        else:
            perm = torch.arange(self.n)
        mine = perm[: self.per_rank * self.world_size][self.rank :: self.world_size].tolist()
        if self.lengths is None or not self.shuffle:
            return mine
        return self._length_grouped(mine, gen)

    def _length_grouped(self, order: list[int], gen: torch.Generator) -> list[int]:
        """Length grouping (as in HF's ``group_by_length``): every window of ``window`` batches
        of the shuffled order is sorted by length and cut into batches, then the full batches are
        shuffled (a last partial batch stays last). Batches pad to nearly their own length; their
        make-up still changes from pass to pass because the windows do."""
        size = self.batch_size * self.window
        batches = []
        for start in range(0, len(order), size):
            chunk = sorted(order[start : start + size], key=lambda i: self.lengths[i])
            batches += [chunk[b : b + self.batch_size] for b in range(0, len(chunk), self.batch_size)]
        partial = [batches.pop()] if len(batches[-1]) < self.batch_size else []
        shuffled = [batches[i] for i in torch.randperm(len(batches), generator=gen).tolist()]
        return [i for batch in shuffled + partial for i in batch]

    def seek(self, position: int) -> None:
        """Make the next batch drawn batch number ``position`` (0-based) of the stream."""
        self.position = position

    def __iter__(self) -> Iterator[list[int]]:
        per_pass = len(self)
        if per_pass == 0:
            return
        pass_index, first = divmod(self.position, per_pass)
        order = self.order(pass_index)
        for b in range(first, per_pass):
            self.position = pass_index * per_pass + b + 1
            yield order[b * self.batch_size : (b + 1) * self.batch_size]


def resumable_loader(
    dataset: object,
    *,
    batch_size: int,
    seed: int,
    shuffle: bool = True,
    drop_last: bool = False,
    collate_fn: Callable | None = None,
    rank: int = 0,
    world_size: int = 1,
    pin_memory: bool = False,
    group_by_length: bool = False,
) -> DataLoader:
    """A ``DataLoader`` over a :class:`ResumableBatchSampler` (single process: exact resume);
    ``group_by_length``: batches of rows with similar ``input_ids`` lengths (see the sampler).

    The loader gets its own ``torch.Generator``: a ``DataLoader`` without one draws a seed from the
    *global* generator every time an iterator is made, which would shift the dropout and masking
    of a resumed run (it makes one iterator more than the uninterrupted run).
    """
    sampler = ResumableBatchSampler(len(dataset), batch_size, seed=seed, shuffle=shuffle,
                                    drop_last=drop_last, rank=rank, world_size=world_size,
                                    lengths=input_lengths(dataset) if group_by_length else None)
    return DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_fn, num_workers=0,
                      pin_memory=pin_memory, generator=torch.Generator().manual_seed(seed))
