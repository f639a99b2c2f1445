"""Safe reading of the data files of the loaders: regular files only, names confined to
their folder, malformed content reported with the file and the line.

Every loader of :mod:`structlp.datasets` (and :func:`structlp.agm.data.load_ck_emotion`)
opens its files through :func:`open_regular`, which refuses a FIFO, a device, a socket or
a directory with a clear error instead of blocking on it or reading it; names that come
from a caller or from a listing inside the data are checked by :func:`confined_path`, so
that ``"../../keep.txt"`` can neither be read nor removed.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import IO, Any, Iterator, Optional, Tuple, Union

from ..exceptions import DataNotFoundError, InvalidInputError

PathLike = Union[str, "os.PathLike[str]"]

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def is_regular_file(path: PathLike) -> bool:
    """Whether ``path`` exists and is a regular file (symbolic links followed), without
    opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def open_regular(path: PathLike, what: str = "data file", text: bool = False,
                 encoding: str = "utf-8") -> IO:
    """Open ``path`` for reading, refusing anything but a regular file.

    The path is checked with ``stat`` before it is opened (a device is never opened), then
    opened without blocking (``O_NONBLOCK``: a FIFO put in its place cannot hang the open)
    and checked again with ``fstat`` on the open descriptor (no race between the check and
    the read); a regular file is then read normally.  Also used by
    :func:`structlp.load` for model files.

    Parameters
    ----------
    path : str or os.PathLike
    what : str
        What the file is, for the messages ("CK+ file", "sdist", ...).
    text : bool
        Text mode (``encoding``, errors raise :class:`UnicodeDecodeError` on reading:
        use :func:`read_lines` to have them reported with the line).

    Raises
    ------
    DataNotFoundError
        When ``path`` does not exist.
    InvalidInputError
        When it is a directory, a FIFO, a device or a socket, or cannot be opened.
    """
    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    try:
        mode = os.stat(path).st_mode          # a device is refused before it is opened
        if not stat.S_ISREG(mode):
            raise InvalidInputError(f"The {what} {str(path)!r} is {_kind(mode)}, not a "
                                    "regular file; give the path of a regular file.")
        fd = os.open(os.fspath(path), flags)
    except FileNotFoundError:
        raise DataNotFoundError(f"The {what} {str(path)!r} does not exist.") from None
    except OSError as exc:
        raise InvalidInputError(f"The {what} {str(path)!r} cannot be opened: "
                                f"{exc.strerror or exc}.") from None
    try:
        mode = os.fstat(fd).st_mode           # replaced between the stat and the open?
        if not stat.S_ISREG(mode):
            raise InvalidInputError(f"The {what} {str(path)!r} is {_kind(mode)}, not a "
                                    "regular file; give the path of a regular file.")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        raw = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return io.TextIOWrapper(raw, encoding=encoding) if text else raw


def read_bytes(path: PathLike, what: str = "data file", limit: Optional[int] = None) -> bytes:
    """The bytes of a regular file (:func:`open_regular`), at most ``limit`` of them (an
    :class:`InvalidInputError` when the file is longer)."""
    with open_regular(path, what) as fh:
        data = fh.read() if limit is None else fh.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise InvalidInputError(f"The {what} {str(path)!r} is larger than {limit} bytes.")
    return data


def read_lines(path: PathLike, what: str = "data file", encoding: str = "utf-8",
               fh: Any = None) -> Iterator[Tuple[int, str]]:
    """``(line number, line)`` of a text file (1-based), decoding each line separately so
    that bad bytes are an :class:`InvalidInputError` naming the file and the line.

    ``fh`` is an open binary file to read instead of opening ``path`` (e.g. a gzip stream);
    ``path`` then only names it.
    """
    own = fh is None
    handle: Any = open_regular(path, what) if own else fh
    try:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode(encoding)
            except UnicodeDecodeError as exc:
                raise InvalidInputError(
                    f"{path}, line {number}: not valid {encoding} text (byte "
                    f"{raw[exc.start:exc.start + 1]!r} at column {exc.start + 1}).") from None
    finally:
        if own:
            handle.close()


def malformed(path: PathLike, line: int, message: str) -> InvalidInputError:
    """The error of a malformed line: ``"PATH, line N: MESSAGE"``."""
    return InvalidInputError(f"{path}, line {line}: {message}")


def confined_path(folder: PathLike, name: str, argument: str = "name",
                  owner: str = "loader") -> Path:
    """``folder / name`` for a plain file name, checked to stay inside ``folder``.

    ``name`` must be one path component: no separator, not ``.`` or ``..``, not absolute,
    no NUL byte; the resolved path (symbolic links followed) must lie inside the resolved
    folder.

    Raises
    ------
    InvalidInputError
        Naming ``argument`` of ``owner`` and the offending name.
    """
    if not isinstance(name, str):
        raise InvalidInputError(f"The {argument!r} of {owner} must be a file name (str); got "
                                f"{type(name).__name__}.")
    seps = {os.sep, "/", "\\"} | ({os.altsep} if os.altsep else set())
    if (not name or name in (".", "..") or any(s in name for s in seps) or "\0" in name
            or os.path.isabs(name)):
        raise InvalidInputError(
            f"The {argument!r} of {owner} must be a plain file name inside its folder (no "
            f"path separator, '..' or absolute path); got {name!r}.")
    base = Path(folder).resolve()
    target = (base / name).resolve()
    if target.parent != base:
        raise InvalidInputError(
            f"The {argument!r} of {owner}, {name!r}, leads outside its folder {base} (a "
            "symbolic link?); refused.")
    return base / name
