/* The "launch" column, computed after the scan: for each GPU event, the earliest runtime ts
   of its correlation, through a correlation -> ts hash table (TimeTable). */
#pragma once
#include "ctx.h"

/* Correlation -> earliest runtime ts: open addressing, at least twice as many slots as runtime
   rows (only those: every slot's page is touched). */
typedef struct {
    int64_t key, ts;
} TimeSlot;

typedef struct {
    TimeSlot *slots;
    char *used;
    size_t mask;
} TimeTable;

static inline size_t corr_slot(const TimeTable *t, int64_t corr) {
    size_t j = (size_t)(((uint64_t)corr * 0x9E3779B97F4A7C15ull) >> 17) & t->mask;
    while (t->used[j] && t->slots[j].key != corr) j = (j + 1) & t->mask;
    return j;
}

/* Whether row i is a runtime call whose ts counts (role: the category answers). */
static inline int is_launch_source(Ctx *c, const char *role, size_t i) {
    const int32_t *cat = (const int32_t *)c->codes[D_CAT].p;
    const int64_t *dur = (const int64_t *)c->ints[I_DUR].p;
    return cat[i] && role[cat[i] - 1] == 1 && c->int_valid[I_CORR].p[i] && c->int_valid[I_TS].p[i] &&
           c->int_valid[I_DUR].p[i] && dur[i] >= 0;
}

static void launch_fill(Ctx *c, const char *role, TimeTable *t, int64_t *launch, char *valid) {
    size_t n = (size_t)c->rows_x;
    const int32_t *cat = (const int32_t *)c->codes[D_CAT].p;
    const int64_t *ts = (const int64_t *)c->ints[I_TS].p, *corr = (const int64_t *)c->ints[I_CORR].p;
    const char *corr_ok = c->int_valid[I_CORR].p, *stream_ok = c->int_valid[I_STREAM].p;
    for (size_t i = 0; i < n; i++) {
        if (!is_launch_source(c, role, i)) continue;
        size_t j = corr_slot(t, corr[i]);
        if (!t->used[j] || ts[i] < t->slots[j].ts) t->slots[j].ts = ts[i];
        t->used[j] = 1;
        t->slots[j].key = corr[i];
    }
    for (size_t i = 0; i < n; i++) {
        int r = cat[i] ? role[cat[i] - 1] : 0;
        size_t j = r == 2 && stream_ok[i] && corr_ok[i] ? corr_slot(t, corr[i]) : 0;
        valid[i] = r == 2 && stream_ok[i] && corr_ok[i] && t->used[j];
        launch[i] = valid[i] ? t->slots[j].ts : 0;
    }
}

/* "launch" / "launch_valid": for each GPU event (category answer 2) with a stream and a
   correlation, the earliest ts among the runtime events (answer 1) of that correlation whose
   dur is >= 0 (events with a negative dur are dropped later); kineto_events.events_frame
   states the same rule for the msgspec path. */
static int launch_times(Ctx *c, PyObject *out) {
    size_t n = (size_t)c->rows_x, sources = 0;
    const char *role = c->dicts[D_CAT].pass.p;
    for (size_t i = 0; i < n; i++) sources += (size_t)is_launch_source(c, role, i);
    TimeTable t = {NULL, NULL, 15};
    while (t.mask + 1 < 2 * sources) t.mask = t.mask * 2 + 1;
    t.slots = malloc((t.mask + 1) * sizeof(TimeSlot));
    t.used = calloc(t.mask + 1, 1);
    PyObject *launch = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)(n * 8));
    PyObject *valid = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)n);
    int rc = -1;
    if (!t.slots || !t.used) PyErr_NoMemory();
    else if (launch && valid) {
        if (n) launch_fill(c, role, &t, (int64_t *)PyBytes_AS_STRING(launch), PyBytes_AS_STRING(valid));
        rc = PyDict_SetItemString(out, "launch", launch) || PyDict_SetItemString(out, "launch_valid", valid);
    }
    free(t.slots);
    free(t.used);
    Py_XDECREF(launch);
    Py_XDECREF(valid);
    return rc;
}
