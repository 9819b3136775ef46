"""The limits of reading keys (benches/limits.c), compiled with the machine's C compiler on
first use and loaded with ctypes: what a batch call could at best do with the same keys."""

from __future__ import annotations

import ctypes
import functools
import subprocess
import sysconfig
from pathlib import Path

import pyarrow as pa

SOURCE = Path(__file__).with_name("limits.c")
BUILD = Path(__file__).resolve().parents[1] / "out" / "limits"


@functools.cache
def library() -> ctypes.PyDLL:
    """The compiled limits; PyDLL keeps the GIL for the calls, as reading objects needs."""
    BUILD.mkdir(parents=True, exist_ok=True)
    built = BUILD / "limits.so"
    if not built.exists() or built.stat().st_mtime < SOURCE.stat().st_mtime:
        include = sysconfig.get_paths()["include"]
        command = ["cc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC"]
        subprocess.run([*command, f"-I{include}", str(SOURCE), "-o", str(built)], check=True)
    lib = ctypes.PyDLL(str(built))
    lib.read_objects.argtypes = [ctypes.py_object]
    lib.read_objects.restype = ctypes.c_int64
    lib.read_bytes.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    lib.read_bytes.restype = ctypes.c_uint64
    return lib


def read_objects(keys: list[str] | list[bytes]) -> int:
    """Reads every key's bytes through the list; a checksum of them."""
    total = int(library().read_objects(keys))
    if total < 0:
        raise TypeError("read_objects reads lists of exact bytes or ASCII str only")
    return total


def read_arrow(keys: pa.Array, threads: int) -> int:
    """Reads an Arrow string or binary array's offsets and bytes on `threads` threads."""
    _, offsets, data = keys.buffers()
    return sum(
        int(library().read_bytes(buf.address, buf.size, threads)) for buf in (offsets, data)
    ) & ((1 << 64) - 1)
