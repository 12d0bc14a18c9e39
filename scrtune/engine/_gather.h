/* gather_rows: a process's I/O rows out of a batch's columns in one pass (stats._processes),
 * where nine numpy takes each walked the row indices again: a ninth of the loop thread's
 * aggregation on a DLIO stream. Included by _fastagg.c, after get_column. */

/* code read through a map as numpy's take reads it: a negative code counts from the end */
static inline int mapped(const int64_t *map, Py_ssize_t size, int64_t code, int64_t *out) {
    if (code < 0) code += size;
    if (code < 0 || code >= size) return -1;
    *out = map[code];
    return 0;
}

static int gather_into(const Py_buffer *in, Py_ssize_t columns_rows, Py_ssize_t names,
                       Py_ssize_t files, int64_t *out, Py_ssize_t count) {
    const int64_t *at = in[0].buf, *ts = in[1].buf, *dur = in[2].buf, *name = in[3].buf,
                  *file = in[4].buf, *size = in[5].buf, *calls = in[6].buf,
                  *name_map = in[7].buf, *file_map = in[8].buf;
    int64_t *o_ts = out, *o_end = out + count, *o_dur = out + 2 * count,
            *o_name = out + 3 * count, *o_file = out + 4 * count, *o_size = out + 5 * count,
            *o_calls = out + 6 * count;
    for (Py_ssize_t i = 0; i < count; i++) {
        int64_t row = at[i];
        if (row < 0 || row >= columns_rows) return -1;
        o_ts[i] = ts[row];
        o_dur[i] = dur[row];
        o_end[i] = (int64_t)((uint64_t)ts[row] + (uint64_t)dur[row]); /* wraps, as numpy */
        if (mapped(name_map, names, name[row], &o_name[i]) < 0 ||
            mapped(file_map, files, file[row], &o_file[i]) < 0)
            return -1;
        o_size[i] = size[row];
        o_calls[i] = calls[row];
    }
    return 0;
}

/* gather_rows(at, ts, dur, name, file, size, calls, name_map, file_map, out): out, int64 of
 * 7 x len(at) in C order, gets the rows `at` names: ts, ts + dur, dur, name_map[name],
 * file_map[file], size, calls (ioagg.ROW_FIELDS' order). */
static PyObject *gather_rows(PyObject *self, PyObject *args) {
    PyObject *objs[10];
    if (!PyArg_ParseTuple(args, "OOOOOOOOOO", &objs[0], &objs[1], &objs[2], &objs[3],
                          &objs[4], &objs[5], &objs[6], &objs[7], &objs[8], &objs[9]))
        return NULL;
    Py_buffer views[10];
    int got = 0, rc = 0;
    PyObject *result = NULL;
    for (; got < 10; got++) {
        /* the six columns as many rows as ts; out 7 x len(at), written */
        Py_ssize_t rows = got >= 2 && got <= 6 ? views[1].len / 8
                          : got == 9 ? 7 * (views[0].len / 8) : -1;
        if (get_column(objs[got], &views[got], 8, rows, got == 9 ? PyBUF_WRITABLE : 0) < 0)
            goto done;
    }
    Py_BEGIN_ALLOW_THREADS
    rc = gather_into(views, views[1].len / 8, views[7].len / 8, views[8].len / 8,
                     views[9].buf, views[0].len / 8);
    Py_END_ALLOW_THREADS
    if (rc < 0)
        PyErr_SetString(PyExc_IndexError, "gather_rows: a row index, name or file code out of "
                        "range");
    else
        result = Py_NewRef(Py_None);
done:
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    return result;
}
