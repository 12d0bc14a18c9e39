/* windows.place's pass in C, for _fastagg.c (included there once). Python reference:
 * windows.place_py, which tests hold this to.
 *
 * place(start, end, by_name, step, epoch, held) -> (kept, step, epoch, absorbed)
 *
 * Windows 0..held-1 are the timeline's open ones (objects, with I/O); the rest are a batch's
 * new regions, not yet objects. In (start, then longest first, then given) order, each window
 * inside the last kept one is absorbed by it (its step and epoch fill the outer's when those
 * are unknown), except that a driver (marked by name only) around a checkpoint-category window
 * is dropped; any other window is kept. Returns the kept windows' indices in order, their
 * steps and epochs after absorbing, and (inner, outer) pairs for held windows absorbed by a
 * kept one, in order: their I/O is added in Python. Most new windows are nested regions
 * absorbed at once: they never become objects. */
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct {
    const int64_t *start, *end;
} place_keys;

static const place_keys *sort_keys; /* qsort has no context argument: set for each sort */

static int by_start_then_longest(const void *a, const void *b) {
    Py_ssize_t x = *(const Py_ssize_t *)a, y = *(const Py_ssize_t *)b;
    const int64_t *start = sort_keys->start, *end = sort_keys->end;
    if (start[x] != start[y]) return start[x] < start[y] ? -1 : 1;
    if (end[x] != end[y]) return end[x] > end[y] ? -1 : 1;
    return x < y ? -1 : x > y; /* as a stable sort leaves them */
}

/* The pass over `order`; `kept` gets the stack of kept windows, `absorbed` (inner, outer)
 * pairs whose outer is kept. step and epoch are updated in place. Returns the number kept,
 * or -1 when memory runs out. */
static Py_ssize_t place_pass(const Py_ssize_t *order, Py_ssize_t count, const int64_t *end,
                             const unsigned char *by_name, int64_t *step, int64_t *epoch,
                             Py_ssize_t held, Py_ssize_t *kept, Py_ssize_t *absorbed,
                             Py_ssize_t *pairs) {
    Py_ssize_t top = 0;
    *pairs = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t w = order[i];
        if (top && end[w] <= end[kept[top - 1]] && by_name[kept[top - 1]] && !by_name[w])
            top--; /* a driver around checkpoints: they are the checkpoints */
        if (top && end[w] <= end[kept[top - 1]]) {
            Py_ssize_t outer = kept[top - 1];
            if (step[outer] < 0) step[outer] = step[w];
            if (epoch[outer] < 0) epoch[outer] = epoch[w];
            if (w < held) {
                absorbed[2 * *pairs] = w;
                absorbed[2 * *pairs + 1] = outer;
                ++*pairs;
            }
            continue;
        }
        kept[top++] = w;
    }
    /* a driver dropped after absorbing takes what it absorbed with it */
    unsigned char *stays = calloc((size_t)(count ? count : 1), 1);
    if (!stays) return -1;
    for (Py_ssize_t i = 0; i < top; i++) stays[kept[i]] = 1;
    Py_ssize_t left = 0;
    for (Py_ssize_t i = 0; i < *pairs; i++) {
        if (!stays[absorbed[2 * i + 1]]) continue;
        absorbed[2 * left] = absorbed[2 * i];
        absorbed[2 * left + 1] = absorbed[2 * i + 1];
        left++;
    }
    *pairs = left;
    free(stays);
    return top;
}

static PyObject *int64_array(const Py_ssize_t *values, Py_ssize_t count, const int64_t *from) {
    PyObject *out = PyBytes_FromStringAndSize(NULL, count * (Py_ssize_t)sizeof(int64_t));
    if (!out) return NULL;
    int64_t *at = (int64_t *)PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < count; i++) at[i] = from ? from[values[i]] : (int64_t)values[i];
    return out;
}

static PyObject *place(PyObject *self, PyObject *args) {
    PyObject *objs[5];
    Py_ssize_t held;
    if (!PyArg_ParseTuple(args, "OOOOOn", &objs[0], &objs[1], &objs[2], &objs[3], &objs[4],
                          &held))
        return NULL;
    Py_buffer views[5];
    int got = 0;
    PyObject *result = NULL;
    Py_ssize_t *order = NULL, *kept = NULL, *absorbed = NULL;
    int64_t *step = NULL, *epoch = NULL;
    for (; got < 5; got++)
        if (get_column(objs[got], &views[got], got == 2 ? 1 : 8,
                       got ? views[0].len / 8 : -1, 0) < 0)
            goto done;
    Py_ssize_t count = views[0].len / 8;
    if (held < 0 || held > count) {
        PyErr_SetString(PyExc_ValueError, "place: more held windows than windows");
        goto done;
    }
    size_t cells = (size_t)(count ? count : 1);
    order = malloc(cells * sizeof(Py_ssize_t));
    kept = malloc(cells * sizeof(Py_ssize_t));
    absorbed = malloc(2 * cells * sizeof(Py_ssize_t));
    step = malloc(cells * sizeof(int64_t));
    epoch = malloc(cells * sizeof(int64_t));
    if (!order || !kept || !absorbed || !step || !epoch) { PyErr_NoMemory(); goto done; }
    memcpy(step, views[3].buf, (size_t)count * sizeof(int64_t));
    memcpy(epoch, views[4].buf, (size_t)count * sizeof(int64_t));
    for (Py_ssize_t i = 0; i < count; i++) order[i] = i;
    place_keys keys = {views[0].buf, views[1].buf};
    sort_keys = &keys; /* the GIL is held: no other sort runs meanwhile */
    qsort(order, (size_t)count, sizeof(Py_ssize_t), by_start_then_longest);
    Py_ssize_t pairs, top = place_pass(order, count, views[1].buf, views[2].buf, step, epoch,
                                       held, kept, absorbed, &pairs);
    if (top < 0) { PyErr_NoMemory(); goto done; }
    PyObject *parts[4] = {int64_array(kept, top, NULL), int64_array(kept, top, step),
                          int64_array(kept, top, epoch), int64_array(absorbed, 2 * pairs, NULL)};
    if (parts[0] && parts[1] && parts[2] && parts[3])
        result = PyTuple_Pack(4, parts[0], parts[1], parts[2], parts[3]);
    for (int i = 0; i < 4; i++) Py_XDECREF(parts[i]);
done:
    free(order); free(kept); free(absorbed); free(step); free(epoch);
    for (int i = 0; i < got; i++) PyBuffer_Release(&views[i]);
    return result;
}
