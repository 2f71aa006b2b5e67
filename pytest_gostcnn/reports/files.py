"""Writing a file so that it is never half-written: the report and its picture."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _mode(path: Path) -> int:
    """The permissions for a file at ``path``: those of the file there, else 0666 less
    the umask (which can only be read by setting it: set back at once; the commands and
    pytest run this on their main thread)."""
    if path.is_file():
        return path.stat().st_mode & 0o777
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


def write_atomically(path: str | Path, text: str, prefix: str) -> None:
    """Write ``text`` to ``path``: a temporary file named ``prefix...`` in the same folder,
    flushed to disk, then renamed over it; OSError as the system gives it."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=prefix, dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as file:
            # mkstemp makes the file private (0600): the file keeps the permissions of the
            # one it replaces, or gets a new file's usual ones.
            os.fchmod(file.fileno(), _mode(path))
            file.write(text)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
