"""The update's minibatch plan, without a model: active rows, normalisers, orders, rank shares and
micro-batch splits, each checked against numbers worked out by hand."""

import torch

from rlvr.training.plan import minibatches, pass_order, plan_update, rank_share, split_rows
from rlvr.models.batch import Batch


def _batch():
    # 5 rows; prompts 2 columns (row 3 has one pad), completions of lengths 3, 1, 2, 4, 2 in 6
    # columns (the last 2 are padding in every row); advantages with two exact zeros.
    lengths = torch.tensor([3, 1, 2, 4, 2])
    completion_mask = (torch.arange(6)[None] < lengths[:, None]).long()
    prompt_mask = torch.ones(5, 2, dtype=torch.long)
    prompt_mask[3, 0] = 0
    return Batch(torch.ones(5, 2, dtype=torch.long), prompt_mask, torch.ones(5, 6, dtype=torch.long),
                 completion_mask, torch.tensor([1.0, 0.0, -1.0, 0.0, 0.5]), torch.zeros(5, 6))


def test_active_rows_and_token_normaliser_count_the_skipped_rows():
    plan = plan_update(_batch(), counts_tokens=True, trim_completions=True, skip_zero=True)
    assert plan.active.tolist() == [True, False, True, False, True]
    assert plan.rows.tolist() == [0, 2, 4]
    assert plan.norm == 12.0                       # 3 + 1 + 2 + 4 + 2 tokens, skipped rows too
    assert plan.n_minibatches == 1 and plan.single_pass
    assert plan.width == 2 + 3                      # active rows: longest completion is 3


def test_sequence_normaliser_split_over_minibatches_and_ranks():
    plan = plan_update(_batch(), counts_tokens=False, trim_completions=True, minibatch_size=2,
                       world=2, rank=1)
    assert plan.n_minibatches == 3                  # ceil(5 / 2)
    assert plan.norm == 5 / 3 / 2                   # 5 sequences / 3 minibatches / 2 ranks
    assert not plan.single_pass
    assert plan.width == 2 + 4                      # every row active: longest completion is 4


def test_untrimmed_completions_keep_the_padded_length():
    plan = plan_update(_batch(), counts_tokens=True, trim_completions=False)
    assert plan.width == 2 + 6


def test_single_pass_needs_one_pass_and_one_minibatch():
    assert not plan_update(_batch(), counts_tokens=True, trim_completions=True, mu=2).single_pass
    assert plan_update(_batch(), counts_tokens=True, trim_completions=True, minibatch_size=5).single_pass
    assert plan_update(_batch(), counts_tokens=True, trim_completions=True, minibatch_size=8).single_pass


def test_order_draws_only_with_several_minibatches():
    one = plan_update(_batch(), counts_tokens=True, trim_completions=True)
    g = torch.Generator().manual_seed(3)
    assert pass_order(one, g).tolist() == [0, 1, 2, 3, 4]
    assert g.initial_seed() == 3 and torch.equal(g.get_state(), torch.Generator().manual_seed(3).get_state())
    many = plan_update(_batch(), counts_tokens=True, trim_completions=True, minibatch_size=2)
    assert pass_order(many, g).tolist() == torch.randperm(5, generator=torch.Generator().manual_seed(3)).tolist()


def test_minibatches_are_even_splits_of_the_order():
    plan = plan_update(_batch(), counts_tokens=True, trim_completions=True, minibatch_size=2)
    mbs = minibatches(plan, torch.tensor([4, 0, 3, 1, 2]))
    assert [m.rows.tolist() for m in mbs] == [[4, 0], [3, 1], [2]]
    assert all(m.weight == 1.0 and [p.rows for p in m.parts] == [None] for m in mbs)


def test_rank_shares_stride_and_an_empty_share_runs_row_zero_with_weight_zero():
    chunk = torch.tensor([7, 5, 9])
    assert rank_share(chunk, 0, 2)[0].tolist() == [7, 9] and rank_share(chunk, 0, 2)[1] == 1.0
    assert rank_share(chunk, 1, 2)[0].tolist() == [5]
    rows, weight = rank_share(chunk, 3, 4)
    assert rows.tolist() == [7] and weight == 0.0
    assert rank_share(chunk, 0, 1)[0] is chunk


def test_micro_batch_splits_by_padded_tokens():
    assert split_rows(6, 7, 0) == [None] and split_rows(6, 7, 42) == [None]
    assert [p.tolist() for p in split_rows(6, 7, 14)] == [[0, 1], [2, 3], [4, 5]]
    assert [p.tolist() for p in split_rows(3, 7, 20)] == [[0, 1], [2]]
    assert [p.tolist() for p in split_rows(2, 7, 3)] == [[0], [1]]     # one row even over budget


def test_every_rank_runs_as_many_micro_batches_as_the_busiest_rank():
    # 5 active rows of width 6 (2 + 4), budget 6 tokens: one row per micro-batch. One minibatch,
    # 2 ranks: rank 0 gets 3 rows (3 parts), rank 1 gets 2 rows but must run 3 parts as well.
    kw = dict(counts_tokens=True, trim_completions=True, micro_batch_tokens=6, world=2)
    order = torch.arange(5)
    rank0 = minibatches(plan_update(_batch(), rank=0, **kw), order)[0]
    assert rank0.rows.tolist() == [0, 2, 4] and [p.rows.tolist() for p in rank0.parts] == [[0], [1], [2]]
    rank1 = minibatches(plan_update(_batch(), rank=1, **kw), order)[0]
    assert rank1.rows.tolist() == [1, 3]
    assert [(p.rows.tolist(), p.weight) for p in rank1.parts] == [([0], 1.0), ([1], 1.0), ([0], 0.0)]


def test_an_update_with_no_active_rows_is_empty():
    b = _batch()
    b.advantages.zero_()
    assert plan_update(b, counts_tokens=True, trim_completions=True, skip_zero=True).empty
