/* The I/O digest of a block, summed while the C parser scans it (without the GIL, in the parse
 * threads), so the thread that aggregates does not pass over every row for the global tables.
 *
 * entries: one per distinct (phase, name, cat, layer, file, host, size) of the rows, with
 *          (rows, calls, dur_us) sums that wrap at 64 bits as numpy's int64 sums do;
 * threads: the distinct (host, pid, tid) of the rows;
 * span:    the first start and the last end (ts + dur, wrapping) of the rows.
 * events/digest.py builds the same digest from columns (the reference, used for the rows the
 * Python parser reads); a test requires the two to agree.
 */
#ifndef SCRTUNE_IODIGEST_H
#define SCRTUNE_IODIGEST_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define DIGEST_KEYS 7
#define DIGEST_SUMS 3
#define DIGEST_WIDTH (DIGEST_KEYS + DIGEST_SUMS)
#define THREAD_KEYS 3 /* host, pid, tid: the threads table has keys only */

/* open addressing over int64 tuples of a fixed width; the first `keys` values are the key */
typedef struct {
    int64_t *slots; /* cap x width */
    unsigned char *used;
    Py_ssize_t cap, count, width, keys;
    Py_ssize_t last; /* the slot hit last: consecutive rows mostly repeat a key */
} tuple_table;

static int tuple_table_init(tuple_table *t, Py_ssize_t width, Py_ssize_t keys) {
    t->cap = 64; t->count = 0; t->width = width; t->keys = keys; t->last = -1;
    t->slots = calloc((size_t)(t->cap * width), sizeof(int64_t));
    t->used = calloc((size_t)t->cap, 1);
    return t->slots && t->used ? 0 : -1;
}

static void tuple_table_free(tuple_table *t) { free(t->slots); free(t->used); }

/* `keys` and `width` are passed as constants by digest_add, and the helpers are inlined there:
 * the compiler unrolls the loops over a key's seven values (the table's own fields say the
 * same for the code that grows and reads it). */
#define DIGEST_INLINE static inline __attribute__((always_inline))

DIGEST_INLINE uint64_t tuple_hash(const int64_t *key, Py_ssize_t keys) {
    uint64_t h = 0x9E3779B97F4A7C15ULL;
    for (Py_ssize_t i = 0; i < keys; i++) {
        h ^= (uint64_t)key[i] + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
        h *= 0xC2B2AE3D27D4EB4FULL;
    }
    return h ^ (h >> 31);
}

DIGEST_INLINE int keys_equal(const int64_t *a, const int64_t *b, Py_ssize_t keys) {
    for (Py_ssize_t i = 0; i < keys; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

DIGEST_INLINE Py_ssize_t probe_with(const tuple_table *t, const int64_t *key, Py_ssize_t keys,
                             Py_ssize_t width) {
    Py_ssize_t slot = (Py_ssize_t)(tuple_hash(key, keys) & (uint64_t)(t->cap - 1));
    while (t->used[slot] && !keys_equal(&t->slots[slot * width], key, keys))
        slot = (slot + 1) & (t->cap - 1);
    return slot;
}

static Py_ssize_t tuple_probe(const tuple_table *t, const int64_t *key) {
    return probe_with(t, key, t->keys, t->width);
}

static int tuple_table_grow(tuple_table *t) {
    tuple_table bigger = *t;
    bigger.cap = t->cap * 2; bigger.count = 0; bigger.last = -1;
    bigger.slots = calloc((size_t)(bigger.cap * t->width), sizeof(int64_t));
    bigger.used = calloc((size_t)bigger.cap, 1);
    if (!bigger.slots || !bigger.used) { free(bigger.slots); free(bigger.used); return -1; }
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (!t->used[i]) continue;
        Py_ssize_t slot = tuple_probe(&bigger, &t->slots[i * t->width]);
        memcpy(&bigger.slots[slot * t->width], &t->slots[i * t->width],
               (size_t)t->width * sizeof(int64_t));
        bigger.used[slot] = 1; bigger.count++;
    }
    tuple_table_free(t);
    *t = bigger;
    return 0;
}

/* The row for `key` (its sums start at zero), or NULL when memory runs out; `keys` and
 * `width` are the table's. */
DIGEST_INLINE int64_t *tuple_slot(tuple_table *t, const int64_t *key, Py_ssize_t keys,
                           Py_ssize_t width) {
    if (t->last >= 0 && keys_equal(&t->slots[t->last * width], key, keys))
        return &t->slots[t->last * width];
    if ((t->count + 1) * 2 > t->cap && tuple_table_grow(t) < 0) return NULL;
    Py_ssize_t slot = probe_with(t, key, keys, width);
    if (!t->used[slot]) {
        memcpy(&t->slots[slot * width], key, (size_t)keys * sizeof(int64_t));
        t->used[slot] = 1; t->count++;
    }
    t->last = slot;
    return &t->slots[slot * width];
}

/* The used rows, packed, as bytes (little-endian int64, as the columns are). */
static PyObject *tuple_table_bytes(const tuple_table *t) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, t->count * t->width * (Py_ssize_t)sizeof(int64_t));
    if (!out) return NULL;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (!t->used[i]) continue;
        memcpy(at, &t->slots[i * t->width], (size_t)t->width * sizeof(int64_t));
        at += t->width;
    }
    return out;
}

typedef struct {
    tuple_table entries, threads;
    int64_t first_ts, last_end;
    Py_ssize_t rows;
} io_digest;

static int digest_init(io_digest *d) {
    d->rows = 0; d->first_ts = d->last_end = 0;
    return tuple_table_init(&d->entries, DIGEST_WIDTH, DIGEST_KEYS) == 0 &&
           tuple_table_init(&d->threads, THREAD_KEYS, THREAD_KEYS) == 0 ? 0 : -1;
}

static void digest_free(io_digest *d) {
    tuple_table_free(&d->entries);
    tuple_table_free(&d->threads);
}

/* One complete event (phase 1, one call). -1 when memory runs out. */
static int digest_add(io_digest *d, int64_t name, int64_t cat, int64_t layer, int64_t file,
                      int64_t host, int64_t size, int64_t pid, int64_t tid, int64_t ts,
                      int64_t dur) {
    int64_t key[DIGEST_KEYS] = {1, name, cat, layer, file, host, size};
    int64_t *entry = tuple_slot(&d->entries, key, DIGEST_KEYS, DIGEST_WIDTH);
    int64_t thread[THREAD_KEYS] = {host, pid, tid};
    if (!entry || !tuple_slot(&d->threads, thread, THREAD_KEYS, THREAD_KEYS)) return -1;
    entry[DIGEST_KEYS] += 1;
    entry[DIGEST_KEYS + 1] += 1;
    entry[DIGEST_KEYS + 2] = (int64_t)((uint64_t)entry[DIGEST_KEYS + 2] + (uint64_t)dur);
    int64_t end = (int64_t)((uint64_t)ts + (uint64_t)dur);
    if (!d->rows || ts < d->first_ts) d->first_ts = ts;
    if (!d->rows || end > d->last_end) d->last_end = end;
    d->rows++;
    return 0;
}

/* (entries: bytes, threads: bytes, first_ts, last_end, rows) */
static PyObject *digest_result(const io_digest *d) {
    PyObject *entries = tuple_table_bytes(&d->entries), *threads = tuple_table_bytes(&d->threads);
    if (!entries || !threads) { Py_XDECREF(entries); Py_XDECREF(threads); return NULL; }
    return Py_BuildValue("(NNLLn)", entries, threads, (long long)d->first_ts,
                         (long long)d->last_end, d->rows);
}

#endif
