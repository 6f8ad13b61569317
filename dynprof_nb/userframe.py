"""Where a warning should point: the user's own line, not ours.

A warning that ``job.start`` or ``%dynprof start`` raises is about what the user asked, so its
``file:line`` is the notebook cell (or the script) that asked. A fixed ``stacklevel`` counts
frames from where the warning is made, which is right for one caller and wrong for the next:
through the magics it named ``dynprof_nb/ui/magics.py:334``, a line nobody wrote. pandas walks
the stack the same way (``pandas.util._exceptions.find_stack_level``).
"""

from __future__ import annotations

import inspect
import os
import sys

#: frames in these packages are never the user's: ours, and IPython's magic machinery between
#: a ``%dynprof`` line and our code
_OURS = os.path.dirname(os.path.abspath(__file__)) + os.sep
_SKIPPED = (_OURS,)


def _skipped_dirs() -> tuple[str, ...]:
    ipython = sys.modules.get("IPython")
    where = getattr(ipython, "__file__", None)
    if where:
        return (*_SKIPPED, os.path.dirname(os.path.abspath(where)) + os.sep)
    return _SKIPPED


def user_stacklevel() -> int:
    """The ``stacklevel`` for a ``warnings.warn`` made by the caller of this function that
    names the first frame outside dynprof_nb and IPython (the frame itself when all are ours,
    as in a thread of our own)."""
    skipped = _skipped_dirs()
    here = inspect.currentframe()
    frame = here.f_back if here is not None else None  # the function that calls warnings.warn
    level = 1
    while frame is not None:
        if not os.path.abspath(frame.f_code.co_filename).startswith(skipped):
            return level
        frame = frame.f_back
        level += 1
    return 1
