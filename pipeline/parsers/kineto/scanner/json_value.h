/* JSON numbers and whole values: the number grammar, the shape of plain integers and times,
   exact µs -> ns (to_ns), and skipping any value (skip_value and its inline fast cases). */
#pragma once
#include <math.h>
#include "json_string.h"

/* A JSON number's parts (grammar checked). */
typedef struct {
    const char *s, *e; /* whole text */
    int neg, has_exp;
    const char *int_s;
    size_t int_n, frac_n;
    const char *frac_s;
} Num;

static const char *scan_number(Ctx *c, const char *p, Num *num) {
    const char *end = c->end;
    num->s = p;
    num->neg = num->has_exp = 0;
    num->frac_s = NULL;
    num->frac_n = 0;
    if (p < end && *p == '-') {
        num->neg = 1;
        p++;
    }
    num->int_s = p;
    if (p < end && *p == '0') p++;
    else if (p < end && *p >= '1' && *p <= '9') p = digits_end(p + 1, end);
    else return fail(c, "invalid number"), NULL;
    num->int_n = (size_t)(p - num->int_s);
    if (p < end && *p == '.') {
        num->frac_s = ++p;
        p = digits_end(p, end);
        num->frac_n = (size_t)(p - num->frac_s);
        if (!num->frac_n) return fail(c, "invalid number"), NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        num->has_exp = 1;
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        const char *digits = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p == digits) return fail(c, "invalid number"), NULL;
    }
    num->e = p;
    return p;
}

static int is_int(const Num *n) { return !n->frac_s && !n->has_exp; }

/* Whether msgspec decodes the number where it decodes values (it refuses an integer literal
   longer than max_int_len and a float beyond double range): 0 declines the document. */
static int decodable(Ctx *c, const Num *n) {
    size_t len = (size_t)(n->e - n->s);
    if (is_int(n)) return len <= c->max_int_len;
    if (!n->has_exp && n->int_n <= 308) return 1; /* below 10^308: finite */
    char *text = malloc(len + 1);
    if (!text) return 0;
    memcpy(text, n->s, len);
    text[len] = 0;
    double v = PyOS_string_to_double(text, NULL, NULL); /* correctly rounded, as msgspec's */
    free(text);
    if (v == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    return isfinite(v);
}

/* Whether the number at p (digits: its digit_bits32) has the shape of the last one read at
   this place: n integer digits (n > 0; "0" alone when it starts with 0), then when f > 0 '.'
   and f digits, then a byte that is neither a digit nor '.' (nor 'e'/'E': the callers check).
   The shape is then known without measuring it (see dict_repeat). n + f < 31. */
static inline int same_shape(const char *p, uint32_t digits, unsigned n, unsigned f) {
    unsigned last = f ? n + 1 + f : n;
    uint32_t want = ((1u << n) - 1) | (((1u << f) - 1) << (n + 1));
    return n && (p[0] != '0' || n == 1) && (digits & ((2u << last) - 1)) == want && (p[n] == '.') == (f != 0);
}

/* The digits of the plain unsigned integer at p: "0", or 1..16 digits not starting with 0
   (below 10^16: no int64 overflow); 0 for anything else (the general path decides). 17 bytes
   readable. The caller still checks what follows. */
static inline size_t uint_len(const char *p) {
    if (p[0] == '0') return 1;
    size_t n = digit_run16(p);
    return n < 16 || p[16] < '0' || p[16] > '9' ? n : 0;
}

/* Integer value of an int Num: 1 when it fits int64, 0 when it overflows. */
static int num_int64(const Num *n, int64_t *out) {
    if (n->int_n > 19) return 0;
    uint64_t v = digits_value(n->int_s, n->int_n);
    uint64_t limit = n->neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    if (v > limit) return 0;
    *out = n->neg ? (int64_t)(0 - v) : (int64_t)v;
    return 1;
}

#define TWO_43 (1ull << 43)
#define TWO_53 (1ull << 53)

/* µs text to ns exactly like kineto_time.text_to_ns (half away from zero at the 4th decimal).
   Where the msgspec path would take its float path (float_to_ns) and the two rules could
   disagree, both are computed and must agree. Returns 1 when converted, 0 when not. */
static int to_ns(const Num *n, int is_ts, int64_t *out) {
    if (n->has_exp || n->int_n > 16) return 0;
    uint64_t whole = digits_value(n->int_s, n->int_n);
    /* 2^53 - 1 with a fraction may round to 2^53 as a double (out of range on the msgspec path) */
    if (whole >= TWO_53 - (n->frac_s != NULL)) return 0;
    int64_t milli = 0, up = 0;
    for (size_t i = 0; i < 3; i++) milli = milli * 10 + (i < n->frac_n ? n->frac_s[i] - '0' : 0);
    if (n->frac_n > 3) up = n->frac_s[3] >= '5';
    int64_t exact = (int64_t)whole * 1000 + milli + up;
    if (n->neg) exact = -exact;
    *out = exact;
    if (!n->frac_s) return 1;                           /* ints below 2^53: both rules exact */
    if (n->frac_n <= 3 && whole < TWO_43) return 1;     /* float path error < 0.5 ns */
    if (is_ts && whole >= TWO_43) return 1;             /* its batch takes the text path */
    char text[64];
    size_t len = (size_t)(n->e - n->s);
    if (len >= sizeof(text)) return 0;
    memcpy(text, n->s, len);
    text[len] = 0;
    double us = PyOS_string_to_double(text, NULL, NULL);
    if (us == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return 0;
    }
    double w = floor(us); /* kineto_time.float_to_ns: Polars rounds half to even */
    int64_t by_float = (int64_t)w * 1000 + (int64_t)nearbyint((us - w) * 1000.0);
    return by_float == exact;
}

static const char *skip_value(Ctx *c, const char *p, int decoded, int depth, int room, int *invalid);

static inline const char *skip_string(Ctx *c, const char *p, int decoded, int *invalid) {
    Str s;
    p = scan_string(c, p, &s);
    if (p && decoded && s.high && !utf8_valid((const unsigned char *)s.s, s.n)) *invalid = 1;
    return p;
}

/* A number's grammar only (p at its first byte): as scan_number, keeping nothing. `decoded`:
   msgspec decodes it, so its range is checked too (see decodable). */
static inline const char *skip_number(Ctx *c, const char *p, int decoded) {
    const char *end = c->end;
    if (end - p >= 16 && p[0] >= '1' && p[0] <= '9') { /* the common plain integer */
        const char *q = digits_end(p + 1, end);
        if (q < end && *q != '.' && *q != 'e' && *q != 'E') {
            if (decoded && (size_t)(q - p) > c->max_int_len) return fail(c, "integer out of range"), NULL;
            return q;
        }
    }
    Num n;
    p = scan_number(c, p, &n);
    if (p && decoded && !decodable(c, &n)) return fail(c, "number out of range"), NULL;
    return p;
}

/* The values read_args and read_field skip: strings and numbers inline, the rest by skip_value.
   room: the levels of nesting left for the value (see skip_value). */
static inline const char *skip_member(Ctx *c, const char *p, int decoded, int room, int *invalid) {
    if (p < c->end && *p == '"') return skip_string(c, p + 1, decoded, invalid);
    if (p < c->end && *p >= '0' && *p <= '9') return skip_number(c, p, decoded);
    return skip_value(c, p, decoded, 0, room, invalid);
}

/* Skip one JSON value (p at its first byte). `decoded`: msgspec decodes it (checks UTF-8 and
   numbers). depth: levels below the caller's (indentation prediction); room: the levels of
   nesting the value may still open (an array or object needs 1; kineto/limits.py MAX_DEPTH). */
static const char *skip_value(Ctx *c, const char *p, int decoded, int depth, int room, int *invalid) {
    const char *end = c->end;
    if (p >= end) return fail(c, "truncated"), NULL;
    char ch = *p;
    if (ch == '"') return skip_string(c, p + 1, decoded, invalid);
    if (ch == '{' || ch == '[') {
        if (room < 1) return fail(c, "nested too deeply"), NULL;
        char close = ch == '{' ? '}' : ']';
        unsigned char *w = c->indent + W_VALUE + 2 * (depth < 7 ? depth : 7);
        p = skip_ws_at(p + 1, end, w);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (ch == '{') {
                if (p >= end || *p != '"') return fail(c, "expected a key"), NULL;
                if (!(p = skip_string(c, p + 1, decoded, invalid))) return NULL;
                p = skip_ws(p, end);
                if (p >= end || *p != ':') return fail(c, "expected ':'"), NULL;
                p = skip_ws(p + 1, end);
            }
            if (!(p = skip_value(c, p, decoded, depth + 1, room - 1, invalid))) return NULL;
            p = skip_ws_at(p, end, w + 1);
            if (p < end && *p == close) return p + 1;
            if (p >= end || *p != ',') return fail(c, "expected ',' or a closing bracket"), NULL;
            p = skip_ws_at(p + 1, end, w);
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return skip_number(c, p, decoded);
    static const char *literals[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(literals[i]);
        if ((size_t)(end - p) >= len && memcmp(p, literals[i], len) == 0) return p + len;
    }
    return fail(c, "invalid JSON value"), NULL;
}

static int is_null(const char *p, const char *end) { return end - p >= 4 && memcmp(p, "null", 4) == 0; }
