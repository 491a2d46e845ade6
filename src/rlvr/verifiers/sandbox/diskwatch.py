"""The size bound of a job directory on the host disk (the `landlock` and rlimits tiers, where no
tmpfs bounds it): `over_disk` measures a tree without following links and stops at the first bound
passed; `DiskWatch` decides when the zygote measures. Stdlib only: it runs inside the sandbox (the
zygote). Not guaranteed: the exact cap. Between two measurements a job can write past it by what it
writes in that time (each file is also bounded by `RLIMIT_FSIZE`).
"""

import os
import time

DISK_POLL_S = 0.05   # the shortest wait between two measurements of a job directory on the host disk
DISK_POLL_SHARE = 0.02   # and the longest share of the time spent measuring (a deep tree costs more)
DISK_ENTRIES = 10000  # more entries than this in a job directory is over its bound too


def over_disk(path, cap):
    """Whether the tree at `path` holds more than `cap` bytes of blocks or DISK_ENTRIES entries
    (counted without following links; stops as soon as either bound is passed)."""
    used, entries, todo = 0, 0, [path]
    while todo:
        try:
            with os.scandir(todo.pop()) as it:
                for entry in it:
                    entries += 1
                    st = entry.stat(follow_symlinks=False)
                    used += st.st_blocks * 512
                    if used > cap or entries > DISK_ENTRIES:
                        return True
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
        except OSError:
            continue
    return False


class DiskWatch:
    """The job directory's bound where it is on the host disk (no tmpfs size bounds it): measured
    at most every DISK_POLL_S, and never more than DISK_POLL_SHARE of the time (walking a tree of
    1,300 nested directories every 50 ms took a correct job past its deadline on a busy machine)."""

    def __init__(self, path, cap):
        self.path, self.cap, self.due = path, cap, 0.0

    def over(self, now):
        if now < self.due:
            return False
        over = over_disk(self.path, self.cap)
        cost = time.monotonic() - now
        self.due = now + cost + max(DISK_POLL_S, cost / DISK_POLL_SHARE)
        return over

    def timeout(self, now, remaining):
        return min(remaining, max(0.0, self.due - now))
