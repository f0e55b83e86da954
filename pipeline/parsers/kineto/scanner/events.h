/* One event's members dispatched by key (read_field, read_args), the event as a row (the row
   columns grow together; emit), and the loops over the traceEvents array and the document. */
#pragma once
#include "fields.h"
#include "keys.h"

static const char *read_args(Ctx *c, const char *p, Event *ev) {
    const char *end = c->end;
    if (p >= end || *p != '{') return fail(c, "args is not an object"), NULL;
    p = skip_ws_at(p + 1, end, c->indent + W_ARG);
    if (p < end && *p == '}') return p + 1;
    for (;;) {
        const char *k = NULL;
        size_t n = 0;
        int id, field;
        if (!(p = member_key(c, p, 1, &id, &k, &n))) return NULL;
        switch (id) {
            case K_STREAM:
                p = read_hot(c, p, &ev->val[I_STREAM], &ev->valid[I_STREAM], 1, &ev->invalid, &c->int_shape[I_STREAM]);
                break;
            case K_CORR: p = read_hot(c, p, &ev->val[I_CORR], &ev->valid[I_CORR], 0, NULL, &c->int_shape[I_CORR]); break;
            case K_EXT: p = read_hot(c, p, &ev->val[I_EXT], &ev->valid[I_EXT], 0, NULL, &c->int_shape[I_EXT]); break;
            case K_EXT_LEGACY:
                p = read_hot(c, p, &ev->ext_legacy, &ev->ext_legacy_valid, 0, NULL, &c->int_shape[N_INTS]);
                break;
            case K_DEVICE:
                p = read_hot(c, p, &ev->val[I_DEVICE], &ev->valid[I_DEVICE], 0, NULL, &c->int_shape[I_DEVICE]);
                break;
            default:
                if ((field = side_index(c, k, n)) >= 0) {
                    const char *s = p;
                    p = skip_value(c, p, c->side_decoded[field], 0, c->room_arg, &ev->invalid);
                    if (p && add_side(c, field, s, p)) return NULL;
                } else p = skip_member(c, p, 0, c->room_arg, &ev->invalid);
        }
        int more = p ? next_member(c, &p, c->indent + W_ARG) : -1;
        if (more <= 0) return more ? NULL : p;
    }
}

static const char *read_ph(Ctx *c, const char *p, Event *ev) {
    const char *end = c->end;
    if (p >= end || *p != '"') return fail(c, "ph is not a string"), NULL;
    unsigned char b = end - p >= 3 && p[2] == '"' ? (unsigned char)p[1] : 0;
    if (b >= 0x20 && b < 0x80 && b != '\\' && b != '"') { /* "X": one plain ASCII byte */
        ev->ph = (b == 'X' || b == 'M') ? b : 0;
        return p + 3;
    }
    Str s;
    const char *text;
    size_t len;
    if (!(p = scan_string(c, p + 1, &s)) || unescape(c, &s, &text, &len)) return NULL;
    if (s.high && !utf8_valid((const unsigned char *)s.s, s.n)) ev->invalid = 1;
    ev->ph = (len == 1 && (text[0] == 'X' || text[0] == 'M')) ? text[0] : 0;
    return p;
}

static const char *read_field(Ctx *c, const char *p, int id, Event *ev) {
    switch (id) {
        case K_PH: return read_ph(c, p, ev);
        case K_CAT: return read_text(c, p, D_CAT, 1, ev);
        case K_NAME: return read_text(c, p, D_NAME, 0, ev);
        case K_PID: return read_id(c, p, D_PID, ev);
        case K_TID: return read_id(c, p, D_TID, ev);
        case K_TS: return read_time(c, p, I_TS, ev);
        case K_DUR: return read_time(c, p, I_DUR, ev);
        case K_ARGS:
            if (ev->seen_args++) return fail(c, "duplicate args"), NULL;
            return read_args(c, p, ev);
        default: return skip_member(c, p, 0, c->room_member, &ev->invalid);
    }
}

/* Keep this event's side entries that its kind needs (field 0: metadata name; others: comm
   args of events whose name passed the name filter), with their row index set. */
static int keep_side(Ctx *c, Event *ev, int64_t row) {
    Side *side = (Side *)c->side.p;
    size_t n = c->side.len / sizeof(Side), out = ev->side_start;
    int comm = ev->ph == 'X' && c->dicts[D_NAME].pass.p[ev->code[D_NAME]];
    for (size_t i = ev->side_start; i < n; i++) {
        int meta_field = side[i].field == 0;
        if (ev->ph == 'X' && !meta_field && c->side_all[side[i].field]) {
            Side kept = side[i];
            kept.row = row;
            if (buf_put(&c->side_rows, &kept, sizeof(kept))) return -1;
        }
        if (!(ev->ph == 'M' ? meta_field : comm && !meta_field)) continue;
        side[out] = side[i];
        side[out++].row = row;
    }
    c->side.len = out * sizeof(Side);
    return 0;
}

/* A row column to exactly cap bytes, kept in a bytes object that becomes the result as it is
   (no copy of the columns at the end). */
static int col_resize(Buf *b, size_t cap) {
    if (!b->obj) b->obj = PyBytes_FromStringAndSize(NULL, (Py_ssize_t)cap);
    else if (_PyBytes_Resize(&b->obj, (Py_ssize_t)cap)) b->obj = NULL; /* it freed the object */
    if (!b->obj) {
        memset(b, 0, sizeof(*b)); /* p pointed into the object */
        return -1;
    }
    b->p = PyBytes_AS_STRING(b->obj);
    b->cap = cap;
    return 0;
}

/* The row columns grow together, so emit checks the room once per row. Past the first 4096
   rows, to the rows projected from the bytes read so far (+1/8): mostly one more resize, and
   no pages touched for rows that never come. */
static int grow_rows(Ctx *c, const char *p) {
    size_t rows = 4096;
    if (c->row_cap) {
        double read = (double)(p - c->start), all = (double)(c->end - c->start); /* read: 4096+ rows */
        double projected = (double)c->row_cap * (all / read) * 1.125;
        rows = c->row_cap + c->row_cap / 2;
        if (projected > (double)rows) rows = (size_t)projected;
    }
    int rc = 0;
    for (int d = 0; d < N_DICTS && !rc; d++) rc = col_resize(&c->codes[d], rows * 4);
    for (int i = 0; i < N_INTS && !rc; i++) rc = col_resize(&c->ints[i], rows * 8) || col_resize(&c->int_valid[i], rows);
    if (!rc) c->row_cap = rows;
    return rc;
}

/* A metadata event: its name, pid and tid codes (0: null, else 1 + code). */
static int emit_meta(Ctx *c, Event *ev) {
    static const int dicts[3] = {D_NAME, D_PID, D_TID};
    for (int i = 0; i < 3; i++) {
        int32_t stored = ev->code[dicts[i]] + 1;
        if (buf_put(&c->meta[i], &stored, 4)) return -1;
    }
    return keep_side(c, ev, c->rows_m++);
}

/* The event as a row (p: where the scan is, for grow_rows). */
static int emit(Ctx *c, Event *ev, const char *p) {
    if (ev->ph != 'X' && ev->ph != 'M') {
        c->side.len = ev->side_start * sizeof(Side);
        return 0;
    }
    if (ev->ph == 'X' && (ev->time_bad[0] || ev->time_bad[1]))
        return fail(c, "ts/dur not exactly convertible (exponent or beyond 2^53)");
    if (ev->code[D_NAME] == -2 && (ev->code[D_NAME] = dict_code(&c->dicts[D_NAME], "", 0)) < 0) return -1;
    if (ev->ph == 'M') return emit_meta(c, ev);
    if (!ev->valid[I_EXT] && ev->ext_legacy_valid) {
        ev->val[I_EXT] = ev->ext_legacy;
        ev->valid[I_EXT] = 1;
    }
    size_t row = (size_t)c->rows_x;
    if (row == c->row_cap && grow_rows(c, p)) return -1;
    for (int d = 0; d < N_DICTS; d++) {
        int32_t stored = ev->code[d] + 1; /* 0: null */
        memcpy(c->codes[d].p + row * 4, &stored, 4);
        c->codes[d].len += 4;
    }
    for (int i = 0; i < N_INTS; i++) {
        int64_t v = ev->valid[i] ? ev->val[i] : 0;
        memcpy(c->ints[i].p + row * 8, &v, 8);
        c->ints[i].len += 8;
        c->int_valid[i].p[row] = (char)ev->valid[i];
        c->int_valid[i].len++;
    }
    return keep_side(c, ev, c->rows_x++);
}

static const char *read_event(Ctx *c, const char *p) {
    const char *end = c->end;
    Event ev; /* no memset: val and ext_legacy are read only where their valid flag is set */
    ev.ph = ev.ext_legacy_valid = ev.seen_args = ev.invalid = 0;
    ev.time_bad[0] = ev.time_bad[1] = 0;
    for (int i = 0; i < N_INTS; i++) ev.valid[i] = 0;
    for (int d = 0; d < N_DICTS; d++) ev.code[d] = -1;
    ev.code[D_NAME] = -2; /* absent: "" */
    ev.side_start = c->side.len / sizeof(Side);
    if (p >= end || *p != '{') return fail(c, "event is not an object"), NULL;
    p = skip_ws_at(p + 1, end, c->indent + W_MEMBER);
    if (p < end && *p == '}') p++;
    else
        for (;;) {
            const char *k;
            size_t n;
            int id;
            if (!(p = member_key(c, p, 0, &id, &k, &n)) || !(p = read_field(c, p, id, &ev))) return NULL;
            int more = next_member(c, &p, c->indent + W_MEMBER);
            if (more < 0) return NULL;
            if (!more) break;
        }
    if (ev.invalid) {
        PyObject *i = PyLong_FromLongLong(c->events);
        int rc = i ? PyList_Append(c->invalid_events, i) : -1;
        Py_XDECREF(i);
        if (rc) return NULL;
    }
    if (emit(c, &ev, p)) return NULL;
    c->events++;
    return p;
}

/* The events array at p; returns the position after it. */
static const char *scan_array(Ctx *c, const char *p) {
    const char *end = c->end;
    if (p >= end || *p != '[') return fail(c, "traceEvents is not an array"), NULL;
    p = skip_ws_at(p + 1, end, c->indent + W_EVENT);
    if (p < end && *p == ']') p++;
    else
        for (;;) {
            if (!(p = read_event(c, p))) return NULL;
            p = skip_ws_at(p, end, c->indent + W_EVENTS_END);
            if (p < end && *p == ']') return p + 1;
            if (p >= end || *p != ',') return fail(c, "expected ',' or ']'"), NULL;
            p = skip_ws_at(p + 1, end, c->indent + W_EVENT);
        }
    return p;
}

/* The top-level object: traceEvents scanned, every other member's span recorded. */
static const char *scan_object(Ctx *c, const char *p) {
    const char *end = c->end;
    int seen = 0;
    p = skip_ws(p + 1, end);
    if (p < end && *p == '}') return p + 1;
    for (;;) {
        const char *member = p, *k;
        size_t n;
        if (!(p = read_key(c, p, &k, &n))) return NULL;
        if (key_is(k, n, "traceEvents")) {
            if (seen++) return fail(c, "duplicate traceEvents"), NULL;
            p = scan_array(c, p);
        } else {
            int unused = 0;
            if ((p = skip_value(c, p, 0, 0, c->room_top, &unused))) {
                int64_t span[2] = {member - c->start, p - c->start};
                if (buf_put(&c->top, span, sizeof(span))) return NULL;
            }
        }
        int more = p ? next_member(c, &p, c->indent + W_TOP) : -1;
        if (more <= 0) return more ? NULL : p;
    }
}

/* The levels left below each place a value is skipped: the document's top level is level 1,
   events are level 3 in an object (2 in a bare array), their args one level deeper. */
static void set_rooms(Ctx *c, int event_level) {
    c->room_top = c->max_depth - 1;
    c->room_member = c->max_depth - event_level;
    c->room_arg = c->max_depth - event_level - 1;
}

static int scan_document(Ctx *c) {
    const char *p = skip_ws(c->start, c->end);
    int object = p < c->end && *p == '{';
    set_rooms(c, object ? 3 : 2);
    if (object) p = scan_object(c, p);
    else p = scan_array(c, p);
    if (!p) return -1;
    if (skip_ws(p, c->end) != c->end) return fail(c, "trailing data");
    return 0;
}
