"""bench/plan/two_processes.py: what reading a manifest set in two processes wins.

The command line reads a set larger than 1 MiB in two processes (cli/reading.py): a
forked child checks the second half by size and sends its results back pickled.
Whole processes timed side by side say what it wins on the machine as it is, busy
or not; this says what it wins where a second core is free, from CPU times taken
one after another in one process (contention inflates each alike): the reading of
the whole set, of each half, the child's pickling and the parent's unpickling.  On
two free cores the reading takes the longer of the parent's half and the child's
(with its pickling), then the unpickling.

    python bench/plan/two_processes.py [--objects 10000] [--runs 3]
"""

from __future__ import annotations

import argparse
import io
import os
import pickle
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from common import compile_package  # noqa: E402
from generate import write  # noqa: E402

from govsync.files import manifest_files  # noqa: E402
from govsync.manifests.loader import read_file  # noqa: E402
from govsync.manifests.manifest import Context  # noqa: E402


def cpu(work: Callable[[], Any]) -> tuple[float, Any]:
    began = time.process_time()
    found = work()
    return time.process_time() - began, found


def halves(files: list[tuple[str, str]]) -> int:
    """Where cli/reading.py splits ``files``: half of their bytes before it."""
    sizes = [os.path.getsize(path) for path, _ in files]
    total, seen = sum(sizes), 0
    for i, size in enumerate(sizes):
        seen += size
        if seen >= total / 2:
            return min(i + 1, len(files) - 1)
    return len(files)


def once(files: list[tuple[str, str]], half: int, context: Context
         ) -> tuple[float, float, float, float, float, float]:
    """(the whole reading, each half, pickling, unpickling, two free cores), CPU seconds."""
    whole, _ = cpu(lambda: [read_file(p, d, context) for p, d in files])
    first, _ = cpu(lambda: [read_file(p, d, context) for p, d in files[:half]])
    second, results = cpu(lambda: [read_file(p, d, context) for p, d in files[half:]])
    dumped, data = cpu(lambda: b"".join(pickle.dumps(r, protocol=5) for r in results))

    def load() -> list[Any]:
        stream = io.BytesIO(data)
        return [pickle.load(stream) for _ in results]

    loaded, _ = cpu(load)
    return whole, first, second, dumped, loaded, max(first, second + dumped) + loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--objects", type=int, default=10000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    compile_package()
    with tempfile.TemporaryDirectory() as tmp:
        folder = os.path.join(tmp, "manifests")
        write(args.objects, folder)
        files, _ = manifest_files([folder])
        half = halves(files)
        context = Context()
        rows = [once(files, half, context) for _ in range(args.runs)]
    whole, first, second, dumped, loaded, forked = (statistics.median(r[i] for r in rows)
                                                    for i in range(6))
    print(f"# bench/plan/two_processes: {args.objects:,} objects, {len(files)} files, "
          f"medians of {args.runs}; load average {os.getloadavg()[0]:.1f}")
    print(f"read in one process: {whole:.3f} s of CPU")
    print(f"the halves: {first:.3f} s and {second:.3f} s, pickled {dumped:.3f} s, "
          f"unpickled {loaded:.3f} s")
    print(f"read on two free cores: {forked:.3f} s: {forked / whole:.2f}x")


if __name__ == "__main__":
    main()
