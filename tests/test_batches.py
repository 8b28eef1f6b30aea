"""Tests for tutorial_lib.batches: BERT's masking, right padding, evaluation order, and the
resumable data stream (a function of seed and position only; length grouping)."""

import pytest
import torch

from tutorial_lib.batches import ResumableBatchSampler, eval_loader, mask_tokens, pad_collate, pad_ids
from tutorial_lib.models import IGNORE_INDEX

SPECIAL = [0, 1, 2, 3, 4]
MASK_ID = 4


def _padded_tokens(batches: list[list[int]], lengths: list[int]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def test_masking_rate_and_80_10_10_split():
    """Bug guarded: masking specials, wrong rate, or all targets replaced by [MASK]."""
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, 1000, (400, 128), generator=g)
    ids[:, 0] = 2  # a special token in every row: never a target
    inputs, labels = mask_tokens(ids, mask_id=MASK_ID, vocab_size=1000, special_ids=SPECIAL,
                                 probability=0.15, generator=g)
    targets = labels != IGNORE_INDEX
    assert not targets[:, 0].any()
    rate = targets[:, 1:].float().mean().item()
    assert abs(rate - 0.15) < 0.005
    assert torch.equal(labels[targets], ids[targets])
    masked = (inputs[targets] == MASK_ID).float().mean().item()
    kept = (inputs[targets] == ids[targets]).float().mean().item()
    assert abs(masked - 0.8) < 0.01
    # "kept" = the 10% unchanged + random draws that happen to equal the original (≈0.1%)
    assert abs(kept - 0.1) < 0.01
    assert abs(1 - masked - kept - 0.1) < 0.01  # random replacements
    assert torch.equal(inputs[~targets], ids[~targets])


def test_pad_collate_right_pads_with_mask():
    batch = pad_collate(0)([{"input_ids": [5, 6, 2], "labels": 1}, {"input_ids": [7, 2], "labels": 0}])
    assert batch["input_ids"].tolist() == [[5, 6, 2], [7, 2, 0]]
    assert batch["attention_mask"].tolist() == [[1, 1, 1], [1, 1, 0]]
    assert batch["labels"].tolist() == [1, 0]
    regression = pad_collate(0)([{"input_ids": [5], "labels": 0.5}, {"input_ids": [7, 2], "labels": 4.0}])
    assert regression["labels"].dtype == torch.float32 and regression["labels"].tolist() == [0.5, 4.0]
    assert "labels" not in pad_collate(0)([{"input_ids": [5]}])


def test_pad_ids_right_pads_with_the_given_id():
    ids, mask = pad_ids([[5, 6, 7], [8]], pad_id=3)
    assert ids.dtype == mask.dtype == torch.long
    assert ids.tolist() == [[5, 6, 7], [8, 3, 3]]
    assert mask.tolist() == [[1, 1, 1], [1, 0, 0]]


def test_pad_collate_pads_per_token_labels_with_the_ignore_index():
    """Token classification: one label per token, padding never a target."""
    rows = [{"input_ids": [5, 6, 2], "labels": [1, 4, 0]}, {"input_ids": [7, 2], "labels": [3, 2]}]
    batch = pad_collate(0)(rows)
    assert batch["labels"].tolist() == [[1, 4, 0], [3, 2, IGNORE_INDEX]]
    assert batch["labels"].shape == batch["input_ids"].shape


def test_the_data_stream_is_a_function_of_seed_and_position():
    """Batch i of the stream is the same whether the sampler got there by iterating or by seek(i);
    each pass is a permutation; ranks split a pass without overlap."""
    sampler = ResumableBatchSampler(10, 3, seed=5, drop_last=False)
    assert len(sampler) == 4
    stream = [b for _ in range(3) for b in sampler]  # three passes, each a fresh iterator
    assert len(stream) == 12
    for p in range(3):
        assert sorted(i for b in stream[4 * p : 4 * p + 4] for i in b) == list(range(10))
    assert stream[:4] != stream[4:8]  # a new order every pass
    fresh = ResumableBatchSampler(10, 3, seed=5)
    fresh.seek(6)
    assert list(fresh) == stream[6:8] and list(fresh) == stream[8:12]
    other_seed = ResumableBatchSampler(10, 3, seed=6)
    assert list(other_seed) != stream[:4]
    ranks = [list(ResumableBatchSampler(10, 2, seed=5, rank=r, world_size=2, drop_last=True))
             for r in range(2)]
    seen = [i for r in ranks for b in r for i in b]
    assert len(seen) == len(set(seen)) == 8


def test_length_grouped_batches_pad_less_cover_every_index_and_resume_exactly():
    """With lengths, a pass is still a permutation cut into batches (a partial batch last), the
    batches need far less padding than a plain shuffle, change make-up from pass to pass, and
    batch i is still a function of (seed, i)."""
    gen = torch.Generator().manual_seed(0)
    lengths = torch.randint(3, 60, (203,), generator=gen).tolist()
    plain = ResumableBatchSampler(203, 16, seed=1)
    grouped = ResumableBatchSampler(203, 16, seed=1, lengths=lengths, window=4)
    stream = [b for _ in range(2) for b in grouped]
    per_pass = len(grouped)
    for p in range(2):
        one = stream[p * per_pass : (p + 1) * per_pass]
        assert sorted(i for b in one for i in b) == list(range(203))
        assert [len(b) for b in one] == [16] * 12 + [11]
    assert _padded_tokens(stream[:per_pass], lengths) < 0.75 * _padded_tokens(list(plain), lengths)
    assert {tuple(sorted(b)) for b in stream[:per_pass]} != {tuple(sorted(b)) for b in stream[per_pass:]}
    fresh = ResumableBatchSampler(203, 16, seed=1, lengths=lengths, window=4)
    fresh.seek(per_pass + 3)
    assert list(fresh) == stream[per_pass + 3 :]
    with pytest.raises(ValueError, match="lengths"):
        ResumableBatchSampler(10, 2, lengths=[1, 2])


def test_eval_loader_visits_every_row_shortest_first():
    rows = [{"input_ids": list(range(n)), "labels": n % 2} for n in (5, 2, 9, 2, 7, 1)]
    batches = list(eval_loader(rows, 4, pad_collate(0)))
    assert [b["input_ids"].shape for b in batches] == [(4, 5), (2, 9)]
    assert sorted(torch.cat([b["labels"] for b in batches]).tolist()) == sorted(r["labels"] for r in rows)


def test_notebook_01s_self_check_reports_the_stub_passes_the_solution_and_fails_wrong_masking():
    """Notebook 01's self-check, run as the learner would: the stub is reported, the solution passes
    against ``mask_tokens`` on the same seeded draws, and three plausible mistakes fail: 10/80/10
    instead of 80/10/10, labels kept at every position, special tokens masked too."""
    from notebook_selfcheck import LearnerRun

    ns = {"torch": torch, "mask_tokens": mask_tokens, "IGNORE_INDEX": IGNORE_INDEX}
    run = LearnerRun("01_pretraining", ns, "my_mask_tokens", "random_batch", mask_tokens, wrap="seeded")
    mine = run.mine

    def swapped(input_ids, *, mask_id, vocab_size, special_ids, probability, generator):  # 10/80/10
        special = torch.isin(input_ids, torch.tensor(special_ids))
        targets = torch.bernoulli(torch.full(input_ids.shape, probability).masked_fill(special, 0.0),
                                  generator=generator).bool()
        u = torch.rand(input_ids.shape, generator=generator)
        random_ids = torch.randint(vocab_size, input_ids.shape, generator=generator)
        inputs = torch.where(targets & (u < 0.1), mask_id, input_ids)
        inputs = torch.where(targets & (u >= 0.1) & (u < 0.9), random_ids, inputs)
        return inputs, torch.where(targets, input_ids, IGNORE_INDEX)

    def labels_everywhere(input_ids, **kw):
        return mine(input_ids, **kw)[0], input_ids.clone()

    def specials_too(input_ids, *, special_ids, **kw):
        return mine(input_ids, special_ids=[], **kw)

    run.fails((swapped, labels_everywhere, specials_too))
