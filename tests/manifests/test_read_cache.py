"""The agent's reader (ReadCache): a load through it is the load of the files as they
are now, and only a file whose text, name or context changed is checked again."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from govsync.errors import ManifestError
from govsync.files import manifest_files
from govsync.manifests import load
from govsync.manifests.loader import ReadCache, read_files
from govsync.manifests.manifest import Context

SPACE = "apiVersion: govsync/v1\nkind: Space\nmetadata: {{name: {name}}}\nspec: {{description: {d}}}\n"
HOOK = ("apiVersion: govsync/v1\nkind: Hook\nmetadata: {name: h}\n"
        "spec: {description: d, code: c, timeoutMs: {var: timeout}}\n")
PATCH = ("apiVersion: govsync/v1\nkind: Patch\nmetadata: {{name: p}}\n"
         "spec: {{target: Space/a, merge: {{description: {d}}}}}\n")


def folder(tmp_path: Path) -> Path:
    where = tmp_path / "m"
    where.mkdir()
    (where / "a.yaml").write_text(SPACE.format(name="a", d="first"))
    (where / "b.yaml").write_text(SPACE.format(name="b", d="second"))
    (where / "hook.yaml").write_text(HOOK)
    return where


def description(where: Path, address: str, read: ReadCache,
                context: Context | None = None) -> str:
    loaded = load([str(where)], read=read, context=context or Context({"timeout": 10}))
    return str(loaded.objects[address].template["description"])


def test_it_gives_what_reading_every_file_gives(tmp_path: Path) -> None:
    where = folder(tmp_path)
    files, _ = manifest_files([str(where)])
    cache, context = ReadCache(), Context({"timeout": 10})
    assert cache(files, context) == read_files(files, context)
    assert cache(files, context) == read_files(files, context)  # from what it kept
    once = load([str(where)], context=context)
    again = load([str(where)], read=cache, context=context)
    assert (again.digest, sorted(again.objects)) == (once.digest, sorted(once.objects))


def test_an_unchanged_file_is_not_checked_again_and_a_changed_one_is(tmp_path: Path) -> None:
    where = folder(tmp_path)
    files, _ = manifest_files([str(where)])
    cache, context = ReadCache(), Context({"timeout": 10})
    first = cache(files, context)
    # Same length, same second: a change is told by the text, not the size or the time.
    stat = os.stat(where / "b.yaml")
    (where / "b.yaml").write_text(SPACE.format(name="b", d="SECOND"))
    os.utime(where / "b.yaml", ns=(stat.st_atime_ns, stat.st_mtime_ns))
    second = cache(files, context)
    by_name = dict(zip([d for _, d in files], zip(first, second, strict=True), strict=True))
    assert by_name[str(where / "a.yaml")][0] is by_name[str(where / "a.yaml")][1]
    assert by_name[str(where / "b.yaml")][0] is not by_name[str(where / "b.yaml")][1]
    assert description(where, "Space/b", cache) == "SECOND"


def test_a_removed_file_is_gone_and_a_new_one_read(tmp_path: Path) -> None:
    where = folder(tmp_path)
    cache = ReadCache()
    assert description(where, "Space/a", cache) == "first"
    (where / "b.yaml").unlink()
    (where / "c.yaml").write_text(SPACE.format(name="c", d="third"))
    loaded = load([str(where)], read=cache, context=Context({"timeout": 10}))
    assert sorted(loaded.objects) == ["Hook/h", "Space/a", "Space/c"]


def test_other_variables_check_the_files_again(tmp_path: Path) -> None:
    where = folder(tmp_path)
    cache = ReadCache()
    for timeout in (10, 20, 10):
        loaded = load([str(where)], read=cache, context=Context({"timeout": timeout}))
        assert loaded.objects["Hook/h"].template["timeoutMs"] == timeout


def test_a_patch_changes_only_what_it_patches_each_time(tmp_path: Path) -> None:
    """A patched document is made anew from the file: what the cache keeps of the
    target is never the patched one."""
    where = folder(tmp_path)
    cache = ReadCache()
    for text in ("patched", "patched again"):
        (where / "zz-patch.yaml").write_text(PATCH.format(d=text))
        assert description(where, "Space/a", cache) == text
    (where / "zz-patch.yaml").unlink()
    assert description(where, "Space/a", cache) == "first"
    loaded = load([str(where)], read=cache, context=Context({"timeout": 10}))
    assert loaded.objects["Space/a"].patched is None


def test_errors_are_found_every_time_and_a_fixed_file_is_read(tmp_path: Path) -> None:
    where = folder(tmp_path)
    cache = ReadCache()
    assert description(where, "Space/a", cache) == "first"
    (where / "a.yaml").write_text("apiVersion: govsync/v1\nkind: Space\nmetadata: {name: a\n")
    for _ in range(2):
        with pytest.raises(ManifestError, match=r"a\.yaml:\d+:\d+"):
            load([str(where)], read=cache, context=Context({"timeout": 10}))
    (where / "a.yaml").write_text(SPACE.format(name="a", d="fixed"))
    assert description(where, "Space/a", cache) == "fixed"


def test_a_fifo_in_a_files_place_is_refused_not_waited_on(tmp_path: Path) -> None:
    where = folder(tmp_path)
    cache = ReadCache()
    assert description(where, "Space/b", cache) == "second"
    (where / "b.yaml").unlink()
    os.mkfifo(where / "b.yaml")
    done: list[BaseException] = []

    def attempt() -> None:
        try:
            load([str(where)], read=cache, context=Context({"timeout": 10}))
        except ManifestError as exc:
            done.append(exc)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(10)
    assert done and "b.yaml" in str(done[0]), "a FIFO hung the reader or was not refused"
