/* The state of one scan (Ctx): the input, the dictionaries and row columns being filled, the
   side keys, the predicted indentation and number shapes, and the first error (fail). */
#pragma once
#include "dict.h"

enum { D_CAT, D_NAME, D_PID, D_TID, N_DICTS };
enum { I_TS, I_DUR, I_STREAM, I_CORR, I_EXT, I_DEVICE, N_INTS };
static const char *DICT_NAMES[N_DICTS] = {"cat", "name", "pid", "tid"};
static const char *INT_NAMES[N_INTS] = {"ts", "dur", "stream", "correlation", "external_id", "device"};

#define MAX_SIDE_KEYS 32

/* Places whose indentation skip_indent predicts: each place, then its closing bracket; skipped
   values by depth (the deeper ones share the last pair). */
enum { W_TOP, W_TOP_END, W_EVENT, W_EVENTS_END, W_MEMBER, W_MEMBER_END, W_ARG, W_ARG_END, W_VALUE, N_INDENT = W_VALUE + 2 * 8 };

typedef struct {
    int64_t row, field, start, end, event;
} Side;

typedef struct {
    const char *start, *end;
    const char *err;
    Dict dicts[N_DICTS];
    Buf codes[N_DICTS], ints[N_INTS], int_valid[N_INTS]; /* complete events */
    Buf meta[3];                                        /* metadata events: name, pid, tid codes */
    Buf top; /* int64 (start, end) of each top-level member other than traceEvents */
    Buf scratch, side; /* side: Side entries */
    Buf side_rows;     /* Side entries of side_all fields of every complete event, packed int64 */
    PyObject *invalid_events;
    Py_ssize_t n_side_keys;
    const char *side_key[MAX_SIDE_KEYS];
    Py_ssize_t side_len[MAX_SIDE_KEYS];
    int side_decoded[MAX_SIDE_KEYS];
    int side_all[MAX_SIDE_KEYS]; /* kept for every complete event, into side_rows */
    uint64_t side_sig; /* bit side_sig(key) set for each side key */
    int64_t rows_x, rows_m, events;
    int max_depth;      /* arrays/objects nested deeper decline the document (kineto/limits.py) */
    size_t max_int_len; /* msgspec refuses an integer literal longer than this (sign included) */
    int room_top, room_member, room_arg; /* levels left for a top-level member, an event member, an arg */
    size_t row_cap; /* rows the codes, ints and int_valid buffers all hold */
    unsigned char indent[N_INDENT]; /* see skip_indent */
    unsigned char time_shape[2][2], int_shape[N_INTS + 1]; /* see same_shape; [N_INTS]: "external id" */
} Ctx;

static int fail(Ctx *c, const char *why) {
    if (!c->err) c->err = why;
    return -1;
}
