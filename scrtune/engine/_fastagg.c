/* Fast path for ioagg.add_grouped: I/O rows folded into the aggregates of their windows.
 *
 * fold(aggs, group, name, file, size, calls, dur, is_write, is_read, names, files) -> None
 *
 * Rows whose group is negative are skipped: no window claimed them.
 * The rows (int64 buffers) are reduced to one sum per distinct (table, window, key) in C,
 * without the GIL; then each sum is added into its IoAgg in the same order, and with the same
 * int64 wrap-around per sum, as the Python reference in ioagg.py (tests require both to leave
 * identical aggregates). Where that reference made a call or a dictionary update per distinct
 * key from Python, this makes none: it was most of replay's aggregation time.
 *
 * Smaller helpers follow it: add_pairs (ioagg.add_pair_tables), claim (timeline._claim's
 * search for each row's window) and top_sizes (checkpoints.modes' choice of a checkpoint's
 * dominant write sizes).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { OPS, WRITE_FILE, READ_FILE, WRITE_SIZE };

typedef struct {
    int64_t kind, group, key;
    uint64_t first, second; /* wrapping sums, as numpy's int64 reductions wrap */
} entry;

/* a window's sum as its tables take it (and as _held.h keeps it) */
typedef struct {
    int64_t kind, key;
    uint64_t first, second;
} held_row;

#include "_sums.h"

typedef struct {
    Py_buffer group, name, file, size, calls, dur, is_write, is_read;
    Py_ssize_t rows, groups, names, files;
} inputs;

/* One run of rows alike in window, call, file and size: added to the sums at once. */
typedef struct {
    int64_t group, name, file, size;
    uint64_t calls, dur, moved;
} row_run;

static int add_run(const inputs *in, sums *t, const row_run *r) {
    const unsigned char *is_write = in->is_write.buf, *is_read = in->is_read.buf;
    if (sums_add(t, OPS, r->group, r->name, (int64_t)r->calls, (int64_t)r->dur) < 0) return -1;
    if (r->size < 0) return 0;
    int64_t calls = (int64_t)r->calls, moved = (int64_t)r->moved;
    if (is_write[r->name] && (sums_add(t, WRITE_FILE, r->group, r->file, calls, moved) < 0 ||
                              sums_add(t, WRITE_SIZE, r->group, r->size, calls, moved) < 0))
        return -1;
    if (is_read[r->name] && sums_add(t, READ_FILE, r->group, r->file, calls, moved) < 0)
        return -1;
    return 0;
}

/* The reduction: C memory only, run without the GIL. Returns -1 on memory, -2 on a bad code.
 * A checkpoint writes one file in runs of equal calls: consecutive rows alike are summed
 * first (sums wrap at 64 bits either way, so the totals are the same), then added once. */
static int reduce(const inputs *in, sums *t, uint64_t *busy) {
    const int64_t *group = in->group.buf, *name = in->name.buf, *file = in->file.buf,
                  *size = in->size.buf, *calls = in->calls.buf, *dur = in->dur.buf;
    row_run current = {-1, 0, 0, 0, 0, 0, 0};
    for (Py_ssize_t i = 0; i < in->rows; i++) {
        int64_t g = group[i], n = name[i], f = file[i], s = size[i];
        if (g < 0) continue; /* a row no window claims */
        if (g >= in->groups || n < 0 || n >= in->names || f < -1 || f >= in->files)
            return -2;
        busy[g] += (uint64_t)dur[i];
        if (g != current.group || n != current.name || f != current.file || s != current.size) {
            if (current.group >= 0 && add_run(in, t, &current) < 0) return -1;
            current = (row_run){g, n, f, s, 0, 0, 0};
        }
        current.calls += (uint64_t)calls[i];
        current.dur += (uint64_t)dur[i];
        current.moved += (uint64_t)s;
    }
    return current.group >= 0 ? add_run(in, t, &current) : 0;
}

#include "_pytables.h"

/* the tables are read and written by their stored names (ioagg.IoAgg's properties settle) */
static PyObject *S_io_busy_us, *S_ops, *S_write_sizes, *S_file_bytes_written, *S_file_bytes_read,
    *S_bytes_written, *S_bytes_read, *S_write_calls, *S_read_calls, *S_held;

static PyObject *dict_attr(PyObject *obj, PyObject *attr) {
    PyObject *table = PyObject_GetAttr(obj, attr);
    if (table && !PyDict_Check(table)) {
        Py_DECREF(table);
        PyErr_SetString(PyExc_TypeError, "an aggregate table is not a dict");
        return NULL;
    }
    return table;
}

static PyObject *from_wide(__int128 value) {
    if (value >= INT64_MIN && value <= INT64_MAX) return PyLong_FromLongLong((long long)value);
    PyObject *high = PyLong_FromLongLong((long long)(value >> 64));
    PyObject *low = PyLong_FromUnsignedLongLong((unsigned long long)(uint64_t)value);
    PyObject *shift = PyLong_FromLong(64), *result = NULL;
    if (high && low && shift) {
        PyObject *shifted = PyNumber_Lshift(high, shift);
        if (shifted) { result = PyNumber_Add(shifted, low); Py_DECREF(shifted); }
    }
    Py_XDECREF(high); Py_XDECREF(low); Py_XDECREF(shift);
    return result;
}

/* A run of sums of one (kind, window) added into that window's table, as the reference's
 * _fold_pairs and _add_moved add them: each sum wraps at 64 bits, the table's totals do not.
 * A file's sum without a file (key -1) has no entry. */
static int emit_table(const held_row *run, Py_ssize_t count, PyObject *agg, PyObject *names,
                      PyObject *files) {
    int64_t kind = run->kind;
    PyObject *attr = kind == OPS ? S_ops : kind == WRITE_SIZE ? S_write_sizes
                     : kind == WRITE_FILE ? S_file_bytes_written : S_file_bytes_read;
    PyObject *table = dict_attr(agg, attr);
    if (!table) return -1;
    int rc = 0;
    /* a window's table is mostly empty when its I/O arrives (its calls are claimed at once):
     * its keys, distinct in the run, are then set without looking each up first */
    int fresh = PyDict_GET_SIZE(table) == 0;
    for (Py_ssize_t i = 0; i < count && rc == 0; i++) {
        const held_row *e = &run[i];
        int64_t first = (int64_t)e->first, second = (int64_t)e->second;
        if (kind != OPS && kind != WRITE_SIZE && e->key < 0) continue;
        if (kind != WRITE_SIZE && e->key >= PyList_GET_SIZE(kind == OPS ? names : files)) {
            PyErr_SetString(PyExc_IndexError, "a sum's name or file code out of range");
            rc = -1;
            break;
        }
        PyObject *key = kind == OPS ? Py_NewRef(PyList_GET_ITEM(names, e->key))
                        : kind == WRITE_SIZE ? PyLong_FromLongLong(e->key)
                        : Py_NewRef(PyList_GET_ITEM(files, e->key));
        int pair = kind == OPS || kind == WRITE_SIZE; /* a file's row adds its bytes only */
        PyObject *a = pair ? PyLong_FromLongLong(first) : NULL;
        PyObject *b = PyLong_FromLongLong(second);
        if (!key || (pair && !a) || !b) rc = -1;
        else if (pair) rc = fresh ? set_pair(table, key, a, b) : add_pair(table, key, a, b);
        else rc = fresh ? PyDict_SetItem(table, key, b) : add_count(table, key, b);
        Py_XDECREF(key); Py_XDECREF(a); Py_XDECREF(b);
    }
    Py_DECREF(table);
    return rc;
}

/* A file kind's run adds its calls and bytes (unbounded, as Python's ints) to the window's
 * write or read totals, with or without a file */
static int add_moved(const entry *run, Py_ssize_t count, PyObject *agg) {
    int writes = run->kind == WRITE_FILE;
    __int128 calls = 0, moved = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        calls += (int64_t)run[i].first;
        moved += (int64_t)run[i].second;
    }
    PyObject *total = from_wide(moved), *number = from_wide(calls);
    int rc = 0;
    if (!total || !number ||
        add_attr(agg, writes ? S_bytes_written : S_bytes_read, total) < 0 ||
        add_attr(agg, writes ? S_write_calls : S_read_calls, number) < 0)
        rc = -1;
    Py_XDECREF(total); Py_XDECREF(number);
    return rc;
}

#include "_summary_parts.h"
#include "_held.h"

/* Each window's sums, in (window, kind, key) order, into its aggregate: its totals at once,
 * its tables too or, with `defer`, held back in one piece until read (_held.h). */
static int apply(PyObject *aggs, const uint64_t *busy, const entry *ordered, Py_ssize_t count,
                 PyObject *names, PyObject *files, int defer) {
    for (Py_ssize_t g = 0; g < PyList_GET_SIZE(aggs); g++) {
        if (!busy[g]) continue;
        PyObject *value = PyLong_FromLongLong((long long)(int64_t)busy[g]);
        int rc = value ? add_attr(PyList_GET_ITEM(aggs, g), S_io_busy_us, value) : -1;
        Py_XDECREF(value);
        if (rc < 0) return -1;
    }
    held_row *rows = defer ? NULL : malloc((size_t)(count ? count : 1) * sizeof(held_row));
    if (!defer && !rows) { PyErr_NoMemory(); return -1; }
    for (Py_ssize_t i = 0; !defer && i < count; i++)
        rows[i] = (held_row){ordered[i].kind, ordered[i].key, ordered[i].first,
                             ordered[i].second};
    int rc = 0;
    for (Py_ssize_t begin = 0, end; begin < count && rc == 0; begin = end) {
        const entry *first = &ordered[begin];
        PyObject *agg = PyList_GET_ITEM(aggs, first->group);
        for (end = begin + 1; end < count && ordered[end].group == first->group; end++) {}
        if (!defer && settle_held(agg) < 0) { rc = -1; break; } /* in arrival order */
        for (Py_ssize_t at = begin, stop; at < end && rc == 0; at = stop) {
            for (stop = at + 1; stop < end && ordered[stop].kind == ordered[at].kind; stop++) {}
            int file_kind = ordered[at].kind == WRITE_FILE || ordered[at].kind == READ_FILE;
            if ((file_kind && add_moved(&ordered[at], stop - at, agg) < 0) ||
                (!defer && emit_table(&rows[at], stop - at, agg, names, files) < 0))
                rc = -1;
        }
        if (rc == 0 && defer && hold(agg, first, end - begin, names, files) < 0) rc = -1;
    }
    free(rows);
    return rc;
}

/* A column's buffer, C-contiguous (and writable when `flags` asks), of `item`-byte items and,
 * when rows >= 0, of that many rows */
static int get_column(PyObject *obj, Py_buffer *view, Py_ssize_t item, Py_ssize_t rows,
                      int flags) {
    if (PyObject_GetBuffer(obj, view, PyBUF_C_CONTIGUOUS | flags) < 0) return -1;
    if (view->itemsize != item || (rows >= 0 && view->len != rows * item)) {
        PyErr_SetString(PyExc_ValueError, view->itemsize != item
                        ? "a column of the wrong item size" : "columns of different lengths");
        PyBuffer_Release(view);
        return -1;
    }
    return 0;
}

#include "_placement.h"
#include "_gather.h"

static PyObject *fold(PyObject *self, PyObject *args) {
    PyObject *aggs, *names, *files, *cols[8];
    int defer = 0;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOO!O!|p", &PyList_Type, &aggs, &cols[0], &cols[1],
                          &cols[2], &cols[3], &cols[4], &cols[5], &cols[6], &cols[7],
                          &PyList_Type, &names, &PyList_Type, &files, &defer))
        return NULL;
    inputs in;
    memset(&in, 0, sizeof(in));
    Py_buffer *views[8] = {&in.group, &in.name, &in.file, &in.size, &in.calls, &in.dur,
                           &in.is_write, &in.is_read};
    int got = 0;
    PyObject *result = NULL;
    if (get_column(cols[0], views[0], 8, -1, 0) < 0) return NULL;
    got = 1;
    in.rows = in.group.len / 8;
    for (; got < 6; got++)
        if (get_column(cols[got], views[got], 8, in.rows, 0) < 0) goto done;
    for (; got < 8; got++)
        if (get_column(cols[got], views[got], 1, -1, 0) < 0) goto done;
    in.groups = PyList_GET_SIZE(aggs);
    in.files = PyList_GET_SIZE(files);
    in.names = PyList_GET_SIZE(names);
    if (in.is_write.len < in.names) in.names = in.is_write.len;
    if (in.is_read.len < in.names) in.names = in.is_read.len;
    sums t = {NULL, NULL, 0, 0, {-1, -1, -1, -1}};
    uint64_t *busy = calloc(in.groups ? in.groups : 1, sizeof(uint64_t));
    int reduced = -1;
    entry *ordered = NULL;
    Py_ssize_t count = 0;
    if (busy) {
        Py_BEGIN_ALLOW_THREADS
        reduced = reduce(&in, &t, busy);
        if (reduced == 0 && (count = sorted_sums(&t, in.groups, &ordered)) < 0) reduced = -1;
        Py_END_ALLOW_THREADS
    }
    if (reduced == -2)
        PyErr_SetString(PyExc_IndexError, "fold: a window, name or file code out of range");
    else if (reduced < 0)
        PyErr_NoMemory();
    else if (apply(aggs, busy, ordered, count, names, files, defer) == 0)
        result = Py_NewRef(Py_None);
    free(ordered);
    free(t.entries);
    free(t.index);
    free(busy);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(views[i]);
    return result;
}

/* add_pairs(into, tables): for each table, for each key -> [a, b], into[key] gets [a, b]
 * added (a new list when absent), in the tables' order: ioagg.add_pair_tables' reference. */
static PyObject *add_pairs(PyObject *self, PyObject *args) {
    PyObject *into, *tables;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &into, &PyList_Type, &tables)) return NULL;
    for (Py_ssize_t t = 0; t < PyList_GET_SIZE(tables); t++) {
        PyObject *table = PyList_GET_ITEM(tables, t);
        if (!PyDict_Check(table)) {
            PyErr_SetString(PyExc_TypeError, "add_pairs: a table is not a dict");
            return NULL;
        }
        if (add_table_pairs(into, table) < 0) return NULL;
    }
    Py_RETURN_NONE;
}

/* claim(starts, ends, ts, group) -> taken: for each row, the last window whose start is at
 * or before the row's ts (starts ascending), when the row's ts is not past that window's end;
 * group[row] is its index, or -1. What timeline._claim's numpy passes compute (searchsorted,
 * side="right", less one), in one pass: rows come mostly in time order, so the previous row's
 * window is tried before a binary search. */
static Py_ssize_t claim_rows(const int64_t *starts, const int64_t *ends, Py_ssize_t windows,
                             const int64_t *ts, int64_t *group, Py_ssize_t rows) {
    Py_ssize_t taken = 0, slot = -1;
    for (Py_ssize_t i = 0; i < rows; i++) {
        int64_t t = ts[i];
        if (!(slot >= 0 && starts[slot] <= t && (slot + 1 == windows || starts[slot + 1] > t))) {
            Py_ssize_t low = 0, high = windows; /* first start > t */
            while (low < high) {
                Py_ssize_t mid = low + (high - low) / 2;
                if (starts[mid] <= t) low = mid + 1; else high = mid;
            }
            slot = low - 1;
        }
        int inside = slot >= 0 && t <= ends[slot];
        group[i] = inside ? slot : -1;
        taken += inside;
    }
    return taken;
}

static PyObject *claim(PyObject *self, PyObject *args) {
    PyObject *objs[4];
    if (!PyArg_ParseTuple(args, "OOOO", &objs[0], &objs[1], &objs[2], &objs[3])) return NULL;
    Py_buffer views[4];
    int got = 0;
    PyObject *result = NULL;
    /* starts; ends as many; ts; group as many as ts, written */
    for (; got < 4; got++)
        if (get_column(objs[got], &views[got], 8, got % 2 ? views[got - 1].len / 8 : -1,
                       got == 3 ? PyBUF_WRITABLE : 0) < 0)
            goto done;
    Py_ssize_t taken;
    Py_BEGIN_ALLOW_THREADS
    taken = claim_rows(views[0].buf, views[1].buf, views[0].len / 8, views[2].buf,
                       views[3].buf, views[2].len / 8);
    Py_END_ALLOW_THREADS
    result = PyLong_FromSsize_t(taken);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    return result;
}

static PyMethodDef methods[] = {
    {"add_pairs", add_pairs, METH_VARARGS,
     "add_pairs(into, tables): add every table of key -> [a, b] into `into`"},
    {"fold", fold, METH_VARARGS,
     "fold(aggs, group, name, file, size, calls, dur, is_write, is_read, names, files): add "
     "each I/O row to aggs[group[row]], as ioagg.add_grouped does"},
    {"gather_rows", gather_rows, METH_VARARGS,
     "gather_rows(at, ts, dur, name, file, size, calls, name_map, file_map, out): the rows "
     "`at` names, with their ends and mapped codes, into out (7 x len(at)); Rows.gather"},
    {"claim", claim, METH_VARARGS,
     "claim(starts, ends, ts, group) -> taken: each row's window (the last starting at or "
     "before it, if it has not ended), or -1, into group; timeline._claim's search"},
    {"top_sizes", top_sizes, METH_VARARGS,
     "top_sizes(sizes, share, most, digits): (total, [(size, calls, bytes, bytes_share)]) of "
     "checkpoints.modes, or None for the Python path"},
    {"place", place, METH_VARARGS,
     "place(start, end, by_name, step, epoch, held) -> (kept, step, epoch, absorbed): "
     "windows.place_py's pass over held windows and a batch's new ones"},
    {"settle", settle, METH_O,
     "settle(agg): add the sums a fold held back for `agg` into its tables"},
    {"held_parts", held_parts, METH_VARARGS,
     "held_parts(agg, save, OpCount, SizeMode, FileSizes, share, most, digits) -> (ops, "
     "modes, file sizes) from held sums, or None for the settled path"},
    {"add_sizes", add_sizes, METH_VARARGS,
     "add_sizes(into, aggs): add each aggregate's write sizes, held ones included"},
    {"checkpoint_parts", checkpoint_parts, METH_VARARGS,
     "checkpoint_parts(ops, sizes, per_file, OpCount, SizeMode, FileSizes, share, most, "
     "digits) -> (ops, modes or None, file sizes) of checkpoints._checkpoint"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastagg",
                                    "C fast path for folding I/O rows into windows", -1, methods};

PyMODINIT_FUNC PyInit__fastagg(void) {
    struct { PyObject **slot; const char *name; } attrs[] = {
        {&S_io_busy_us, "io_busy_us"}, {&S_ops, "ops_table"}, {&S_write_sizes, "sizes_table"},
        {&S_file_bytes_written, "written_table"}, {&S_file_bytes_read, "read_table"},
        {&S_held, "_held"},
        {&S_bytes_written, "bytes_written"}, {&S_bytes_read, "bytes_read"},
        {&S_write_calls, "write_calls"}, {&S_read_calls, "read_calls"}};
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++)
        if (!(*attrs[i].slot = PyUnicode_InternFromString(attrs[i].name))) return NULL;
    return PyModule_Create(&module);
}
