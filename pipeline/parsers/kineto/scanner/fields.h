/* One event's field values read into its Event: cat/name (dictionary strings), pid/tid,
   ts/dur (exact ns), the hot int args, and the side args (byte ranges of their raw JSON). */
#pragma once
#include "json_value.h"

/* What one event accumulates before it becomes a row. */
typedef struct {
    int ph; /* 0 other/absent, 'X', 'M' */
    int32_t code[N_DICTS];
    int64_t val[N_INTS];
    int valid[N_INTS];
    int time_bad[2];
    int64_t ext_legacy;
    int ext_legacy_valid, seen_args, invalid;
    size_t side_start;
} Event;

/* A dictionary string value (p at the opening quote); code -1 for JSON null when nullable. */
static const char *read_text(Ctx *c, const char *p, int d, int nullable, Event *ev) {
    const char *end = c->end;
    if (nullable && is_null(p, end)) {
        ev->code[d] = -1;
        return p + 4;
    }
    if (p >= end || *p != '"') return fail(c, "expected a string"), NULL;
    int32_t code = dict_repeat(&c->dicts[d], p, end);
    if (code >= 0) { /* "cpu_op" again */
        ev->code[d] = code;
        return p + 2 + c->dicts[d].last_len;
    }
    Str s;
    const char *text;
    size_t n;
    if (!(p = scan_string(c, p + 1, &s)) || unescape(c, &s, &text, &n)) return NULL;
    if (s.high && !utf8_valid((const unsigned char *)s.s, s.n)) ev->invalid = 1;
    code = dict_code(&c->dicts[d], text, n);
    if (code < 0) return NULL;
    ev->code[d] = code;
    return p;
}

/* A string pid/tid that Polars would read as a different integer text ("012", "1e3"). */
static int numeric_looking(const char *s, size_t n) {
    if (!n) return 0;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789+-.eE", s[i]) || s[i] == 0) return 0;
    const char *d = s[0] == '-' ? s + 1 : s;
    size_t dn = n - (size_t)(d - s);
    int canonical = dn > 0 && (d[0] != '0' || (dn == 1 && d == s));
    for (size_t i = 0; canonical && i < dn; i++) canonical = d[i] >= '0' && d[i] <= '9';
    return !canonical;
}

/* pid/tid: int (as its text), string or null. */
static const char *read_id(Ctx *c, const char *p, int d, Event *ev) {
    const char *end = c->end;
    Dict *dict = &c->dicts[d];
    size_t len = dict->num_len;
    if (dict->num_key && (size_t)(end - p) > len && !is_digit(p[len]) && p[len] != '.' && (p[len] | 0x20) != 'e' &&
        same_bytes(p, dict->num_key, len)) { /* the last one again (see dict_repeat) */
        ev->code[d] = dict->num_code;
        return p + len;
    }
    if (end - p >= 17 && (len = uint_len(p)) && p[len] != '.' && (p[len] | 0x20) != 'e') { /* 2910249 */
        if ((ev->code[d] = dict_code(dict, p, len)) < 0) return NULL;
        dict->num_key = dict->last_key;
        dict->num_len = len;
        dict->num_code = ev->code[d];
        return p + len;
    }
    if (p < end && *p == '"') {
        Str s;
        const char *text;
        size_t n;
        if (!(p = scan_string(c, p + 1, &s)) || unescape(c, &s, &text, &n)) return NULL;
        if (numeric_looking(text, n)) return fail(c, "numeric-looking string pid/tid"), NULL;
        if (s.high && !utf8_valid((const unsigned char *)s.s, s.n)) ev->invalid = 1;
        ev->code[d] = dict_code(&c->dicts[d], text, n);
        return ev->code[d] < 0 ? NULL : p;
    }
    if (is_null(p, end)) {
        ev->code[d] = -1;
        return p + 4;
    }
    Num num;
    if (!(p = scan_number(c, p, &num))) return NULL;
    if (!is_int(&num)) return fail(c, "pid/tid is not an integer"), NULL;
    if (!decodable(c, &num)) return fail(c, "pid/tid out of range"), NULL;
    int minus_zero = num.neg && num.int_n == 1 && num.int_s[0] == '0';
    const char *text = minus_zero ? num.int_s : num.s;
    ev->code[d] = dict_code(&c->dicts[d], text, (size_t)(num.e - text));
    return ev->code[d] < 0 ? NULL : p;
}

static const char *read_time(Ctx *c, const char *p, int which, Event *ev) {
    ev->time_bad[which] = 0;
    ev->valid[which] = 0;
    if (c->end - p >= 48) { /* 4458676522690.655: to_ns without the Num */
        uint32_t digits = digit_bits32(p);
        unsigned n = c->time_shape[which][0], f = c->time_shape[which][1];
        if (!same_shape(p, digits, n, f)) {
            n = p[0] == '0' ? 1 : run_of(digits);
            if (!n || n > 16) goto general; /* before the shift below: n + 1 < 32 */
            f = p[n] == '.' ? run_of(digits >> (n + 1)) : 0;
            if ((p[n] == '.' && !f) || n + f >= 31) goto general;
            c->time_shape[which][0] = (unsigned char)n;
            c->time_shape[which][1] = (unsigned char)f;
        }
        const char *q = p + n, *e = f ? q + 1 + f : q;
        if ((*e | 0x20) == 'e') goto general;
        uint64_t whole = short_digits(p, n);
        if (whole >= TWO_53 - (f != 0)) goto general; /* not convertible (to_ns decides) */
        /* to_ns's cases that need no float check */
        if (f && !(f <= 3 && whole < TWO_43) && !(which == I_TS && whole >= TWO_43)) goto general;
        int64_t milli;
        if (f >= 3) milli = (q[1] - '0') * 100 + (q[2] - '0') * 10 + (q[3] - '0');
        else milli = f == 2 ? (q[1] - '0') * 100 + (q[2] - '0') * 10 : f == 1 ? (q[1] - '0') * 100 : 0;
        ev->val[which] = (int64_t)whole * 1000 + milli + (f > 3 && q[4] >= '5');
        ev->valid[which] = 1;
        return e;
    }
general:
    if (is_null(p, c->end)) return p + 4;
    Num num;
    if (p >= c->end || !(*p == '-' || (*p >= '0' && *p <= '9'))) return fail(c, "ts/dur is not a number"), NULL;
    if (!(p = scan_number(c, p, &num))) return NULL;
    if (!decodable(c, &num)) return fail(c, "ts/dur out of range"), NULL; /* any event: msgspec decodes it */
    ev->valid[which] = to_ns(&num, which == I_TS, &ev->val[which]);
    ev->time_bad[which] = !ev->valid[which];
    return p;
}

/* A hot integer arg: int64 (NULL when it overflows), null, or (stream only) a string -> NULL. */
static const char *read_hot(Ctx *c, const char *p, int64_t *val, int *valid, int allow_str, int *invalid,
                            unsigned char *shape) {
    const char *end = c->end;
    if (end - p >= 32) { /* 2049: n digits (shape: the last n here, see same_shape) */
        uint32_t digits = digit_bits32(p);
        unsigned n = *shape;
        if (!same_shape(p, digits, n, 0)) {
            n = p[0] == '0' ? 1 : run_of(digits);
            if (!n || n > 16) goto general;
            *shape = (unsigned char)n;
        }
        if (p[n] == '.' || (p[n] | 0x20) == 'e') goto general;
        *val = (int64_t)short_digits(p, n);
        *valid = 1;
        return p + n;
    }
general:
    *valid = 0;
    if (is_null(p, end)) return p + 4;
    if (allow_str && p < end && *p == '"') return skip_string(c, p + 1, 1, invalid);
    if (p >= end || !(*p == '-' || (*p >= '0' && *p <= '9'))) return fail(c, "unexpected arg type"), NULL;
    Num num;
    if (!(p = scan_number(c, p, &num))) return NULL;
    if (!is_int(&num)) return fail(c, "unexpected arg type"), NULL;
    if (!decodable(c, &num)) return fail(c, "arg out of range"), NULL;
    *valid = num_int64(&num, val);
    return p;
}

/* A 6-bit signature of a non-empty key (length and first byte) to rule most keys out. */
static inline unsigned side_sig(const char *k, size_t n) { return (unsigned)(n * 7 + (unsigned char)k[0]) & 63; }

static int side_index(Ctx *c, const char *k, size_t n) {
    if (n && !((c->side_sig >> side_sig(k, n)) & 1)) return -1; /* most keys: no side key is alike */
    for (Py_ssize_t i = 0; i < c->n_side_keys; i++)
        if ((size_t)c->side_len[i] == n && memcmp(c->side_key[i], k, n) == 0) return (int)i;
    return -1;
}

static int add_side(Ctx *c, int field, const char *s, const char *e) {
    Side entry = {-1, field, s - c->start, e - c->start, c->events};
    return buf_put(&c->side, &entry, sizeof(entry));
}
