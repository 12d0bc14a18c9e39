/* What the summary makes of a checkpoint's tables, for _fastagg.c (included there once):
 * its dominant write sizes (top_sizes), and checkpoint_parts, which also makes its counts per
 * operation and its bytes-per-file figures. Each has a Python reference in checkpoints.py,
 * which tests hold it to. */
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* top_sizes(sizes, share, most, digits): checkpoints.modes' choice without a Python sort.
 * sizes: size -> [calls, bytes]. Returns (total bytes, [(size, calls, bytes, bytes_share)])
 * for the largest sizes by bytes (ties: the smaller size first) until they cover `share` of
 * the total or number `most`; bytes_share is round(bytes / total, digits). None when a value
 * is not an int64, a byte count is negative, the total reaches 2^53 (past it a double no
 * longer compares exactly as Python's int and float do) or digits is not 0..6: the caller
 * then takes the Python path. */
typedef struct {
    int64_t size, calls, moved;
    /* borrowed from a dict, returned as they are; NULL for rows made from int64 sums (then
     * made from size and calls when chosen) */
    PyObject *key, *calls_obj, *moved_obj;
} size_row;

/* rows[at] becomes the largest of rows[at:] by bytes (ties: the smaller size): a selection,
 * as the few modes wanted (MAX_MODES) cost less to pick than a sort of every size */
static void select_next(size_row *rows, Py_ssize_t at, Py_ssize_t count) {
    Py_ssize_t best = at;
    for (Py_ssize_t i = at + 1; i < count; i++)
        if (rows[i].moved > rows[best].moved ||
            (rows[i].moved == rows[best].moved && rows[i].size < rows[best].size))
            best = i;
    size_row swap = rows[at];
    rows[at] = rows[best];
    rows[best] = swap;
}

static int read_size_row(PyObject *key, PyObject *pair, size_row *row) {
    if (!PyLong_Check(key) || !PyList_Check(pair) || PyList_GET_SIZE(pair) < 2) return 0;
    row->key = key;
    row->calls_obj = PyList_GET_ITEM(pair, 0);
    row->moved_obj = PyList_GET_ITEM(pair, 1);
    if (!PyLong_Check(row->calls_obj) || !PyLong_Check(row->moved_obj)) return 0;
    int overflow = 0, moved_overflow = 0;
    row->size = PyLong_AsLongLongAndOverflow(key, &overflow);
    row->moved = PyLong_AsLongLongAndOverflow(row->moved_obj, &moved_overflow);
    if (PyErr_Occurred()) { PyErr_Clear(); return 0; }
    return !(overflow | moved_overflow) && row->moved >= 0;
}

/* round(part / total, digits) as Python gives it, for 0 <= part <= total < 2^53 and digits
 * 0..6. Both operands convert exactly, so the division is Python's int / int. Python rounds
 * the double's exact value to `digits` decimals, ties to even, and reads the decimal back:
 * k / 10^digits, with both exact, is that same nearest double. k comes from x * 10^digits,
 * which is within 10^digits * 2^-53 of the exact product: only a product near a tie (rare
 * among real byte counts) could round the other way, and goes to Python's round. A
 * call to round() cost about as much as the rest of a checkpoint's summary of sizes. */
static PyObject *rounded_share(int64_t part, int64_t total, int digits) {
    double x = (double)part / (double)total, scale = 1.0;
    for (int i = 0; i < digits; i++) scale *= 10.0;
    double scaled = x * scale, k = floor(scaled), frac = scaled - k;
    if (fabs(frac - 0.5) < 1e-6) {
        PyObject *value = PyFloat_FromDouble(x);
        if (!value) return NULL;
        PyObject *rounded = PyObject_CallMethod(value, "__round__", "i", digits);
        Py_DECREF(value);
        return rounded;
    }
    return PyFloat_FromDouble((frac > 0.5 ? k + 1.0 : k) / scale);
}

/* One chosen mode: SizeMode(size, calls, bytes, share) when `mode_type` is given, else a
 * tuple; the row's own objects when it has them. */
static PyObject *make_mode(const size_row *row, int64_t total, int digits,
                           PyObject *mode_type) {
    PyObject *ratio = rounded_share(row->moved, total, digits);
    PyObject *key = row->key ? Py_NewRef(row->key) : PyLong_FromLongLong(row->size);
    PyObject *calls = row->calls_obj ? Py_NewRef(row->calls_obj)
                                     : PyLong_FromLongLong(row->calls);
    PyObject *moved = row->moved_obj ? Py_NewRef(row->moved_obj)
                                     : PyLong_FromLongLong(row->moved);
    PyObject *mode = NULL;
    if (ratio && key && calls && moved) {
        PyObject *fields[4] = {key, calls, moved, ratio};
        mode = mode_type ? PyObject_Vectorcall(mode_type, fields, 4, NULL)
                         : PyTuple_Pack(4, key, calls, moved, ratio);
    }
    Py_XDECREF(ratio); Py_XDECREF(key); Py_XDECREF(calls); Py_XDECREF(moved);
    return mode;
}

/* The modes among `n` rows whose bytes add to `total`: 1 with the list in *found, -1 on an
 * error (rows are reordered). */
static int choose_modes(size_row *rows, Py_ssize_t n, int64_t total, double share,
                        Py_ssize_t most, int digits, PyObject *mode_type, PyObject **found) {
    PyObject *list = PyList_New(0);
    if (!list) return -1;
    int64_t covered = 0;
    for (Py_ssize_t i = 0; total && i < n && i < most; i++) {
        if ((double)covered >= share * (double)total) break;
        select_next(rows, i, n);
        covered += rows[i].moved;
        PyObject *mode = make_mode(&rows[i], total, digits, mode_type);
        if (!mode || PyList_Append(list, mode) < 0) {
            Py_XDECREF(mode);
            Py_DECREF(list);
            return -1;
        }
        Py_DECREF(mode);
    }
    *found = list;
    return 1;
}

/* The modes of `sizes` into *found: a list of SizeMode(size, calls, bytes, share) when
 * `mode_type` is given, else of tuples; *total their total bytes. 1 when found, 0 when the
 * Python path must decide (see top_sizes), -1 on an error. */
static int collect_modes(PyObject *sizes, double share, Py_ssize_t most, int digits,
                         PyObject *mode_type, PyObject **found, int64_t *total_out) {
    PyObject *key, *pair;
    Py_ssize_t pos = 0, n = 0;
    *found = NULL;
    if (digits < 0 || digits > 6) return 0;
    size_row stack_rows[64], *rows = stack_rows;
    Py_ssize_t count = PyDict_GET_SIZE(sizes);
    if (count > 64 && !(rows = malloc(count * sizeof(size_row)))) {
        PyErr_NoMemory();
        return -1;
    }
    const int64_t exact = (int64_t)1 << 53;
    int64_t total = 0;
    int rc = 0;
    while (PyDict_Next(sizes, &pos, &key, &pair)) {
        if (!read_size_row(key, pair, &rows[n]) || rows[n].moved >= exact - total) goto done;
        total += rows[n++].moved;
    }
    rc = choose_modes(rows, n, total, share, most, digits, mode_type, found);
    *total_out = total;
done:
    if (rows != stack_rows) free(rows);
    return rc;
}

static PyObject *top_sizes(PyObject *self, PyObject *args) {
    PyObject *sizes, *found;
    double share;
    int digits;
    Py_ssize_t most;
    int64_t total;
    if (!PyArg_ParseTuple(args, "O!dni", &PyDict_Type, &sizes, &share, &most, &digits))
        return NULL;
    int rc = collect_modes(sizes, share, most, digits, NULL, &found, &total);
    if (rc <= 0) return rc < 0 ? NULL : Py_NewRef(Py_None);
    PyObject *result = Py_BuildValue("(LO)", (long long)total, found);
    Py_DECREF(found);
    return result;
}

/* {name: OpCount(calls, dur_us)} in name order, from name -> [calls, dur_us] */
static PyObject *op_counts(PyObject *ops, PyObject *op_type) {
    PyObject *names = PyDict_Keys(ops), *result = names ? PyDict_New() : NULL;
    if (!result || PyList_Sort(names) < 0) goto fail;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(names); i++) {
        PyObject *name = PyList_GET_ITEM(names, i), *pair = PyDict_GetItemWithError(ops, name);
        if (!pair || !PyList_Check(pair) || PyList_GET_SIZE(pair) < 2) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_IndexError, "an operation's pair is not a list of two");
            goto fail;
        }
        PyObject *fields[2] = {PyList_GET_ITEM(pair, 0), PyList_GET_ITEM(pair, 1)};
        PyObject *count = PyObject_Vectorcall(op_type, fields, 2, NULL);
        int rc = count ? PyDict_SetItem(result, name, count) : -1;
        Py_XDECREF(count);
        if (rc < 0) goto fail;
    }
    Py_DECREF(names);
    return result;
fail:
    Py_XDECREF(names);
    Py_XDECREF(result);
    return NULL;
}

/* FileSizes(files, min, median, max) of the bytes per file, as FileSizes.of takes them */
static PyObject *file_sizes(PyObject *per_file, PyObject *files_type) {
    PyObject *values = PyDict_Values(per_file), *result = NULL;
    if (!values || PyList_Sort(values) < 0) goto done;
    Py_ssize_t n = PyList_GET_SIZE(values);
    PyObject *count = PyLong_FromSsize_t(n), *zero = PyLong_FromLong(0);
    if (count && zero) {
        PyObject *fields[4] = {count, n ? PyList_GET_ITEM(values, 0) : zero,
                               n ? PyList_GET_ITEM(values, n / 2) : zero,
                               n ? PyList_GET_ITEM(values, n - 1) : zero};
        result = PyObject_Vectorcall(files_type, fields, 4, NULL);
    }
    Py_XDECREF(count);
    Py_XDECREF(zero);
done:
    Py_XDECREF(values);
    return result;
}

/* checkpoint_parts(ops, sizes, per_file, OpCount, SizeMode, FileSizes, share, most, digits)
 * -> (ops, modes, file sizes): checkpoints._checkpoint's three summaries of a checkpoint's
 * tables (a few thousand checkpoints a trace: made in Python they were most of its time);
 * modes is None when the Python path must choose them. */
static PyObject *checkpoint_parts(PyObject *self, PyObject *args) {
    PyObject *ops, *sizes, *per_file, *op_type, *mode_type, *files_type, *modes = NULL;
    double share;
    Py_ssize_t most;
    int digits;
    int64_t total;
    if (!PyArg_ParseTuple(args, "O!O!O!OOOdni", &PyDict_Type, &ops, &PyDict_Type, &sizes,
                          &PyDict_Type, &per_file, &op_type, &mode_type, &files_type, &share,
                          &most, &digits))
        return NULL;
    int found = collect_modes(sizes, share, most, digits, mode_type, &modes, &total);
    if (found < 0) return NULL;
    PyObject *counts = op_counts(ops, op_type);
    PyObject *files = counts ? file_sizes(per_file, files_type) : NULL;
    PyObject *result = files ? PyTuple_Pack(3, counts, found ? modes : Py_None, files) : NULL;
    Py_XDECREF(counts);
    Py_XDECREF(files);
    Py_XDECREF(modes);
    return result;
}

