"""librdkafka's own partitioners, from the library the ``confluent-kafka`` wheel bundles, called
through ctypes: the exported ``rd_kafka_msg_partitioner_*`` functions that a producer runs for
a message without a partition, on a topic handle of a producer that never connects.

A null key reaches a partitioner as no bytes (NULL, length 0): ``consistent``, ``murmur2``
and ``fnv1a`` hash it, the ``*_random`` ones pick a random partition (a producer sends such a
message to its sticky partition instead, as it does an empty key under
``consistent_random``).
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import confluent_kafka

#: The librdkafka partitioners, by their ``partitioner`` configuration names.
NAMES = (
    "consistent",
    "consistent_random",
    "murmur2",
    "murmur2_random",
    "fnv1a",
    "fnv1a_random",
)
_PRODUCER = 0
VERSION: str = confluent_kafka.libversion()[0]


def _library() -> ctypes.CDLL:
    package = Path(confluent_kafka.__file__).resolve().parent
    found = sorted(package.parent.glob("confluent_kafka.libs/librdkafka*.so*"))
    if not found:
        raise FileNotFoundError(f"no librdkafka beside {package}: is confluent-kafka a wheel?")
    lib = ctypes.CDLL(str(found[0]))
    lib.rd_kafka_conf_new.restype = ctypes.c_void_p
    lib.rd_kafka_conf_set.argtypes = [
        ctypes.c_void_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_char_p,
        ctypes.c_size_t,
    ]
    lib.rd_kafka_new.restype = ctypes.c_void_p
    lib.rd_kafka_new.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_size_t]
    lib.rd_kafka_topic_new.restype = ctypes.c_void_p
    lib.rd_kafka_topic_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    lib.rd_kafka_topic_destroy.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_destroy.argtypes = [ctypes.c_void_p]
    for name in NAMES:
        f = getattr(lib, f"rd_kafka_msg_partitioner_{name}")
        f.restype = ctypes.c_int32
        f.argtypes = [
            ctypes.c_void_p,
            ctypes.c_char_p,
            ctypes.c_size_t,
            ctypes.c_int32,
            ctypes.c_void_p,
            ctypes.c_void_p,
        ]
    return lib


class Librdkafka:
    """A producer that never connects and one topic handle of it. Use as a context manager."""

    def __init__(self) -> None:
        self._lib = _library()
        error = ctypes.create_string_buffer(512)
        conf = self._lib.rd_kafka_conf_new()
        # Quiet: the producer has no brokers and is never used to send.
        self._lib.rd_kafka_conf_set(conf, b"log_level", b"0", error, len(error))
        self._rk = self._lib.rd_kafka_new(_PRODUCER, conf, error, len(error))
        if not self._rk:
            raise RuntimeError(f"rd_kafka_new: {error.value.decode()}")
        self._rkt = self._lib.rd_kafka_topic_new(self._rk, b"partitioned", None)

    def partition(self, name: str, key: bytes | None, num_partitions: int) -> int:
        """``rd_kafka_msg_partitioner_<name>`` of ``key`` (None: a null key)."""
        f = getattr(self._lib, f"rd_kafka_msg_partitioner_{name}")
        size = 0 if key is None else len(key)
        return int(f(self._rkt, key, size, num_partitions, None, None))

    def close(self) -> None:
        self._lib.rd_kafka_topic_destroy(self._rkt)
        self._lib.rd_kafka_destroy(self._rk)

    def __enter__(self) -> Librdkafka:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
