"""Reading a large set of manifests in two processes: for the command line only.

Forking is a process-wide act (unsafe with live threads), so only the entry
point chooses it, by passing ``forked_reader`` to ``load``; the library
reads in the calling process.
"""

from __future__ import annotations

import os

from govsync.manifests.loader import FileResult, read_file, read_files
from govsync.manifests.model import Context

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

    import pickle

    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: check the second half, send it, leave at once
        code = 0
        try:
            os.close(read_fd)
            data = pickle.dumps([read_file(p, d, context) for p, d in files[half:]], protocol=5)
            with os.fdopen(write_fd, "wb") as out:
                out.write(data)
        except BaseException:
            code = 1
        os._exit(code)
    os.close(write_fd)
    first = [read_file(p, d, context) for p, d in files[:half]]
    with os.fdopen(read_fd, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    try:
        if status != 0:
            raise ValueError(f"the reading process failed (status {status})")
        second: list[FileResult] = pickle.loads(data)
    except Exception as exc:
        import logging

        logging.getLogger(__name__).warning(
            "reading in two processes failed (%s): reading the rest here", exc)
        second = [read_file(p, d, context) for p, d in files[half:]]
    return first + second


