/* A window's sums held back by the fold (`defer`), for _fastagg.c (included there once).
 *
 * Making a dictionary entry, two ints and a list per (window, key), some thirty a checkpoint
 * window, was most of the fold's time on the replaying thread; yet most windows are only ever
 * summarised (checkpoints._checkpoint: their ops, dominant sizes and file sizes). With
 * `defer`, a window's sums from one fold are kept as one bytes object of held_row, in (kind,
 * key) order, in the window's IoAgg.__dict__ under "_held": a list [names, files, rows, rows,
 * ...] (names and files are the string tables the codes index: the engine's, which only
 * grow, or those of a state the window was decoded with; a fold under other tables settles
 * what is held first). The window's totals (bytes, calls, busy time) are added at once.
 *
 * settle(agg) adds them into the tables as the fold without `defer` would have, in the order
 * they came (IoAgg's table properties call it first); held_parts makes a checkpoint's three
 * summaries from them with no table; add_sizes adds windows' write sizes as add_pairs adds
 * their settled tables. Tests hold each to the settled path.
 */

static int settle_held(PyObject *agg);

static PyObject *held_list(PyObject *agg, int take) {
    PyObject *dict = PyObject_GenericGetDict(agg, NULL);
    if (!dict) return NULL;
    PyObject *held = PyDict_GetItemWithError(dict, S_held);
    if (held) {
        Py_INCREF(held);
        if (take && PyDict_DelItem(dict, S_held) < 0) Py_CLEAR(held);
    } else if (!PyErr_Occurred()) {
        held = Py_NewRef(Py_None);
    }
    Py_DECREF(dict);
    if (held && held != Py_None && (!PyList_Check(held) || PyList_GET_SIZE(held) < 2 ||
                                    !PyList_Check(PyList_GET_ITEM(held, 0)) ||
                                    !PyList_Check(PyList_GET_ITEM(held, 1)))) {
        Py_DECREF(held);
        PyErr_SetString(PyExc_TypeError, "an aggregate's held sums are not [names, files, ...]");
        return NULL;
    }
    return held;
}

static held_row *rows_of(PyObject *held, Py_ssize_t at, Py_ssize_t *count) {
    PyObject *rows = PyList_GET_ITEM(held, at);
    if (!PyBytes_Check(rows) || PyBytes_GET_SIZE(rows) % sizeof(held_row)) {
        PyErr_SetString(PyExc_TypeError, "an aggregate's held sums are not rows");
        return NULL;
    }
    *count = PyBytes_GET_SIZE(rows) / sizeof(held_row);
    return (held_row *)PyBytes_AS_STRING(rows);
}

/* One window's sums of a fold, kept (a file's sum without a file has no table entry) */
static int hold(PyObject *agg, const entry *run, Py_ssize_t count, PyObject *names,
                PyObject *files) {
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < count; i++)
        kept += run[i].key >= 0 || run[i].kind == OPS || run[i].kind == WRITE_SIZE;
    PyObject *rows = PyBytes_FromStringAndSize(NULL, kept * (Py_ssize_t)sizeof(held_row));
    if (!rows) return -1;
    held_row *out = (held_row *)PyBytes_AS_STRING(rows);
    for (Py_ssize_t i = 0; i < count; i++)
        if (run[i].key >= 0 || run[i].kind == OPS || run[i].kind == WRITE_SIZE)
            *out++ = (held_row){run[i].kind, run[i].key, run[i].first, run[i].second};
    PyObject *dict = PyObject_GenericGetDict(agg, NULL), *held = NULL;
    int rc = -1;
    if (dict && (held = PyDict_GetItemWithError(dict, S_held)) && PyList_Check(held) &&
        PyList_GET_SIZE(held) >= 2 &&
        (PyList_GET_ITEM(held, 0) != names || PyList_GET_ITEM(held, 1) != files)) {
        /* held under another state's tables (merged in): those are settled first */
        held = NULL;
        if (settle_held(agg) < 0) { Py_DECREF(dict); Py_DECREF(rows); return -1; }
    }
    if (dict && !held && !(held = PyDict_GetItemWithError(dict, S_held)) && !PyErr_Occurred()) {
        PyObject *fresh = PyList_New(3); /* the first fold to hold sums for this window */
        if (fresh) {
            PyList_SET_ITEM(fresh, 0, Py_NewRef(names));
            PyList_SET_ITEM(fresh, 1, Py_NewRef(files));
            PyList_SET_ITEM(fresh, 2, Py_NewRef(rows));
            rc = PyDict_SetItem(dict, S_held, fresh);
            Py_DECREF(fresh);
        }
    } else if (held && PyList_Check(held)) {
        rc = PyList_Append(held, rows);
    } else if (held) {
        PyErr_SetString(PyExc_TypeError, "an aggregate's held sums are not [names, files, ...]");
    }
    Py_XDECREF(dict);
    Py_DECREF(rows);
    return rc;
}

/* The held sums into the tables, in the order they came; none are held afterwards */
static int settle_held(PyObject *agg) {
    PyObject *held = held_list(agg, 1);
    if (!held || held == Py_None) return held ? (Py_DECREF(held), 0) : -1;
    PyObject *names = PyList_GET_ITEM(held, 0), *files = PyList_GET_ITEM(held, 1);
    int rc = 0;
    for (Py_ssize_t at = 2; at < PyList_GET_SIZE(held) && rc == 0; at++) {
        Py_ssize_t count;
        const held_row *rows = rows_of(held, at, &count);
        if (!rows) { rc = -1; break; }
        for (Py_ssize_t i = 0, stop; i < count && rc == 0; i = stop) {
            for (stop = i + 1; stop < count && rows[stop].kind == rows[i].kind; stop++) {}
            if (rows[i].kind < OPS || rows[i].kind > WRITE_SIZE) {
                PyErr_SetString(PyExc_ValueError, "an aggregate's held sums are damaged");
                rc = -1;
            } else {
                rc = emit_table(&rows[i], stop - i, agg, names, files);
            }
        }
    }
    Py_DECREF(held);
    return rc;
}

static PyObject *settle(PyObject *self, PyObject *agg) {
    return settle_held(agg) < 0 ? NULL : Py_NewRef(Py_None);
}

static int by_kind_key(const void *a, const void *b) {
    const held_row *x = a, *y = b;
    if (x->kind != y->kind) return x->kind < y->kind ? -1 : 1;
    return x->key < y->key ? -1 : x->key > y->key;
}

/* All held rows of a window, one per (kind, key), in that order, into *out (malloc'd):
 * their count, -1 on an error, -2 when a sum across folds leaves int64 (the settled path
 * then adds them as Python ints). */
static Py_ssize_t merged_rows(PyObject *held, held_row **out) {
    Py_ssize_t total = 0, count;
    for (Py_ssize_t at = 2; at < PyList_GET_SIZE(held); at++) {
        if (!rows_of(held, at, &count)) return -1;
        total += count;
    }
    held_row *rows = malloc((size_t)(total ? total : 1) * sizeof(held_row));
    if (!rows) { PyErr_NoMemory(); return -1; }
    Py_ssize_t n = 0;
    for (Py_ssize_t at = 2; at < PyList_GET_SIZE(held); at++) {
        const held_row *part = rows_of(held, at, &count);
        memcpy(&rows[n], part, (size_t)count * sizeof(held_row));
        n += count;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (rows[i].kind < OPS || rows[i].kind > WRITE_SIZE) {
            free(rows);
            PyErr_SetString(PyExc_ValueError, "an aggregate's held sums are damaged");
            return -1;
        }
    if (PyList_GET_SIZE(held) > 3) qsort(rows, (size_t)n, sizeof(held_row), by_kind_key);
    Py_ssize_t kept = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        if (kept && rows[kept - 1].kind == rows[i].kind && rows[kept - 1].key == rows[i].key) {
            int64_t a = (int64_t)rows[kept - 1].first, b = (int64_t)rows[kept - 1].second;
            if (__builtin_add_overflow(a, (int64_t)rows[i].first, &a) ||
                __builtin_add_overflow(b, (int64_t)rows[i].second, &b)) {
                free(rows);
                return -2;
            }
            rows[kept - 1].first = (uint64_t)a;
            rows[kept - 1].second = (uint64_t)b;
        } else {
            rows[kept++] = rows[i];
        }
    }
    *out = rows;
    return kept;
}

/* {name: OpCount(calls, dur_us)} in name order, from a window's OPS rows (a few: sorted
 * in place by insertion, comparing the names themselves) */
static PyObject *held_ops(const held_row *rows, Py_ssize_t count, PyObject *names,
                          PyObject *op_type) {
    Py_ssize_t stack_order[16], *order = stack_order;
    if (count > 16 && !(order = malloc((size_t)count * sizeof(Py_ssize_t))))
        return PyErr_NoMemory();
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (rows[i].key < 0 || rows[i].key >= PyList_GET_SIZE(names) ||
            !PyUnicode_Check(PyList_GET_ITEM(names, rows[i].key))) {
            PyErr_SetString(PyExc_IndexError, "held sums name a call beyond the names");
            goto done;
        }
        Py_ssize_t j = i;
        PyObject *name = PyList_GET_ITEM(names, rows[i].key);
        for (; j > 0 && PyUnicode_Compare(PyList_GET_ITEM(names, rows[order[j - 1]].key),
                                          name) > 0; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    if (!(result = PyDict_New())) goto done;
    for (Py_ssize_t i = 0; i < count; i++) {
        const held_row *row = &rows[order[i]];
        PyObject *fields[2] = {PyLong_FromLongLong((int64_t)row->first),
                               PyLong_FromLongLong((int64_t)row->second)};
        PyObject *op = fields[0] && fields[1]
                       ? PyObject_Vectorcall(op_type, fields, 2, NULL) : NULL;
        Py_XDECREF(fields[0]); Py_XDECREF(fields[1]);
        if (!op || PyDict_SetItem(result, PyList_GET_ITEM(names, row->key), op) < 0) {
            Py_XDECREF(op);
            Py_CLEAR(result);
            break;
        }
        Py_DECREF(op);
    }
done:
    if (order != stack_order) free(order);
    return result;
}

static int by_value(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* FileSizes(files, min, median, max) of the bytes per file of a window's file rows */
static PyObject *held_file_sizes(const held_row *rows, Py_ssize_t count, PyObject *files_type) {
    int64_t *values = malloc((size_t)(count ? count : 1) * sizeof(int64_t));
    if (!values) return PyErr_NoMemory();
    for (Py_ssize_t i = 0; i < count; i++) values[i] = (int64_t)rows[i].second;
    qsort(values, (size_t)count, sizeof(int64_t), by_value);
    PyObject *fields[4] = {PyLong_FromSsize_t(count),
                           PyLong_FromLongLong(count ? values[0] : 0),
                           PyLong_FromLongLong(count ? values[count / 2] : 0),
                           PyLong_FromLongLong(count ? values[count - 1] : 0)};
    free(values);
    PyObject *result = fields[0] && fields[1] && fields[2] && fields[3]
                       ? PyObject_Vectorcall(files_type, fields, 4, NULL) : NULL;
    for (int i = 0; i < 4; i++) Py_XDECREF(fields[i]);
    return result;
}

/* A window's modes from its WRITE_SIZE rows: 1 found, 0 for the Python path, -1 error */
static int held_modes(const held_row *rows, Py_ssize_t count, double share, Py_ssize_t most,
                      int digits, PyObject *mode_type, PyObject **found) {
    if (digits < 0 || digits > 6) return 0;
    size_row *sizes = malloc((size_t)(count ? count : 1) * sizeof(size_row));
    if (!sizes) { PyErr_NoMemory(); return -1; }
    const int64_t exact = (int64_t)1 << 53;
    int64_t total = 0;
    int rc = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t moved = (int64_t)rows[i].second;
        if (moved < 0 || moved >= exact - total) goto done;
        sizes[i] = (size_row){rows[i].key, (int64_t)rows[i].first, moved, NULL, NULL, NULL};
        total += moved;
    }
    rc = choose_modes(sizes, count, total, share, most, digits, mode_type, found);
done:
    free(sizes);
    return rc;
}

static int tables_empty(PyObject *agg) {
    PyObject *attrs[4] = {S_ops, S_write_sizes, S_file_bytes_written, S_file_bytes_read};
    for (int i = 0; i < 4; i++) {
        PyObject *table = dict_attr(agg, attrs[i]);
        if (!table) return -1;
        Py_ssize_t size = PyDict_GET_SIZE(table);
        Py_DECREF(table);
        if (size) return 0;
    }
    return 1;
}

/* held_parts(agg, save, OpCount, SizeMode, FileSizes, share, most, digits) -> (ops, modes,
 * file sizes) as checkpoint_parts makes them from the settled tables (the save's written
 * files or the restore's read ones), or None when the settled path must: nothing held, the
 * tables not empty, a sum beyond int64 or modes the Python path chooses. */
static PyObject *held_parts(PyObject *self, PyObject *args) {
    PyObject *agg, *op_type, *mode_type, *files_type, *result = NULL;
    int save, digits;
    double share;
    Py_ssize_t most;
    if (!PyArg_ParseTuple(args, "OpOOOdni", &agg, &save, &op_type, &mode_type, &files_type,
                          &share, &most, &digits))
        return NULL;
    int empty = tables_empty(agg);
    PyObject *held = empty > 0 ? held_list(agg, 0) : NULL;
    if (empty <= 0 || !held || held == Py_None) {
        Py_XDECREF(held);
        return empty < 0 || (empty && !held) ? NULL : Py_NewRef(Py_None);
    }
    held_row *rows = NULL;
    Py_ssize_t count = merged_rows(held, &rows), starts[5] = {0, 0, 0, 0, 0};
    if (count < 0) {
        Py_DECREF(held);
        return count == -2 ? Py_NewRef(Py_None) : NULL;
    }
    for (Py_ssize_t i = 0; i < count; i++) starts[rows[i].kind + 1]++;
    for (int k = 0; k < 4; k++) starts[k + 1] += starts[k];
    int file_kind = save ? WRITE_FILE : READ_FILE;
    PyObject *modes = NULL, *ops = NULL, *file_sizes_obj = NULL;
    int chosen = held_modes(&rows[starts[WRITE_SIZE]], starts[WRITE_SIZE + 1] - starts[WRITE_SIZE],
                            share, most, digits, mode_type, &modes);
    if (chosen > 0 &&
        (ops = held_ops(&rows[starts[OPS]], starts[OPS + 1] - starts[OPS],
                        PyList_GET_ITEM(held, 0), op_type)) &&
        (file_sizes_obj = held_file_sizes(&rows[starts[file_kind]],
                                          starts[file_kind + 1] - starts[file_kind],
                                          files_type)))
        result = PyTuple_Pack(3, ops, modes, file_sizes_obj);
    else if (chosen == 0)
        result = Py_NewRef(Py_None);
    Py_XDECREF(modes); Py_XDECREF(ops); Py_XDECREF(file_sizes_obj);
    free(rows);
    Py_DECREF(held);
    return result;
}

/* Write sizes of held rows summed in C (exactly: 128 bits), one entry per distinct size, in
 * the order the sizes first came */
typedef struct {
    int64_t size;
    __int128 calls, moved;
    Py_ssize_t order; /* 0: unused */
} size_sum;

typedef struct {
    size_sum *slots;
    Py_ssize_t cap, used;
} size_sums;

static int size_sums_add(size_sums *t, int64_t size, int64_t calls, int64_t moved) {
    if ((t->used + 1) * 2 > t->cap) {
        Py_ssize_t cap = t->cap ? t->cap * 2 : 64;
        size_sum *bigger = calloc((size_t)cap, sizeof(size_sum));
        if (!bigger) return -1;
        for (Py_ssize_t i = 0; i < t->cap; i++) {
            if (!t->slots[i].order) continue;
            uint64_t slot = mix(WRITE_SIZE, 0, t->slots[i].size) & (uint64_t)(cap - 1);
            while (bigger[slot].order) slot = (slot + 1) & (uint64_t)(cap - 1);
            bigger[slot] = t->slots[i];
        }
        free(t->slots);
        t->slots = bigger;
        t->cap = cap;
    }
    uint64_t slot = mix(WRITE_SIZE, 0, size) & (uint64_t)(t->cap - 1);
    size_sum *e;
    while ((e = &t->slots[slot])->order && e->size != size)
        slot = (slot + 1) & (uint64_t)(t->cap - 1);
    if (!e->order) *e = (size_sum){size, 0, 0, ++t->used};
    e->calls += calls;
    e->moved += moved;
    return 0;
}

static int by_order(const void *a, const void *b) {
    const size_sum *x = a, *y = b;
    return x->order < y->order ? -1 : x->order > y->order;
}

/* The held sums into `into`, in the order their sizes first came */
static int add_size_sums(PyObject *into, size_sums *t) {
    Py_ssize_t n = 0;
    for (Py_ssize_t i = 0; i < t->cap; i++)
        if (t->slots[i].order) t->slots[n++] = t->slots[i];
    qsort(t->slots, (size_t)n, sizeof(size_sum), by_order);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *size = PyLong_FromLongLong(t->slots[i].size);
        PyObject *calls = from_wide(t->slots[i].calls), *moved = from_wide(t->slots[i].moved);
        int rc = size && calls && moved ? add_pair(into, size, calls, moved) : -1;
        Py_XDECREF(size); Py_XDECREF(calls); Py_XDECREF(moved);
        if (rc < 0) return -1;
    }
    return 0;
}

static int sum_held_sizes(PyObject *agg, size_sums *sums) {
    PyObject *held = held_list(agg, 0);
    if (!held) return -1;
    int rc = 0;
    for (Py_ssize_t at = 2; held != Py_None && at < PyList_GET_SIZE(held) && !rc; at++) {
        Py_ssize_t count;
        const held_row *rows = rows_of(held, at, &count);
        if (!rows) { rc = -1; break; }
        for (Py_ssize_t i = 0; i < count && !rc; i++)
            if (rows[i].kind == WRITE_SIZE &&
                size_sums_add(sums, rows[i].key, (int64_t)rows[i].first,
                              (int64_t)rows[i].second) < 0) {
                PyErr_NoMemory();
                rc = -1;
            }
    }
    Py_DECREF(held);
    return rc;
}

/* add_sizes(into, aggs): the aggregates' write sizes added into `into` (size -> [calls,
 * bytes]) without settling them: each value as add_pairs(into, [agg.write_sizes ...]) of
 * the settled tables leaves it; the keys of held sums come after the tables' own (the
 * summary's uses of `into` do not depend on its order) */
static PyObject *add_sizes(PyObject *self, PyObject *args) {
    PyObject *into, *aggs;
    if (!PyArg_ParseTuple(args, "O!O!", &PyDict_Type, &into, &PyList_Type, &aggs)) return NULL;
    size_sums sums = {NULL, 0, 0};
    int rc = 0;
    for (Py_ssize_t a = 0; a < PyList_GET_SIZE(aggs) && !rc; a++) {
        PyObject *agg = PyList_GET_ITEM(aggs, a), *table = dict_attr(agg, S_write_sizes);
        rc = !table || add_table_pairs(into, table) < 0 || sum_held_sizes(agg, &sums) < 0;
        Py_XDECREF(table);
    }
    if (!rc) rc = add_size_sums(into, &sums) < 0;
    free(sums.slots);
    return rc ? NULL : Py_NewRef(Py_None);
}
