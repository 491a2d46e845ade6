"""The one decode driver and its row bookkeeping, on a scripted backend: lengths count the EOS,
finished rows are padded, rows leave the batch once a quarter of the live rows have finished
(backends that can drop rows), and the stop check runs every `check_every` steps."""

import contextlib

import torch

from rlvr.models.device import Device
from rlvr.rollout.base import SamplingParams
from rlvr.rollout.decode import Samples, drive

EOS, PAD, VOCAB = 4, 0, 5


class Scripted:
    """Greedy logits that make global row r emit token 1 until step r, then EOS."""

    name, device = "scripted", Device.cpu()

    def __init__(self, drops_rows: bool):
        self.drops_rows, self.kept, self.steps = drops_rows, [], 0

    def context(self):
        return contextlib.nullcontext()

    def prefill(self, prompts, n, max_new, pad_id):
        self.rows = torch.arange(len(prompts) * n)
        return self._logits(0), self

    def _logits(self, t: int) -> torch.Tensor:
        out = torch.zeros(len(self.rows), VOCAB)
        out[:, 1] = 1.0
        out[self.rows == t, EOS] = 2.0
        return out

    def keep_rows(self, index: torch.Tensor) -> None:
        self.kept.append(self.rows[index].tolist())
        self.rows = self.rows[index]

    def step(self, tokens: torch.Tensor, t: int) -> torch.Tensor:
        self.steps += 1
        return self._logits(t + 1)


def _drive(backend, max_new: int = 6, check_every: int = 1):
    return drive(backend, [[1], [2]], 2, SamplingParams(greedy=True, max_new_tokens=max_new),
                 torch.Generator(), PAD, {EOS}, check_every)


def test_rows_stop_at_eos_and_finished_rows_leave_the_batch():
    backend = Scripted(drops_rows=True)
    rows = _drive(backend)
    assert [r[0] for r in rows] == [[4], [1, 4], [1, 1, 4], [1, 1, 1, 4]]
    assert [r[2] for r in rows] == ["stop"] * 4
    # row r finishes at step r, each time at least a quarter of the live rows (1 of 4, 1 of 3,
    # 1 of 2), so it leaves at once; row 3 at step 3 ends the batch
    assert backend.kept == [[1, 2, 3], [2, 3], [3]]
    assert backend.steps == 3


def test_rows_stay_without_drops_and_length_ends_unfinished_rows():
    backend = Scripted(drops_rows=False)
    rows = _drive(backend, max_new=3)
    assert [r[0] for r in rows] == [[4], [1, 4], [1, 1, 4], [1, 1, 1]]
    assert [r[2] for r in rows] == ["stop", "stop", "stop", "length"]
    assert backend.kept == [] and backend.steps == 2


def test_the_stop_check_waits_for_check_every_steps():
    backend = Scripted(drops_rows=False)
    rows = _drive(backend, max_new=12, check_every=8)
    assert [r[0] for r in rows] == [[4], [1, 4], [1, 1, 4], [1, 1, 1, 4]]
    assert backend.steps == 7          # every row done at step 3; the first look is after step 7


def test_samples_pad_a_finished_row_and_keep_its_length():
    s = Samples(2, 3, PAD, {EOS})
    live = torch.arange(2)
    nxt, done = s.record(live, torch.tensor([0]), torch.tensor([EOS, 2]), torch.tensor([-0.5, -1.0]))
    assert nxt.tolist() == [EOS, 2] and done.tolist() == [True, False]
    nxt, done = s.record(live, torch.tensor([1]), torch.tensor([3, 3]), torch.tensor([-0.1, -0.2]))
    assert nxt.tolist() == [PAD, 3] and done.tolist() == [True, False]
    rows = s.rows()
    assert [(r[0], r[2]) for r in rows] == [([EOS], "stop"), ([2, 3, PAD], "length")]
    torch.testing.assert_close(torch.tensor(rows[1][1]), torch.tensor([-1.0, -0.2, 0.0]))
    assert rows[0][1] == [-0.5]
