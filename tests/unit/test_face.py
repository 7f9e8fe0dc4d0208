"""The package's face (``govsync/__init__.py``): the commands' functions and the
library's main types, each loaded when first asked for."""

from __future__ import annotations

import subprocess
import sys

import govsync
from govsync.commands import saving, sources, state_commands


def test_every_name_of_the_face_is_there_and_sorted() -> None:
    assert govsync.__all__ == sorted(govsync.__all__)
    assert set(govsync.__all__) == set(govsync.LAZY)
    for name in govsync.__all__:
        assert getattr(govsync, name) is not None, name
    assert set(govsync.__all__) <= set(dir(govsync))


def test_the_commands_are_the_commands_own() -> None:
    assert govsync.write_plan is saving.write_plan
    assert govsync.state_export is state_commands.state_export
    assert govsync.Manifests is sources.Manifests


def test_no_name_of_the_face_is_a_module_of_the_package() -> None:
    """Importing ``govsync.plan`` sets the package's attribute ``plan`` to that module,
    whatever the face says: a name of both would change with what was imported."""
    import pkgutil

    modules = {info.name for info in pkgutil.iter_modules(govsync.__path__)}
    assert {"plan", "apply", "drift"} <= modules
    assert not modules & set(govsync.__all__)


def test_import_govsync_loads_nothing_else() -> None:
    probe = "import sys, govsync; print(sorted(m for m in sys.modules if 'govsync' in m))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "['govsync']"
