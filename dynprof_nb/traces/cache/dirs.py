"""The one hardened-directory routine: a directory that holds what is read back later (frame
cache entries, out-of-core partitions) must be a real directory of ours that only we can
write, or someone could swap what is read (a symlink planted in ``/tmp``, a directory of theirs).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


def private_dir(d: Path, create: bool = True) -> str | None:
    """None when ``d`` is a private directory of ours (created 0700 first with ``create``; one
    of ours that others may read is set back to 0700), else why not, in words. Raises
    ``FileNotFoundError`` when it does not exist and ``create`` is False."""
    try:
        if create and not os.path.lexists(d):
            d.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.mkdir(d, 0o700)
            except FileExistsError:  # another process made it meanwhile: checked below
                pass
        st = os.lstat(d)
    except FileNotFoundError:
        raise
    except OSError as exc:
        return f"it cannot be created or read ({exc.strerror})"
    if stat.S_ISLNK(st.st_mode):
        return "it is a symlink (someone may be pointing it at their own files)"
    if not stat.S_ISDIR(st.st_mode):
        return "it is not a directory"
    if st.st_uid != os.geteuid():
        return f"it belongs to uid {st.st_uid}, not to you"
    if st.st_mode & 0o077:
        try:
            os.chmod(d, 0o700)
        except OSError as exc:
            return f"others can read it and it cannot be made private ({exc})"
    return None
