/* The string dictionaries (cat, name, pid, tid): each unique string gets a code, an entry in
   a Python list, and, for names and categories, one answer of the caller's filter. */
#pragma once
#include "bytes.h"

/* Interned strings: open addressing on a 64-bit hash; codes index `list`. */
typedef struct {
    uint64_t hash;
    char *key;
    size_t len;
    int32_t code;
    int plain; /* printable ASCII without '"' and '\\': the JSON text of the string is the string */
} Slot;

typedef struct {
    Slot *slots;
    size_t mask, count;
    PyObject *list;
    PyObject *filter; /* called once per new string (names, categories); NULL: none */
    Buf pass;         /* one byte per code: the filter's answer, a small int */
    const char *last_key; /* the last code returned: cat, pid, tid mostly repeat the previous event's */
    size_t last_len;
    int32_t last_code;
    int last_plain;
    const char *num_key; /* the last pid/tid code read from a plain unsigned integer */
    size_t num_len;
    int32_t num_code;
} Dict;

static int dict_init(Dict *d) {
    d->mask = 255;
    d->count = 0;
    d->last_key = d->num_key = NULL;
    d->slots = calloc(d->mask + 1, sizeof(Slot));
    d->list = PyList_New(0);
    memset(&d->pass, 0, sizeof(Buf));
    if (!d->slots || !d->list) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void dict_free(Dict *d) {
    if (d->slots) {
        for (size_t i = 0; i <= d->mask; i++) free(d->slots[i].key);
        free(d->slots);
    }
    Py_XDECREF(d->list);
    free(d->pass.p);
}

static int dict_grow(Dict *d) {
    size_t mask = d->mask * 2 + 1;
    Slot *slots = calloc(mask + 1, sizeof(Slot));
    if (!slots) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i <= d->mask; i++) {
        if (!d->slots[i].key) continue;
        size_t j = d->slots[i].hash & mask;
        while (slots[j].key) j = (j + 1) & mask;
        slots[j] = d->slots[i];
    }
    free(d->slots);
    d->slots = slots;
    d->mask = mask;
    return 0;
}

static int filter_answer(PyObject *answer) {
    long v = answer ? PyLong_AsLong(answer) : -1;
    if (v == -1 && (!answer || PyErr_Occurred())) return -1;
    if (v < 0 || v > 127) {
        PyErr_SetString(PyExc_ValueError, "a dictionary filter must answer an int in 0..127");
        return -1;
    }
    return (int)v;
}

/* Code of the string s[0:n] (UTF-8, invalid bytes become U+FFFD), added when new; -1 on error. */
static int32_t dict_code(Dict *d, const char *s, size_t n) {
    if (d->last_key && d->last_len == n && same_bytes(d->last_key, s, n)) return d->last_code;
    uint64_t h = hash_bytes(s, n);
    size_t j = h & d->mask;
    while (d->slots[j].key) {
        Slot *slot = &d->slots[j];
        if (slot->hash == h && slot->len == n && same_bytes(slot->key, s, n)) {
            d->last_key = slot->key; /* slots move when the table grows, their keys do not */
            d->last_len = n;
            d->last_plain = slot->plain;
            return d->last_code = slot->code;
        }
        j = (j + 1) & d->mask;
    }
    PyObject *text = PyUnicode_DecodeUTF8(s, (Py_ssize_t)n, "replace");
    if (!text) return -1;
    int rc = PyList_Append(d->list, text);
    if (rc == 0 && d->filter) {
        PyObject *answer = PyObject_CallOneArg(d->filter, text);
        int pass = filter_answer(answer);
        Py_XDECREF(answer);
        char byte = (char)pass;
        rc = pass < 0 ? -1 : buf_put(&d->pass, &byte, 1);
    }
    Py_DECREF(text);
    char *key = malloc(n ? n : 1);
    if (rc || !key) {
        free(key);
        if (!PyErr_Occurred()) PyErr_NoMemory();
        return -1;
    }
    memcpy(key, s, n);
    Slot *slot = &d->slots[j];
    slot->hash = h;
    slot->key = key;
    slot->len = n;
    slot->code = (int32_t)d->count++;
    slot->plain = 1;
    for (size_t i = 0; i < n; i++) slot->plain &= s[i] >= 0x20 && s[i] < 0x7F && s[i] != '"' && s[i] != '\\';
    d->last_key = key;
    d->last_len = n;
    d->last_plain = slot->plain;
    d->last_code = slot->code;
    int32_t code = slot->code;
    if (d->count * 2 > d->mask && dict_grow(d)) return -1;
    return code;
}

/* The code of the JSON string at p (at its opening quote) when it is the dictionary's last
   string written plainly, else -1; the string then ends at p + 2 + d->last_len. The scan is a
   chain of positions, each computed from the bytes at the previous one: here the next
   position comes from the cached length, and the bytes only decide a (predicted) branch. */
static inline int32_t dict_repeat(const Dict *d, const char *p, const char *end) {
    size_t n = d->last_len;
    if (d->last_key && d->last_plain && (size_t)(end - p) > n + 1 && p[n + 1] == '"' && same_bytes(p + 1, d->last_key, n))
        return d->last_code;
    return -1;
}
