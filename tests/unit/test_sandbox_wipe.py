"""`wipe` empties a tree a job shaped: no link followed, any depth, mode-000 nests, never raises."""

import os
import stat

from rlvr.verifiers.sandbox import wipe


def _deep(top, levels):
    fd = os.open(top, os.O_RDONLY)
    for _ in range(levels):
        os.mkdir("d", dir_fd=fd)
        child = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.close(fd)


def test_empties_what_a_job_can_build_without_touching_what_links_name(tmp_path):
    job, outside = tmp_path / "job", tmp_path / "outside"
    job.mkdir()
    outside.mkdir()
    (outside / "keep").write_text("x")
    os.chmod(outside, 0o755)
    levels = [job / "nest" / ("x/" * i) for i in range(5)]
    os.makedirs(levels[-1] / "y")
    for d in reversed(levels):
        os.chmod(d, 0)
    os.makedirs(job / "d" / "e")
    for link in ("d/out", "d/e/out", "out"):
        os.symlink(outside, job / link)
    os.symlink("/", job / "d" / "root")
    os.mkfifo(job / "fifo")
    (job / "deep").mkdir()
    _deep(job / "deep", 1300)
    for i in range(50):
        (job / f"w{i}").mkdir()
    assert wipe.empty(str(job)) is True
    assert os.listdir(job) == []
    assert stat.S_IMODE(os.stat(outside).st_mode) == 0o755 and os.listdir(outside) == ["keep"]
    assert wipe.remove(str(job)) is True and not job.exists()


def test_never_raises_and_reports_what_it_could_not_do(tmp_path):
    assert wipe.empty(str(tmp_path / "missing")) is True
    assert wipe.remove(str(tmp_path / "missing")) is True
    (tmp_path / "file").write_text("x")
    assert wipe.empty(str(tmp_path / "file")) is False       # not a directory
    assert wipe.remove(str(tmp_path / "file")) is True
    _deep(tmp_path, 50)
    assert wipe.empty(str(tmp_path), budget_s=0.0) is False  # out of time: not done, no raise
    assert wipe.empty(str(tmp_path)) is True
