/* Python tables as ioagg.IoAgg keeps them: pairs and counts added with Python ints (unbounded,
 * as in the reference). Included by _fastagg.c. */

/* obj.attr += value (Python ints: unbounded, as in the reference) */
static int add_attr(PyObject *obj, PyObject *attr, PyObject *value) {
    PyObject *old = PyObject_GetAttr(obj, attr);
    if (!old) return -1;
    PyObject *sum = PyNumber_Add(old, value);
    Py_DECREF(old);
    if (!sum) return -1;
    int rc = PyObject_SetAttr(obj, attr, sum);
    Py_DECREF(sum);
    return rc;
}

/* table[key] = [first, second] for a key not in the table (one lookup, not two) */
static int set_pair(PyObject *table, PyObject *key, PyObject *first, PyObject *second) {
    PyObject *pair = PyList_New(2);
    if (!pair) return -1;
    Py_INCREF(first); PyList_SET_ITEM(pair, 0, first);
    Py_INCREF(second); PyList_SET_ITEM(pair, 1, second);
    int rc = PyDict_SetItem(table, key, pair);
    Py_DECREF(pair);
    return rc;
}

/* table[key] = [first, second], or adds them to the pair already there */
static int add_pair(PyObject *table, PyObject *key, PyObject *first, PyObject *second) {
    PyObject *slot = PyDict_GetItemWithError(table, key);
    if (!slot) return PyErr_Occurred() ? -1 : set_pair(table, key, first, second);
    if (!PyList_Check(slot) || PyList_GET_SIZE(slot) < 2) {
        PyErr_SetString(PyExc_IndexError, "an aggregate pair is not a list of two");
        return -1;
    }
    PyObject *values[2] = {first, second};
    for (int i = 0; i < 2; i++) {
        PyObject *sum = PyNumber_Add(PyList_GET_ITEM(slot, i), values[i]);
        if (!sum) return -1;
        PyList_SetItem(slot, i, sum); /* steals sum, drops the old item */
    }
    return 0;
}

/* every key -> [first, second] of `table` added into `into` (add_pair each) */
static int add_table_pairs(PyObject *into, PyObject *table) {
    PyObject *key, *pair;
    Py_ssize_t pos = 0;
    while (PyDict_Next(table, &pos, &key, &pair)) {
        if (!PyList_Check(pair) || PyList_GET_SIZE(pair) < 2) {
            PyErr_SetString(PyExc_IndexError, "an aggregate pair is not a list of two");
            return -1;
        }
        if (add_pair(into, key, PyList_GET_ITEM(pair, 0), PyList_GET_ITEM(pair, 1)) < 0)
            return -1;
    }
    return 0;
}

/* table[key] = table.get(key, 0) + value */
static int add_count(PyObject *table, PyObject *key, PyObject *value) {
    PyObject *old = PyDict_GetItemWithError(table, key);
    if (!old) {
        if (PyErr_Occurred()) return -1;
        return PyDict_SetItem(table, key, value);
    }
    PyObject *sum = PyNumber_Add(old, value);
    if (!sum) return -1;
    int rc = PyDict_SetItem(table, key, sum);
    Py_DECREF(sum);
    return rc;
}
