"""Large manifest sets are read in two processes: the child's results come back
pickled, so everything a file's result holds must survive pickling."""

from __future__ import annotations

import logging
import pickle
from pathlib import Path

import pytest

from govsync.cli.forkread import PARALLEL_BYTES, forked_reader
from govsync.files import manifest_files
from govsync.manifests import load
from govsync.manifests.loader import read_file, read_files
from govsync.manifests.manifest import Context

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"


def test_every_example_file_result_survives_pickling() -> None:
    files, _ = manifest_files([str(EXAMPLES)])
    for path, display in files:
        result = read_file(path, display, Context())
        assert pickle.loads(pickle.dumps(result, protocol=5)) == result, display


def _big_set(folder: Path) -> None:
    """Over PARALLEL_BYTES in several files, with references, a patch and a variable."""
    folder.mkdir()
    doc = ("apiVersion: govsync/v1\nkind: Space\nmetadata: {name: s%d}\n"
           "spec: {description: %s}\n---\n"
           "apiVersion: govsync/v1\nkind: Connector\nmetadata: {name: c-%d}\n"
           "spec: {spaceRef: s%d}\n---\n")
    filler = "x" * 200
    size, n, file = 0, 0, 0
    while size < PARALLEL_BYTES * 1.2:
        text = "".join(doc % (i, filler, i, i) for i in range(n, n + 500))
        (folder / f"m{file:03d}.yaml").write_text(text)
        size += len(text)
        n += 500
        file += 1
    (folder / "zz-patch.yaml").write_text(
        "apiVersion: govsync/v1\nkind: Patch\nmetadata: {name: p}\n"
        f"spec: {{target: Space/s{n - 1}, merge: {{description: patched}}}}\n")


def test_the_forked_reader_returns_what_one_process_reads(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    _big_set(tmp_path / "m")
    files, _ = manifest_files([str(tmp_path / "m")])
    with caplog.at_level(logging.WARNING, logger="govsync.manifests.parallel"):
        forked = forked_reader(files, Context())
    assert not caplog.records, "the second process's results were not used"
    assert forked == read_files(files, Context())
    loaded = load([str(tmp_path / "m")], read=forked_reader)
    assert loaded.objects[f"Space/s{len(loaded.objects) // 2 - 1}"].patched
