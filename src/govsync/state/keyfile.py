"""A secret key kept in a file of its own, beside the state: the key vault of a
backend whose state is a file (SQLite's ``<db>.plan-key``).

Only its owner may read it (mode 0600); a key file that others may read is
refused, as ssh refuses such a private key.  A copy of the state (or of its
backup), or ``state export``, does not contain it, so none of them gives
anybody the means to forge a saved plan.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import stat

from govsync.errors import PlanKeyUnavailable, StateError
from govsync.files import PRIVATE_MODE

PLAN_KEY_BYTES = 32


def read_or_make_key(path: str, *, create: bool = True) -> bytes:
    """A secret key kept in its own file (hex, mode 0600), made on first use.

    A key file that others may read is refused (as ssh refuses such a private
    key); one that cannot be read is PlanKeyUnavailable."""
    for _ in range(3):
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
        except FileNotFoundError:
            if not create:
                raise PlanKeyUnavailable(f"there is no plan key {path} yet") from None
            _make_key(path)
            continue
        except PermissionError as exc:
            raise PlanKeyUnavailable(f"cannot read the plan key {path}: {exc.strerror}") from exc
        except OSError as exc:
            raise StateError(f"cannot read the plan key {path}: {exc.strerror}") from exc
        with os.fdopen(fd, "rb") as fh:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                raise StateError(f"the plan key {path} is not a regular file: remove it "
                                 "(saved plans made before must then be made again)")
            if info.st_mode & 0o077:
                raise StateError(
                    f"the plan key {path} may be read by others (mode "
                    f"{stat.S_IMODE(info.st_mode):04o}): whoever reads it can forge saved "
                    f"plans; run `chmod 600 {path}`, or remove it to make a new key")
            text = fh.read(4 * PLAN_KEY_BYTES + 2)
        try:
            key = bytes.fromhex(text.decode("ascii").strip())
        except (UnicodeDecodeError, ValueError):
            key = b""
        if len(key) != PLAN_KEY_BYTES:
            raise StateError(f"the plan key {path} is malformed (not {PLAN_KEY_BYTES} bytes "
                             "in hex): remove it to make a new one (saved plans made before "
                             "must then be made again)")
        return key
    raise StateError(f"cannot make the plan key {path}")


def _make_key(path: str) -> None:
    """Write a new random key to ``path`` unless one appeared meanwhile (atomic)."""
    tmp = f"{path}.tmp-{os.getpid()}-{secrets.token_hex(4)}"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_MODE)
        with os.fdopen(fd, "w", encoding="ascii") as fh:
            fh.write(secrets.token_hex(PLAN_KEY_BYTES) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        with contextlib.suppress(FileExistsError):
            os.link(tmp, path)  # the first process to make one wins
    except PermissionError as exc:
        raise PlanKeyUnavailable(f"cannot make the plan key {path}: {exc.strerror}") from exc
    except OSError as exc:
        raise StateError(f"cannot make the plan key {path}: {exc.strerror}") from exc
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
