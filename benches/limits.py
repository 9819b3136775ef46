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
    lib.spin.argtypes = [ctypes.c_uint64, ctypes.c_int]
    lib.spin.restype = ctypes.c_uint64
    return lib


def read_objects(keys: list[str] | list[bytes]) -> int:
    """Reads every key's bytes through the list; a checksum of them."""
    total = int(library().read_objects(keys))
    if total < 0:
        raise TypeError("read_objects reads lists of exact bytes or ASCII str only")
    return total


def checksum(keys: list[str] | list[bytes]) -> int:
    """What ``read_objects`` answers, computed in Python: the sum of each key's 8-byte
    little-endian words and then its remaining bytes, modulo 2^63."""
    total = 0
    for key in keys:
        data = key.encode() if isinstance(key, str) else key
        whole = len(data) // 8 * 8
        words = (int.from_bytes(data[i : i + 8], "little") for i in range(0, whole, 8))
        total += sum(words) + sum(data[whole:])
    return total & ((1 << 63) - 1)


def read_arrow(keys: pa.Array, threads: int) -> int:
    """Reads an Arrow string or binary array's offsets and bytes on `threads` threads."""
    _, offsets, data = keys.buffers()
    return sum(
        int(library().read_bytes(buf.address, buf.size, threads)) for buf in (offsets, data)
    ) & ((1 << 64) - 1)


def spin(steps: int, threads: int) -> int:
    """``steps`` dependent multiplies split over ``threads`` threads: the cores' own speedup."""
    return int(library().spin(steps, threads))
