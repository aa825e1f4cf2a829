"""A full disk under the store: one error that names the store's folder and says the disk is full."""

from __future__ import annotations

import contextlib
import errno
from collections.abc import Iterator
from pathlib import Path

# The operating system's own words for ENOSPC and EDQUOT, as DuckDB and Arrow pass them on
# inside their messages (DuckDB's "CHECKPOINT during DETACH failed" says why on its second
# line only): the errno is lost there, the text is not.
_FULL = (errno.ENOSPC, errno.EDQUOT)
_FULL_WORDS = ("No space left on device", "Disk quota exceeded")


class StoreFull(OSError):
    """A write to the store failed because the device holding it is full."""


def disk_full(error: BaseException) -> bool:
    """Whether `error` (an OSError, or DuckDB's or Arrow's error quoting one) says the device
    it wrote to is full."""
    if isinstance(error, OSError) and error.errno in _FULL:
        return True
    return any(words in str(error) for words in _FULL_WORDS)


@contextlib.contextmanager
def writing_below(folder: Path) -> Iterator[None]:
    """Writes to the store under `folder`: one that fails for a full disk becomes `StoreFull`,
    which names the folder and what to do (the cause keeps the original, for the log)."""
    try:
        yield
    except StoreFull:
        raise
    except Exception as error:
        if not disk_full(error):
            raise
        raise StoreFull(
            errno.ENOSPC,
            f"no space left on the device holding {folder}: the disk is full; nothing "
            "stored was changed, free some space and run the command again",
        ) from error
