/* One-pass scanner of a Kineto `traceEvents` JSON array into columns (no per-event objects).

scan(buffer, side_keys, name_filter, cat_filter, limits) -> dict. Complete (ph "X") events become
rows: cat/name/pid/tid as int32 codes into lists of unique strings ("<dict>_values"; code 0
is null, else 1 + index; pid/tid numbers become their decimal text); ts/dur as exact int64 ns
(see to_ns); stream/correlation/external_id/device as int64; each int column has a
"<col>_valid" byte per row. Metadata (ph "M") events become "meta_name"/"meta_pid"/"meta_tid"
codes. The rare args named in `side_keys` (tuple of (key bytes, decoded)) are returned as
(row, field, start, end, event) byte ranges of their raw JSON value; Python decodes those
few. A side key given as (key, decoded, True) is also kept for every complete event, as the
same five int64 per entry packed in "side_rows" (the op args: no Python object per event). `name_filter(name)` and `cat_filter(cat)` are called once per unique name / category,
in code order, and answer a small int ("name_answers" / "cat_answers", one byte per code):
comm args are kept only for events whose name answers non-zero, and "launch" (see
launch_times) takes categories answering 1 as runtime calls and 2 as GPU events.

Anything the scanner does not reproduce exactly (malformed JSON, unexpected types, times
it cannot convert exactly) raises ValueError: the caller falls back to the msgspec path.
UTF-8 is validated only where msgspec decodes a string (so the invalid_utf8 flag matches);
events holding invalid UTF-8 there are listed in "invalid_utf8_events".
`limits` is (max_depth, max_int_len) from kineto/limits.py: arrays/objects nested deeper than
max_depth (the top level is level 1), and where msgspec decodes a value an integer literal
longer than max_int_len or a number beyond double range, raise ValueError too (the msgspec
path rejects the same documents and words the error).

Speed: strings, whitespace and digit runs are scanned 16 bytes at a time (SSE2, else an exact
SWAR fallback); known keys are recognised from their raw bytes (an escaped spelling takes the
general path and still matches); each dictionary remembers its last hit; row columns grow
together inside the bytes objects returned. None of this changes what is accepted or returned.

Layout: one translation unit, so the compiler inlines across the parts as within one file. The
parts are headers, each included once below, in the order they build on each other: bytes.h
(buffers, loads, hash), dict.h (string dictionaries), ctx.h (the scan state), scan16.h (16-byte
class scans: strings, whitespace, digits), json_string.h and json_value.h (lexing), fields.h
(one field's value), keys.h (object members), events.h (an event's members, rows, the array and
document loops), launch.h (the launch column). This file turns the scan into the result dict
and holds the module.
*/
#pragma GCC optimize("O3") /* pyproject builds with -O2; O3 measured ~13% faster here */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

/* Keep this order: GCC's inlining and cloning choices follow the order of definitions, and this
   one gives the machine code of the scanner as it was in one file (scan16.h before dict.h, for
   one, changes the clones of skip_value in the SWAR build). */
#include "bytes.h"
#include "dict.h"
#include "ctx.h"
#include "scan16.h"
#include "json_string.h"
#include "json_value.h"
#include "fields.h"
#include "keys.h"
#include "events.h"
#include "launch.h"

static int set_bytes(PyObject *out, const char *key, Buf *b) {
    PyObject *v = b->obj;
    if (v) { /* a row column: the object itself, cut to its length */
        Py_ssize_t len = (Py_ssize_t)b->len;
        memset(b, 0, sizeof(*b));
        if (_PyBytes_Resize(&v, len)) v = NULL;
    } else {
        v = PyBytes_FromStringAndSize(b->p ? b->p : "", (Py_ssize_t)b->len);
        buf_free(b);
    }
    if (!v) return -1;
    int rc = PyDict_SetItemString(out, key, v);
    Py_DECREF(v);
    return rc;
}

/* Side entries as (row, field, start, end, event) tuples. */
static PyObject *side_list(Ctx *c) {
    size_t n = c->side.len / sizeof(Side);
    PyObject *list = PyList_New((Py_ssize_t)n);
    Side *side = (Side *)c->side.p;
    for (size_t i = 0; list && i < n; i++) {
        PyObject *t = Py_BuildValue("(LLLLL)", (long long)side[i].row, (long long)side[i].field,
                                    (long long)side[i].start, (long long)side[i].end, (long long)side[i].event);
        if (!t) Py_CLEAR(list);
        else PyList_SET_ITEM(list, (Py_ssize_t)i, t);
    }
    return list;
}

static PyObject *result(Ctx *c) {
    PyObject *out = PyDict_New();
    if (!out) return NULL;
    char key[64];
    int rc = launch_times(c, out); /* first: it reads the row columns that follow move into out */
    for (int d = 0; d < N_DICTS && !rc; d++) {
        rc = set_bytes(out, DICT_NAMES[d], &c->codes[d]);
        snprintf(key, sizeof(key), "%s_values", DICT_NAMES[d]);
        rc = rc || PyDict_SetItemString(out, key, c->dicts[d].list);
        snprintf(key, sizeof(key), "%s_answers", DICT_NAMES[d]);
        rc = rc || set_bytes(out, key, &c->dicts[d].pass);
    }
    static const char *META_NAMES[3] = {"meta_name", "meta_pid", "meta_tid"};
    for (int i = 0; i < 3 && !rc; i++) rc = set_bytes(out, META_NAMES[i], &c->meta[i]);
    for (int i = 0; i < N_INTS && !rc; i++) {
        snprintf(key, sizeof(key), "%s_valid", INT_NAMES[i]);
        rc = set_bytes(out, INT_NAMES[i], &c->ints[i]) || set_bytes(out, key, &c->int_valid[i]);
    }
    PyObject *side = side_list(c);
    rc = rc || !side || set_bytes(out, "top", &c->top) || set_bytes(out, "side_rows", &c->side_rows) || PyDict_SetItemString(out, "side", side) ||
         PyDict_SetItemString(out, "invalid_utf8_events", c->invalid_events);
    Py_XDECREF(side);
    PyObject *rows = Py_BuildValue("(LLL)", (long long)c->rows_x, (long long)c->rows_m, (long long)c->events);
    rc = rc || !rows || PyDict_SetItemString(out, "counts", rows);
    Py_XDECREF(rows);
    if (rc) Py_CLEAR(out);
    return out;
}

static void ctx_free(Ctx *c) {
    for (int d = 0; d < N_DICTS; d++) {
        dict_free(&c->dicts[d]);
        buf_free(&c->codes[d]);
    }
    for (int i = 0; i < N_INTS; i++) {
        buf_free(&c->ints[i]);
        buf_free(&c->int_valid[i]);
    }
    free(c->top.p);
    for (int i = 0; i < 3; i++) buf_free(&c->meta[i]);
    free(c->scratch.p);
    free(c->side.p);
    free(c->side_rows.p);
    Py_XDECREF(c->invalid_events);
}

static int read_side_keys(Ctx *c, PyObject *keys) {
    if (!PyTuple_Check(keys) || PyTuple_GET_SIZE(keys) > MAX_SIDE_KEYS) {
        PyErr_SetString(PyExc_TypeError, "side_keys must be a tuple of (bytes, bool), at most 32");
        return -1;
    }
    c->n_side_keys = PyTuple_GET_SIZE(keys);
    for (Py_ssize_t i = 0; i < c->n_side_keys; i++) {
        PyObject *item = PyTuple_GET_ITEM(keys, i);
        char *k;
        int decoded;
        int all = 0;
        if (!PyArg_ParseTuple(item, "y#p|p", &k, &c->side_len[i], &decoded, &all)) return -1;
        c->side_key[i] = k;
        c->side_decoded[i] = decoded;
        c->side_all[i] = all;
        if (c->side_len[i]) c->side_sig |= 1ull << side_sig(k, (size_t)c->side_len[i]);
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *keys, *name_filter, *cat_filter;
    int max_depth;
    Py_ssize_t max_int_len;
    if (!PyArg_ParseTuple(args, "y*O!OO(in):scan", &view, &PyTuple_Type, &keys, &name_filter, &cat_filter, &max_depth,
                          &max_int_len))
        return NULL;
    if (max_depth < 4 || max_int_len < 1) { /* the events and their args are 4 levels deep */
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_TypeError, "limits must be (max_depth >= 4, max_int_len >= 1)");
        return NULL;
    }
    Ctx c;
    memset(&c, 0, sizeof(c));
    c.max_depth = max_depth;
    c.max_int_len = (size_t)max_int_len;
    c.start = view.buf;
    c.end = c.start + view.len;
    c.invalid_events = PyList_New(0);
    PyObject *out = NULL;
    int ok = c.invalid_events && !read_side_keys(&c, keys);
    for (int d = 0; d < N_DICTS && ok; d++) ok = !dict_init(&c.dicts[d]);
    if (ok) {
        c.dicts[D_NAME].filter = name_filter;
        c.dicts[D_CAT].filter = cat_filter;
    }
    if (ok && scan_document(&c) == 0) out = result(&c);
    else if (ok && !PyErr_Occurred())
        PyErr_Format(PyExc_ValueError, "%s (event %lld)", c.err ? c.err : "scan failed", (long long)c.events);
    ctx_free(&c);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef METHODS[] = {
    {"scan", scan, METH_VARARGS,
     "scan(buffer, side_keys, name_filter, cat_filter, (max_depth, max_int_len)) -> dict of columns (see module doc)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_kineto_scan", "One-pass Kineto traceEvents scanner.",
                                    -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kineto_scan(void) { return PyModule_Create(&MODULE); }
