/* The limits the batch benchmarks are held against: reading the keys and nothing else.
 *
 * read_objects(list) reads every key's bytes through a Python list, as any batch call over a
 * list must (the list's pointer, the object's header, its bytes), and sums them so that no
 * read can be left out; it hashes nothing and writes nothing. read_bytes(data, len, threads)
 * sums a buffer on `threads` OpenMP threads: the memory's own speed for those bytes; spin
 * is the cores' own speed.
 * benches/limits.py compiles this file with the machine's C compiler and loads it. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <omp.h>
#include <string.h>

static uint64_t sum_bytes(const uint8_t *p, size_t n) {
    uint64_t sum = 0, word;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        memcpy(&word, p + i, 8);
        sum += word;
    }
    for (; i < n; i++) sum += p[i];
    return sum;
}

#define PREFETCH_AHEAD 16

/* -1 where an item is neither an exact bytes nor an ASCII str. */
int64_t read_objects(PyObject *list) {
    if (!PyList_CheckExact(list)) return -1;
    Py_ssize_t len = PyList_GET_SIZE(list);
    PyObject **items = ((PyListObject *)list)->ob_item;
    uint64_t sum = 0;
    for (Py_ssize_t i = 0; i < len; i++) {
        /* The objects lie scattered over the heap: asked for ahead, as keyshared asks. */
        if (i + PREFETCH_AHEAD < len) {
            __builtin_prefetch(items[i + PREFETCH_AHEAD]);
            __builtin_prefetch((const char *)items[i + PREFETCH_AHEAD] + 64);
        }
        PyObject *item = items[i];
        if (PyUnicode_CheckExact(item) && PyUnicode_IS_COMPACT_ASCII(item)) {
            sum += sum_bytes(PyUnicode_DATA(item), PyUnicode_GET_LENGTH(item));
        } else if (PyBytes_CheckExact(item)) {
            sum += sum_bytes((const uint8_t *)PyBytes_AS_STRING(item), PyBytes_GET_SIZE(item));
        } else {
            return -1;
        }
    }
    return (int64_t)(sum & INT64_MAX);
}

uint64_t read_bytes(const uint8_t *data, size_t len, int threads) {
    uint64_t sum = 0;
    size_t words = len / 8;
#pragma omp parallel for num_threads(threads) reduction(+ : sum) schedule(static)
    for (size_t i = 0; i < words; i++) {
        uint64_t word;
        memcpy(&word, data + 8 * i, 8);
        sum += word;
    }
    return sum + sum_bytes(data + 8 * words, len % 8);
}

/* `steps` steps of a dependent chain of multiplies, split over `threads` OpenMP threads:
 * what the machine's cores give work that touches no memory, the limit of any speedup. */
uint64_t spin(uint64_t steps, int threads) {
    uint64_t out = 0;
#pragma omp parallel num_threads(threads) reduction(^ : out)
    {
        int n = omp_get_num_threads(), me = omp_get_thread_num();
        uint64_t x = (uint64_t)me + 1, mine = steps / n + (me < (int)(steps % n));
        for (uint64_t i = 0; i < mine; i++) x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        out ^= x;
    }
    return out;
}
