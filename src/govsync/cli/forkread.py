"""Reading a large set of manifests in two processes: for the command line only.

Forking is a process-wide act (unsafe with live threads), so only the entry
point chooses it, by passing ``forked_reader`` to ``load``; the library reads in the
calling process.  What it wins where a second core is free, and costs where none is:
BENCHMARKS.md, "Reading in two processes".
"""

from __future__ import annotations

import os

from govsync.manifests.loader import FileResult, read_file, read_files
from govsync.manifests.manifest import Context

PARALLEL_BYTES = 1024 * 1024


def forked_reader(files: list[tuple[str, str]], context: Context) -> list[FileResult]:
    """Read and check every file; large sets in two processes (two cores).

    The files are split in two halves by size; a forked child checks the
    second half and sends its results back pickled, while this process
    checks the first.  Anything unexpected falls back to doing it all here.
    """
    sizes = []
    for path, _ in files:
        try:
            sizes.append(os.path.getsize(path))
        except OSError:
            sizes.append(0)
    total = sum(sizes)
    if total < PARALLEL_BYTES or len(files) < 2 or not hasattr(os, "fork") or (os.cpu_count() or 1) < 2:
        return read_files(files, context)
    half, acc = len(files), 0
    for i, size in enumerate(sizes):
        acc += size
        if acc >= total / 2:
            half = min(i + 1, len(files) - 1)
            break

    import pickle  # here: only a large set pays for it (docs/architecture.md's heavy list)

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: check the second half, send it, leave at once
        code = 0
        try:
            os.close(read_fd)
            results = [read_file(p, d, context) for p, d in files[half:]]
            # One pickle per file: unpickling a single one of 50,000 manifests
            # would hold a memo of every object at once (40 MB at 100,000).
            data = b"".join(pickle.dumps(r, protocol=5) for r in results)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    first = [read_file(p, d, context) for p, d in files[:half]]
    second: list[FileResult] = []
    try:
        with os.fdopen(read_fd, "rb") as pipe:
            for _ in files[half:]:
                second.append(pickle.load(pipe))
            if pipe.read(1):
                raise ValueError("the reading process sent more than it read")
    except Exception as exc:
        failure: Exception | None = exc
    else:
        failure = None
    _, status = os.waitpid(pid, 0)
    if failure is None and status != 0:
        failure = ValueError(f"the reading process failed (status {status})")
    if failure is not None:
        import logging  # loaded where something is logged

        logging.getLogger(__name__).warning(
            "reading in two processes failed (%s): reading the rest here", failure)
        second = [read_file(p, d, context) for p, d in files[half:]]
    return first + second
