"""The file side of :mod:`structlp.persistence`: atomic writing and bounded reading.

:func:`atomic_write` writes a file beside its target, flushes and fsyncs it, then
renames it over the target: a crash, a kill or a full disk at any moment leaves
either the old file or the new one, never a truncated one.

:func:`open_archive` and :func:`read_npy` read a structlp file with every size known
before it is allocated: only regular files, the zip's member count and sizes read
from its directory (end record first), duplicate members refused, each ``.npy``
header checked against the metadata and the member's size before the array exists.
"""

from __future__ import annotations

import errno
import hashlib
import os
import stat
import struct
import tempfile
import zipfile
from typing import Any, Callable, Dict, Optional

import numpy as np
import numpy.lib.format as npformat

from ..exceptions import PersistenceError

#: Default bound on the total uncompressed size of a file's members (bytes).
MAX_BYTES = 1 << 30
#: Below this total, any compression ratio is accepted.
RATIO_FREE_BYTES = 64 << 20
#: Above RATIO_FREE_BYTES, refuse members that expand more than this over the file size.
MAX_RATIO = 100
#: Bound on the number of zip members (arrays + 2).
MAX_MEMBERS = 200_000
#: Bound on the metadata member (bytes).
MAX_META_BYTES = 64 << 20
#: dtype kinds a structlp file may hold: booleans, integers, reals, strings.
ARRAY_KINDS = "biufUS"
_CHUNK = 1 << 20


# ---------------------------------------------------------------- writing
def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: str, write: Callable[[Any], None]) -> None:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, fsync it and rename it
    onto ``path``.  On any error (or interrupt) the temporary file is removed and an
    existing ``path`` is left untouched; an ``OSError`` becomes a PersistenceError."""
    target = os.path.abspath(path)
    folder = os.path.dirname(target)
    try:
        st = os.stat(target)
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        st, mode = None, 0o666 & ~_umask()
    except OSError as exc:
        raise PersistenceError(f"Cannot save to {path!r}: {exc}.") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise PersistenceError(f"Cannot save to {path!r}: it is a directory.")
    tmp = None
    try:
        if st is not None and not stat.S_ISREG(st.st_mode):
            # a device or a pipe (/dev/stdout, /dev/null): written in place, never replaced
            with open(target, "wb") as f:
                write(f)
                f.flush()
            return
        fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(target) + ".",
                                   suffix=".tmp", dir=folder)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
        tmp = None
        _fsync_dir(folder)
    except OSError as exc:
        reason = ("the disk is full" if exc.errno in (errno.ENOSPC, errno.EDQUOT)
                  else f"{type(exc).__name__}: {exc}")
        raise PersistenceError(
            f"Cannot save to {path!r} ({reason}); the previous file, if any, is unchanged.") \
            from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass


def _fsync_dir(folder):
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


# ---------------------------------------------------------------- reading
def open_regular(path) -> Any:
    """Open ``path`` for reading only if it is a regular file (a symlink to one is fine);
    never blocks on a FIFO and never opens a device
    (:func:`structlp.datasets.files.open_regular`, its errors as PersistenceError)."""
    from ..datasets.files import open_regular as open_regular_file
    from ..exceptions import InvalidInputError
    try:
        return open_regular_file(path, "structlp file")
    except InvalidInputError as exc:
        raise PersistenceError(f"Refusing {path!r}: {exc} A structlp file is a regular file "
                               "written by structlp.save.") from None


def _size(f):
    here = f.tell()
    end = f.seek(0, os.SEEK_END)
    f.seek(here)
    return end


def _directory_bounds(f, size, path):
    """Entry count and central-directory size from the zip's end record, read before
    :mod:`zipfile` builds its member list."""
    tail_len = min(size, (1 << 16) + 22)
    f.seek(size - tail_len)
    tail = f.read(tail_len)
    f.seek(0)
    at = tail.rfind(b"PK\x05\x06")
    if at < 0 or len(tail) - at < 22:
        raise PersistenceError(f"Cannot read {path!r} as a structlp file: it is not a zip "
                               "archive written by structlp.save (no end record).")
    entries, cd_size = struct.unpack("<HI", tail[at + 10:at + 16])
    if entries == 0xFFFF or cd_size == 0xFFFFFFFF:      # zip64: the real counts are earlier
        loc = tail[at - 20:at] if at >= 20 else b""
        if len(loc) != 20 or loc[:4] != b"PK\x06\x07":
            raise PersistenceError(f"Refusing {path!r}: malformed zip64 end record.")
        (offset,) = struct.unpack("<Q", loc[8:16])
        if offset + 56 > size:
            raise PersistenceError(f"Refusing {path!r}: malformed zip64 end record.")
        f.seek(offset)
        rec = f.read(56)
        f.seek(0)
        if rec[:4] != b"PK\x06\x06":
            raise PersistenceError(f"Refusing {path!r}: malformed zip64 end record.")
        entries, cd_size = struct.unpack("<QQ", rec[32:48])
    return entries, cd_size


def open_archive(f, path, max_bytes: Optional[int]):
    """A :class:`zipfile.ZipFile` over ``f`` whose members are checked: count, names
    unique, each and all uncompressed sizes within the bounds (see :func:`limit`)."""
    size = _size(f)
    entries, cd_size = _directory_bounds(f, size, path)
    if entries > MAX_MEMBERS or cd_size > MAX_MEMBERS * 1024:
        raise PersistenceError(
            f"Refusing {path!r}: it has {entries} members ({cd_size} bytes of directory); "
            f"a structlp file has at most {MAX_MEMBERS}.")
    try:
        z = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, EOFError, OSError,
            NotImplementedError, struct.error) as exc:
        raise PersistenceError(f"Cannot read {path!r} as a structlp file (a zip archive "
                               f"written by structlp.save): {exc}.") from None
    infos = z.infolist()
    names = [i.filename for i in infos]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})[:5]
        z.close()
        raise PersistenceError(
            f"Refusing {path!r}: it has duplicate members {dup} (structlp.save writes each "
            "member once; a reader would see only one of them).")
    total = sum(i.file_size for i in infos)
    bound = limit(size, max_bytes)
    if total > bound or (max_bytes is None and total > RATIO_FREE_BYTES
                         and total > MAX_RATIO * size):
        z.close()
        raise PersistenceError(
            f"Refusing {path!r}: its members expand to {total} bytes from a file of {size} "
            f"bytes, more than load allows by default ({bound} bytes, and at most "
            f"{MAX_RATIO} times the file size above {RATIO_FREE_BYTES} bytes). If you trust "
            f"the file, pass load(path, max_bytes={total}).")
    return z


def limit(size: int, max_bytes: Optional[int]) -> int:
    """The bound on the total uncompressed size: ``max_bytes``, or :data:`MAX_BYTES`."""
    return MAX_BYTES if max_bytes is None else int(max_bytes)


class _Hashing:
    def __init__(self, f):
        self.f, self.sha = f, hashlib.sha256()

    def read(self, n=-1):
        b = self.f.read(n)
        self.sha.update(b)
        return b

    def readinto(self, view):
        n = self.f.readinto(view)
        self.sha.update(view[:n])
        return n


def read_member(z, name, path, bound):
    """The bytes of a small member (the metadata), at most ``bound`` of them."""
    info = z.getinfo(name)
    if info.file_size > bound:
        raise PersistenceError(f"Refusing {path!r}: its member {name!r} is {info.file_size} "
                               f"bytes, more than the {bound} allowed.")
    with z.open(info) as m:
        data = m.read(bound + 1)
    return data


def read_npy(z, name, info: Dict[str, Any], path) -> np.ndarray:
    """The array in member ``name``, its header checked against the metadata ``info``
    (dtype, shape, sha256) and the member's size before the array is allocated."""
    member = z.getinfo(name)
    with z.open(member) as raw:
        m = _Hashing(raw)
        try:
            major, minor = npformat.read_magic(m)
            if (major, minor) == (1, 0):
                shape, fortran, dtype = npformat.read_array_header_1_0(m)
            elif (major, minor) in ((2, 0), (3, 0)):
                shape, fortran, dtype = npformat.read_array_header_2_0(m)
            else:
                raise ValueError(f"npy version {major}.{minor}")
        except (ValueError, TypeError, SyntaxError, struct.error, OverflowError) as exc:
            raise PersistenceError(f"Refusing {path!r}: {name!r} is not a plain .npy array "
                                   f"({exc}).") from None
        if dtype.hasobject or dtype.fields is not None or dtype.kind not in ARRAY_KINDS \
                or dtype.subdtype is not None:
            raise PersistenceError(
                f"Refusing {path!r}: {name!r} is not a plain numpy array (dtype {dtype}); "
                "a structlp file holds "
                "booleans, integers, real numbers and strings only (no objects, no complex "
                "numbers, no records).")
        if dtype.str != info.get("dtype") or list(shape) != info.get("shape"):
            raise PersistenceError(
                f"Refusing {path!r}: {name!r} holds an array of dtype {dtype.str} and shape "
                f"{list(shape)} but the metadata declares {info.get('dtype')!r} and "
                f"{info.get('shape')!r} (the file was modified).")
        count = 1
        for s in shape:
            count *= int(s)
        nbytes = count * dtype.itemsize
        if nbytes != member.file_size - raw.tell() or nbytes > member.file_size:
            raise PersistenceError(
                f"Refusing {path!r}: {name!r} declares {count} elements of {dtype.itemsize} "
                f"bytes but the member holds {member.file_size} bytes (the file was modified "
                "or truncated).")
        a = np.empty(count, dtype=dtype)
        view = a.view(np.uint8).reshape(-1).data if nbytes else memoryview(b"")
        got = 0
        try:
            while got < nbytes:
                n = m.readinto(view[got:got + _CHUNK])
                if not n:
                    break
                got += n
        except (zipfile.BadZipFile, EOFError, OSError, ValueError) as exc:
            raise PersistenceError(f"Refusing {path!r}: its member {name!r} cannot be read; "
                                   f"the file is corrupted or truncated ({exc}).") from None
        if got != nbytes:
            raise PersistenceError(f"Refusing {path!r}: {name!r} is truncated.")
    if m.sha.hexdigest() != info.get("sha256"):
        raise PersistenceError(
            f"Refusing {path!r}: the checksum of {name!r} does not match (the file was "
            "modified or corrupted).")
    if fortran:
        return a.reshape(tuple(shape)[::-1]).transpose()
    return a.reshape(tuple(shape))
