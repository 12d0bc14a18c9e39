/* redset's Reed-Solomon parity arithmetic as SCR v3.1.0 runs it (redset_rs_reduce_buffer_multadd,
 * CPU method): every received byte looked up in a premultiplied 256-entry table and XORed into
 * the parity block, one byte at a time, in C. scrtune/probe/arithmetic.py times it; Python's
 * nearest loop (bytes.translate, then a numpy XOR) allocates a block a call and ran at 0.3-0.6x
 * of this on one machine of the project's kind, 0.9x on another (issue 48's CI). */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *multadd(PyObject *self, PyObject *args) {
    Py_buffer table, data, parity;
    if (!PyArg_ParseTuple(args, "y*y*w*", &table, &data, &parity)) return NULL;
    PyObject *result = NULL;
    if (table.len != 256) {
        PyErr_SetString(PyExc_ValueError, "the table must hold 256 bytes");
    } else if (data.len != parity.len) {
        PyErr_SetString(PyExc_ValueError, "data and parity must be of one length");
    } else {
        const unsigned char *lookup = table.buf, *in = data.buf;
        unsigned char *out = parity.buf;
        Py_BEGIN_ALLOW_THREADS
        for (Py_ssize_t j = 0; j < data.len; j++) out[j] ^= lookup[in[j]];
        Py_END_ALLOW_THREADS
        result = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&table);
    PyBuffer_Release(&data);
    PyBuffer_Release(&parity);
    return result;
}

static PyMethodDef methods[] = {
    {"multadd", multadd, METH_VARARGS,
     "multadd(table, data, parity): parity[j] ^= table[data[j]] for every j"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_rsloop",
                                    "redset's RS parity loop, for timing it", -1, methods};

PyMODINIT_FUNC PyInit__rsloop(void) { return PyModule_Create(&module); }
