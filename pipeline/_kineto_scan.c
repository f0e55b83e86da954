/* One-pass scanner of a Kineto `traceEvents` JSON array into columns (no per-event objects).

scan(buffer, side_keys, name_filter, cat_filter) -> dict. Complete (ph "X") events become
rows: cat/name/pid/tid as int32 codes into lists of unique strings ("<dict>_values"; code 0
is null, else 1 + index; pid/tid numbers become their decimal text); ts/dur as exact int64 ns
(see to_ns); stream/correlation/external_id/device as int64; each int column has a
"<col>_valid" byte per row. Metadata (ph "M") events become "meta_name"/"meta_pid"/"meta_tid"
codes. The rare args named in `side_keys` (tuple of (key bytes, decoded)) are returned as
(row, field, start, end, event) byte ranges of their raw JSON value; Python decodes those
few. `name_filter(name)` and `cat_filter(cat)` are called once per unique name / category,
in code order, and answer a small int ("name_answers" / "cat_answers", one byte per code):
comm args are kept only for events whose name answers non-zero, and "launch" (see
launch_times) takes categories answering 1 as runtime calls and 2 as GPU events.

Anything the scanner does not reproduce exactly (malformed JSON, unexpected types, times
it cannot convert exactly) raises ValueError: the caller falls back to the msgspec path.
UTF-8 is validated only where msgspec decodes a string (so the invalid_utf8 flag matches);
events holding invalid UTF-8 there are listed in "invalid_utf8_events".

Speed: strings, whitespace and digit runs are scanned 16 bytes at a time (SSE2, else an exact
SWAR fallback); known keys are recognised from their raw bytes (an escaped spelling takes the
general path and still matches); each dictionary remembers its last hit; row columns grow
together inside the bytes objects returned. None of this changes what is accepted or returned.
*/
#pragma GCC optimize("O3") /* pyproject builds with -O2; O3 measured ~13% faster here */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define MAX_DEPTH 1000

typedef struct {
    char *p;
    size_t len, cap;
    PyObject *obj; /* row columns: the bytes object p points into (else p is malloc'd) */
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap) return 0;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + extra) cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}


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

static inline uint64_t load64(const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static inline uint64_t mix(uint64_t h, uint64_t w, uint64_t k) {
    h = (h ^ w) * k;
    return h ^ (h >> 32);
}

/* Two independent lanes of 8 bytes (long kernel names: half the multiply chain); the last
   bytes are read as overlapping words. Any byte order: the hash never leaves the table. */
static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t a = 0x9E3779B97F4A7C15ull ^ n, b = 0xC2B2AE3D27D4EB4Full;
    const char *e = s + n;
    if (n >= 8) {
        for (; e - s > 16; s += 16) {
            a = mix(a, load64(s), 0xFF51AFD7ED558CCDull);
            b = mix(b, load64(s + 8), 0xC4CEB9FE1A85EC53ull);
        }
        a = mix(a, load64(e - s > 8 ? s : e - 8), 0xFF51AFD7ED558CCDull);
        b = mix(b, load64(e - 8), 0xC4CEB9FE1A85EC53ull);
    } else {
        uint64_t w = 0;
        for (size_t i = 0; i < n; i++) w = w << 8 | (unsigned char)s[i];
        a = mix(a, w, 0xFF51AFD7ED558CCDull);
    }
    uint64_t h = (a ^ (b << 23 | b >> 41)) * 0x94D049BB133111EBull;
    return h ^ (h >> 29);
}

static inline uint32_t load32(const char *s) {
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
}

/* memcmp(a, b, n) == 0 without a call: words, the last one overlapping. */
static inline int same_bytes(const char *a, const char *b, size_t n) {
    if (n < 4) {
        for (size_t i = 0; i < n; i++)
            if (a[i] != b[i]) return 0;
        return 1;
    }
    if (n < 8) return load32(a) == load32(b) && load32(a + n - 4) == load32(b + n - 4);
    for (size_t i = 0; i + 8 < n; i += 8)
        if (load64(a + i) != load64(b + i)) return 0;
    return load64(a + n - 8) == load64(b + n - 8);
}

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

/* Code of the string s[0:n] (UTF-8, invalid bytes become U+FFFD), added when new; -1 on error. */
static int filter_answer(PyObject *answer) {
    long v = answer ? PyLong_AsLong(answer) : -1;
    if (v == -1 && (!answer || PyErr_Occurred())) return -1;
    if (v < 0 || v > 127) {
        PyErr_SetString(PyExc_ValueError, "a dictionary filter must answer an int in 0..127");
        return -1;
    }
    return (int)v;
}

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
    PyObject *invalid_events;
    Py_ssize_t n_side_keys;
    const char *side_key[MAX_SIDE_KEYS];
    Py_ssize_t side_len[MAX_SIDE_KEYS];
    int side_decoded[MAX_SIDE_KEYS];
    uint64_t side_sig; /* bit side_sig(key) set for each side key */
    int64_t rows_x, rows_m, events;
    size_t row_cap;
    unsigned char indent[N_INDENT]; /* see skip_indent */
    unsigned char time_shape[2][2], int_shape[N_INTS + 1]; /* see same_shape; [N_INTS]: "external id" */ /* rows the codes, ints and int_valid buffers all hold */
} Ctx;

static int fail(Ctx *c, const char *why) {
    if (!c->err) c->err = why;
    return -1;
}

/* Byte-class tests on 16 bytes at a time: SSE2 where the compiler has it, else SWAR on two
   64-bit words (exact per byte, any byte order). Each returns the offset of the first byte
   of interest in p[0..16), or 16 when there is none; p[0..16) must be readable. */
#if !defined(__SSE2__)
#define ONES 0x0101010101010101ull
#define HIGHS 0x8080808080808080ull

/* 0x80 in each zero byte of v, exactly (the cheaper borrow trick can also flag bytes after a zero). */
static inline uint64_t zero_bytes(uint64_t v) { return ~(((v & ~HIGHS) + ~HIGHS) | v) & HIGHS; }

static inline unsigned first_marked(uint64_t marks) { /* marks != 0: 0x80 per marked byte */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return (unsigned)__builtin_clzll(marks) / 8;
#else
    return (unsigned)__builtin_ctzll(marks) / 8;
#endif
}

static inline uint64_t string_marks(const char *p, int high) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t m = zero_bytes(w ^ (ONES * '"')) | zero_bytes(w ^ (ONES * '\\')) | zero_bytes(w & (ONES * 0xE0));
    return high ? m | (w & HIGHS) : m;
}

static inline uint64_t non_ws_marks(const char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t ws = zero_bytes(w ^ (ONES * ' ')) | zero_bytes(w ^ (ONES * '\n')) | zero_bytes(w ^ (ONES * '\r')) |
                  zero_bytes(w ^ (ONES * '\t'));
    return ~ws & HIGHS;
}
#endif

/* First byte a string scan must look at: '"', '\\', a control character, and when `high`
   also a byte >= 0x80 (once a string has one, the rest need no look for UTF-8 purposes). */
static inline unsigned string_stop16(const char *p, int high) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i hit = _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\\')));
    __m128i ctl = high ? _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)) /* signed: >= 0x80 too */
                       : _mm_cmpeq_epi8(_mm_subs_epu8(v, _mm_set1_epi8(0x1F)), _mm_setzero_si128());
    unsigned mask = (unsigned)_mm_movemask_epi8(_mm_or_si128(hit, ctl));
    return (unsigned)__builtin_ctz(mask | 0x10000); /* 16 when none */
#else
    uint64_t m = string_marks(p, high);
    if (m) return first_marked(m);
    m = string_marks(p + 8, high);
    return m ? 8 + first_marked(m) : 16;
#endif
}

static inline unsigned non_ws16(const char *p) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i ws = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8(' ')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\n'))),
                              _mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\r')), _mm_cmpeq_epi8(v, _mm_set1_epi8('\t'))));
    return (unsigned)__builtin_ctz(~(unsigned)_mm_movemask_epi8(ws)); /* bit 16 set: 16 when all are */
#else
    uint64_t m = non_ws_marks(p);
    if (m) return first_marked(m);
    m = non_ws_marks(p + 8);
    return m ? 8 + first_marked(m) : 16;
#endif
}

/* Offset of the first byte other than ' ' in p[0..16) (16 when none). */
static inline unsigned non_space16(const char *p) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    return (unsigned)__builtin_ctz(~(unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(' '))));
#else
    uint64_t w;
    memcpy(&w, p, 8);
    uint64_t m = ~zero_bytes(w ^ (ONES * ' ')) & HIGHS;
    if (m) return first_marked(m);
    memcpy(&w, p + 8, 8);
    m = ~zero_bytes(w ^ (ONES * ' ')) & HIGHS;
    return m ? 8 + first_marked(m) : 16;
#endif
}

/* ' ', '\t', '\n', '\r' as one bit test. */
static inline int is_ws(unsigned char ch) { return ch <= ' ' && ((0x100002600ull >> ch) & 1); }

static const char *skip_ws_long(const char *p, const char *end) {
    if (end - p >= 48 && *p == '\n') { /* indentation: a newline, then up to 32 spaces */
        unsigned i = non_space16(p + 1);
        p += 1 + i;
        if (i == 16) p += non_space16(p);
        if ((unsigned char)*p > ' ') return p;
    }
    while (end - p >= 16) {
        unsigned i = non_ws16(p);
        if (i < 16) return p + i;
        p += 16;
    }
    while (p < end && is_ws((unsigned char)*p)) p++;
    return p;
}

/* Compact traces have no whitespace between tokens; indented ones have runs of it. */
static inline const char *skip_ws(const char *p, const char *end) {
    if (p < end && (unsigned char)*p > ' ') return p; /* above ' ': not whitespace */
    if (end - p >= 2 && *p == ' ' && (unsigned char)p[1] > ' ') return p + 1; /* after ':' or ',' */
    return skip_ws_long(p, end);
}

/* Bit i set where p[i] == ' ', for i in 0..32. */
static inline uint32_t space_bits32(const char *p) {
#if defined(__SSE2__)
    __m128i sp = _mm_set1_epi8(' ');
    uint32_t lo = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)p), sp));
    uint32_t hi = (uint32_t)_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_loadu_si128((const __m128i *)(p + 16)), sp));
    return lo | hi << 16;
#else
    uint32_t bits = 0;
    for (unsigned i = 0; i < 32; i++) bits |= (uint32_t)(p[i] == ' ') << i;
    return bits;
#endif
}

/* The whitespace before a token at a place whose indentation repeats (pretty-printed traces
   indent each nesting level alike): *w is the width of the spaces after the newline the last
   time here. The scan is a chain of positions, each computed from the bytes at the previous
   one; when the width is as predicted, the next position comes from *w and the bytes are
   only checked (a predicted branch), so the chain does not wait for them. */
static const char *skip_indent(const char *p, const char *end, unsigned char *w) {
    if (end - p >= 48 && *p == '\n') {
        const char *q = p + 1;
        uint32_t spaces = space_bits32(q), width = *w;
        if ((spaces & ((2u << width) - 1)) == (1u << width) - 1 && (unsigned char)q[width] > ' ') return q + width;
        if (~spaces) {
            unsigned i = (unsigned)__builtin_ctz(~spaces);
            if ((unsigned char)q[i] > ' ') return *w = (unsigned char)i, q + i;
        }
    }
    return skip_ws(p, end);
}

static inline const char *skip_ws_at(const char *p, const char *end, unsigned char *w) {
    if (p < end && (unsigned char)*p > ' ') return p;
    return skip_indent(p, end, w);
}

static int hexval(unsigned char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

static int read_u4(const char *p, const char *end, unsigned *out) {
    if (end - p < 4) return -1;
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int h = hexval((unsigned char)p[i]);
        if (h < 0) return -1;
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 0;
}

/* A JSON string: p is just after the opening quote. Returns the position after the closing
   quote (NULL on error); escapes are checked, surrogate pairs included. */
typedef struct {
    const char *s; /* raw content */
    size_t n;
    int escaped, high;
} Str;

static const char *scan_escape(Ctx *c, const char *p);

static inline const char *scan_string(Ctx *c, const char *p, Str *out) {
    const char *end = c->end;
    out->s = p;
    out->escaped = out->high = 0;
    for (;;) {
        if (end - p >= 16) {
            unsigned i = string_stop16(p, !out->high);
            p += i;
            if (i == 16) continue;
        } else if (p >= end) return fail(c, "truncated string"), NULL;
        unsigned char ch = (unsigned char)*p;
        if (ch == '"') {
            out->n = (size_t)(p - out->s);
            return p + 1;
        }
        if (ch >= 0x80) {
            out->high = 1;
            p++;
        } else if (ch < 0x20) {
            return fail(c, "control character in string"), NULL;
        } else if (ch == '\\') {
            out->escaped = 1;
            if (!(p = scan_escape(c, p + 1))) return NULL;
        } else {
            p++; /* the last few bytes of the buffer go one at a time */
        }
    }
}

/* One escape (p just after the backslash), surrogate pairs included; the position after it. */
static const char *scan_escape(Ctx *c, const char *p) {
    const char *end = c->end;
    if (p >= end) return fail(c, "truncated string"), NULL;
    unsigned char ch = (unsigned char)*p;
    if (ch != 'u') {
        if (!strchr("\"\\/bfnrt", ch) || ch == 0) return fail(c, "invalid escape"), NULL;
        return p + 1;
    }
    unsigned u;
    if (read_u4(p + 1, end, &u)) return fail(c, "invalid \\u escape"), NULL;
    p += 5;
    if (u >= 0xDC00 && u <= 0xDFFF) return fail(c, "lone low surrogate"), NULL;
    if (u >= 0xD800 && u <= 0xDBFF) {
        unsigned lo;
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || read_u4(p + 2, end, &lo) || lo < 0xDC00 || lo > 0xDFFF)
            return fail(c, "lone high surrogate"), NULL;
        p += 6;
    }
    return p;
}

static int put_utf8(Buf *b, unsigned cp) {
    char out[4];
    size_t n;
    if (cp < 0x80) {
        out[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        out[0] = (char)(0xF0 | (cp >> 18));
        out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    return buf_put(b, out, n);
}

/* The string's text with escapes resolved (raw bytes kept), in c->scratch when escaped. */
static int unescape_into(Ctx *c, Str *s, const char **text, size_t *n);

static inline int unescape(Ctx *c, Str *s, const char **text, size_t *n) {
    if (!s->escaped) {
        *text = s->s;
        *n = s->n;
        return 0;
    }
    return unescape_into(c, s, text, n);
}

static int unescape_into(Ctx *c, Str *s, const char **text, size_t *n) {
    Buf *b = &c->scratch;
    b->len = 0;
    const char *p = s->s, *end = s->s + s->n;
    while (p < end) {
        const char *q = memchr(p, '\\', (size_t)(end - p));
        if (!q) q = end;
        if (buf_put(b, p, (size_t)(q - p))) return -1;
        if (q == end) break;
        char ch = q[1];
        unsigned cp = 0, lo = 0xDC00; /* both set by read_u4: validated by scan_string */
        p = q + 2;
        switch (ch) {
            case 'b': cp = '\b'; break;
            case 'f': cp = '\f'; break;
            case 'n': cp = '\n'; break;
            case 'r': cp = '\r'; break;
            case 't': cp = '\t'; break;
            case 'u':
                read_u4(p, end, &cp);
                p += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF) {
                    read_u4(p + 2, end, &lo);
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                    p += 6;
                }
                break;
            default: cp = (unsigned char)ch; /* " \ / */
        }
        if (put_utf8(b, cp)) return -1;
    }
    *text = b->p ? b->p : "";
    *n = b->len;
    return 0;
}

/* Strict UTF-8 (as CPython and msgspec check it). */
static int utf8_valid(const unsigned char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        unsigned c0 = s[i];
        if (c0 < 0x80) {
            i++;
            continue;
        }
        size_t need;
        unsigned lo = 0x80, hi = 0xBF;
        if (c0 >= 0xC2 && c0 <= 0xDF) need = 1;
        else if (c0 >= 0xE0 && c0 <= 0xEF) {
            need = 2;
            if (c0 == 0xE0) lo = 0xA0;
            if (c0 == 0xED) hi = 0x9F;
        } else if (c0 >= 0xF0 && c0 <= 0xF4) {
            need = 3;
            if (c0 == 0xF0) lo = 0x90;
            if (c0 == 0xF4) hi = 0x8F;
        } else return 0;
        if (n - i <= need) return 0;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (size_t k = 2; k <= need; k++)
            if ((s[i + k] & 0xC0) != 0x80) return 0;
        i += need + 1;
    }
    return 1;
}

/* A JSON number's parts (grammar checked). */
typedef struct {
    const char *s, *e; /* whole text */
    int neg, has_exp;
    const char *int_s;
    size_t int_n, frac_n;
    const char *frac_s;
} Num;

/* The end of the run of ASCII digits at p. */
static inline const char *digits_end(const char *p, const char *end) {
#if defined(__SSE2__)
    while (end - p >= 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)p);
        __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
        unsigned other = ~(unsigned)_mm_movemask_epi8(digit) & 0xFFFF;
        if (other) return p + __builtin_ctz(other);
        p += 16;
    }
#endif
    while (p < end && *p >= '0' && *p <= '9') p++;
    return p;
}

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

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
/* Value of 8 ASCII digits in three multiplies (digit pairs, then quads, then the eight). */
static inline uint64_t eight_digits_word(uint64_t v) {
    v = (v & 0x0F0F0F0F0F0F0F0Full) * 2561 >> 8;
    v = (v & 0x00FF00FF00FF00FFull) * 6553601 >> 16;
    return (v & 0x0000FFFF0000FFFFull) * 42949672960001ull >> 32;
}

static inline uint64_t eight_digits(const char *s) { return eight_digits_word(load64(s)); }
#endif

/* Value of n <= 19 ASCII digits: below 10^19, so it cannot overflow uint64. */
static inline uint64_t digits_value(const char *s, size_t n) {
    uint64_t v = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    for (; n >= 8; s += 8, n -= 8) v = v * 100000000 + eight_digits(s);
#endif
    while (n--) v = v * 10 + (uint64_t)(*s++ - '0');
    return v;
}

static inline int is_digit(char ch) { return ch >= '0' && ch <= '9'; }

/* Digits at the start of p[0..16) (16 when all are). */
static inline size_t digit_run16(const char *p) {
#if defined(__SSE2__)
    __m128i v = _mm_loadu_si128((const __m128i *)p);
    __m128i digit = _mm_and_si128(_mm_cmpgt_epi8(v, _mm_set1_epi8('0' - 1)), _mm_cmplt_epi8(v, _mm_set1_epi8('9' + 1)));
    return (size_t)__builtin_ctz(~(unsigned)_mm_movemask_epi8(digit));
#else
    size_t i = 0;
    while (i < 16 && p[i] >= '0' && p[i] <= '9') i++;
    return i;
#endif
}

/* Bit i set where p[i] is an ASCII digit, for i in 0..32. */
static inline uint32_t digit_bits32(const char *p) {
#if defined(__SSE2__)
    __m128i lo = _mm_loadu_si128((const __m128i *)p), hi = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i below = _mm_set1_epi8('0' - 1), above = _mm_set1_epi8('9' + 1);
    lo = _mm_and_si128(_mm_cmpgt_epi8(lo, below), _mm_cmplt_epi8(lo, above));
    hi = _mm_and_si128(_mm_cmpgt_epi8(hi, below), _mm_cmplt_epi8(hi, above));
    return (uint32_t)_mm_movemask_epi8(lo) | (uint32_t)_mm_movemask_epi8(hi) << 16;
#else
    uint32_t bits = 0;
    for (unsigned i = 0; i < 32; i++) bits |= (uint32_t)is_digit(p[i]) << i;
    return bits;
#endif
}

/* Length of the run of set bits from bit 0 (32 when all are). */
static inline unsigned run_of(uint32_t bits) { return (unsigned)__builtin_ctzll(~(uint64_t)bits); }

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

/* Value of the n (1..16) ASCII digits at s; 8 bytes readable at s and at s + n - 8 when n > 8. */
static inline uint64_t short_digits(const char *s, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n <= 8) return eight_digits_word(load64(s) << (8 * (8 - n))); /* zero bytes lead: value 0 */
    return eight_digits_word(load64(s) << (8 * (16 - n))) * 100000000 + eight_digits(s + n - 8);
#else
    return digits_value(s, n);
#endif
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
    if (whole >= TWO_53) return 0;
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

static const char *skip_value(Ctx *c, const char *p, int decoded, int depth, int *invalid);

static inline const char *skip_string(Ctx *c, const char *p, int decoded, int *invalid) {
    Str s;
    p = scan_string(c, p, &s);
    if (p && decoded && s.high && !utf8_valid((const unsigned char *)s.s, s.n)) *invalid = 1;
    return p;
}

/* A number's grammar only (p at its first byte): as scan_number, keeping nothing. */
static inline const char *skip_number(Ctx *c, const char *p) {
    const char *end = c->end;
    if (end - p >= 16 && p[0] >= '1' && p[0] <= '9') { /* the common plain integer */
        const char *q = digits_end(p + 1, end);
        if (q < end && *q != '.' && *q != 'e' && *q != 'E') return q;
    }
    Num n;
    return scan_number(c, p, &n);
}

/* The values read_args and read_field skip: strings and numbers inline, the rest by skip_value. */
static inline const char *skip_member(Ctx *c, const char *p, int decoded, int *invalid) {
    if (p < c->end && *p == '"') return skip_string(c, p + 1, decoded, invalid);
    if (p < c->end && *p >= '0' && *p <= '9') return skip_number(c, p);
    return skip_value(c, p, decoded, 0, invalid);
}

/* Skip one JSON value (p at its first byte). `decoded`: msgspec decodes it (checks UTF-8). */
static const char *skip_value(Ctx *c, const char *p, int decoded, int depth, int *invalid) {
    const char *end = c->end;
    if (p >= end) return fail(c, "truncated"), NULL;
    if (depth > MAX_DEPTH) return fail(c, "nested too deeply"), NULL;
    char ch = *p;
    if (ch == '"') return skip_string(c, p + 1, decoded, invalid);
    if (ch == '{' || ch == '[') {
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
            if (!(p = skip_value(c, p, decoded, depth + 1, invalid))) return NULL;
            p = skip_ws_at(p, end, w + 1);
            if (p < end && *p == close) return p + 1;
            if (p >= end || *p != ',') return fail(c, "expected ',' or a closing bracket"), NULL;
            p = skip_ws_at(p + 1, end, w);
        }
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return skip_number(c, p);
    static const char *literals[] = {"true", "false", "null"};
    for (int i = 0; i < 3; i++) {
        size_t len = strlen(literals[i]);
        if ((size_t)(end - p) >= len && memcmp(p, literals[i], len) == 0) return p + len;
    }
    return fail(c, "invalid JSON value"), NULL;
}

static int is_null(const char *p, const char *end) { return end - p >= 4 && memcmp(p, "null", 4) == 0; }

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

static int key_is(const char *k, size_t n, const char *lit) { return strlen(lit) == n && memcmp(k, lit, n) == 0; }

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
            f = p[n] == '.' ? run_of(digits >> (n + 1)) : 0;
            if (!n || n > 16 || (p[n] == '.' && !f) || n + f >= 31) goto general;
            c->time_shape[which][0] = (unsigned char)n;
            c->time_shape[which][1] = (unsigned char)f;
        }
        const char *q = p + n, *e = f ? q + 1 + f : q;
        if ((*e | 0x20) == 'e') goto general;
        uint64_t whole = short_digits(p, n);
        if (whole >= TWO_53) goto general; /* not convertible */
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

/* The keys read from events and from their args. */
enum {
    K_OTHER, K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS, /* event */
    K_STREAM, K_CORR, K_EXT, K_EXT_LEGACY, K_DEVICE                  /* args */
};

#define IS_KEY(k, lit) (memcmp((k), (lit), sizeof(lit) - 1) == 0)

/* Id of a resolved key text (args: whether it is an args key). */
static int key_id(const char *k, size_t n, int args) {
    if (args) {
        if (n == 6) return IS_KEY(k, "stream") ? K_STREAM : IS_KEY(k, "device") ? K_DEVICE : K_OTHER;
        if (n == 11)
            return IS_KEY(k, "correlation")   ? K_CORR
                   : IS_KEY(k, "External id") ? K_EXT
                   : IS_KEY(k, "external id") ? K_EXT_LEGACY
                                              : K_OTHER;
        return K_OTHER;
    }
    switch (n) {
        case 2: return IS_KEY(k, "ph") ? K_PH : IS_KEY(k, "ts") ? K_TS : K_OTHER;
        case 3:
            return IS_KEY(k, "cat")   ? K_CAT
                   : IS_KEY(k, "pid") ? K_PID
                   : IS_KEY(k, "tid") ? K_TID
                   : IS_KEY(k, "dur") ? K_DUR
                                      : K_OTHER;
        case 4: return IS_KEY(k, "name") ? K_NAME : IS_KEY(k, "args") ? K_ARGS : K_OTHER;
        default: return K_OTHER;
    }
}

/* A known key recognised from its raw bytes with the closing quote (no escape can hide in
   those): p just after the opening quote, 16 bytes readable. Sets *len to the bytes taken;
   -1 when the key needs the general path. */
static inline int known_key(const char *p, int args, size_t *len) {
#define TRY(lit, id)                                                                                                   \
    if (IS_KEY(p, lit "\"")) return *len = sizeof(lit), id
    if (args) {
        switch (p[0]) {
            case 'E': TRY("External id", K_EXT); break;
            case 'c': TRY("correlation", K_CORR); break;
            case 's': TRY("stream", K_STREAM); break;
            case 'd': TRY("device", K_DEVICE); break;
            case 'e': TRY("external id", K_EXT_LEGACY); break;
        }
        return -1;
    }
    switch (p[0]) {
        case 'p':
            TRY("ph", K_PH);
            TRY("pid", K_PID);
            break;
        case 't':
            TRY("ts", K_TS);
            TRY("tid", K_TID);
            break;
        case 'c': TRY("cat", K_CAT); break;
        case 'n': TRY("name", K_NAME); break;
        case 'd': TRY("dur", K_DUR); break;
        case 'a': TRY("args", K_ARGS); break;
    }
    return -1;
#undef TRY
}

/* p after a key's closing quote: the value's position, past ':' and its whitespace. */
static inline const char *past_colon(Ctx *c, const char *p) {
    const char *end = c->end;
    if (end - p >= 3 && p[0] == ':') { /* "k":v and "k": v */
        if ((unsigned char)p[1] > ' ') return p + 1;
        if (p[1] == ' ' && (unsigned char)p[2] > ' ') return p + 2;
    }
    p = skip_ws(p, end);
    if (p >= end || *p != ':') return fail(c, "expected ':'"), NULL;
    return skip_ws(p + 1, end);
}

/* p after a member's value: 1 with *pp at the next member, 0 with *pp past the closing '}',
   -1 on error. w: the indentation places of the members and of the '}'. */
static inline int next_member(Ctx *c, const char **pp, unsigned char *w) {
    const char *p = *pp, *end = c->end;
    if (end - p >= 3 && p[0] == ',') { /* ,"k" and , "k" */
        if (p[1] == '"') return *pp = p + 1, 1;
        if (p[1] == ' ' && p[2] == '"') return *pp = p + 2, 1;
        return *pp = skip_ws_at(p + 1, end, w), 1;
    }
    p = skip_ws_at(p, end, w + 1);
    if (p < end && *p == '}') return *pp = p + 1, 0;
    if (p >= end || *p != ',') return fail(c, "expected ',' or '}'"), -1;
    *pp = skip_ws_at(p + 1, end, w);
    return 1;
}

/* A key string (p at the opening quote) resolved into (text, n); scratch may be used. Not
   inlined: inlined into the event loop it measured 3-5% slower on the Kineto-written traces. */
__attribute__((noinline)) static const char *read_key(Ctx *c, const char *p, const char **text, size_t *n) {
    const char *end = c->end;
    if (p >= end || *p != '"') return fail(c, "expected a key"), NULL;
    Str s;
    if (!(p = scan_string(c, p + 1, &s)) || unescape(c, &s, text, n)) return NULL;
    return past_colon(c, p);
}

/* A member's key (p at the opening quote) as a key id; (*k, *n): its text (for K_OTHER args keys
   only; scratch may hold it). Returns the position of the value. */
static inline const char *member_key(Ctx *c, const char *p, int args, int *id, const char **k, size_t *n) {
    const char *end = c->end;
    size_t len;
    if (end - p >= 17 && *p == '"' && (*id = known_key(p + 1, args, &len)) >= 0) return past_colon(c, p + 1 + len);
    if (!(p = read_key(c, p, k, n))) return NULL;
    *id = key_id(*k, *n, args);
    return p;
}

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
                    p = skip_value(c, p, c->side_decoded[field], 0, &ev->invalid);
                    if (p && add_side(c, field, s, p)) return NULL;
                } else p = skip_member(c, p, 0, &ev->invalid);
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
        default: return skip_member(c, p, 0, &ev->invalid);
    }
}

/* Keep this event's side entries that its kind needs (field 0: metadata name; others: comm
   args of events whose name passed the name filter), with their row index set. */
static void keep_side(Ctx *c, Event *ev, int64_t row) {
    Side *side = (Side *)c->side.p;
    size_t n = c->side.len / sizeof(Side), out = ev->side_start;
    int comm = ev->ph == 'X' && c->dicts[D_NAME].pass.p[ev->code[D_NAME]];
    for (size_t i = ev->side_start; i < n; i++) {
        int meta_field = side[i].field == 0;
        if (!(ev->ph == 'M' ? meta_field : comm && !meta_field)) continue;
        side[out] = side[i];
        side[out++].row = row;
    }
    c->side.len = out * sizeof(Side);
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
    keep_side(c, ev, c->rows_m++);
    return 0;
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
    keep_side(c, ev, c->rows_x++);
    return 0;
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
            if ((p = skip_value(c, p, 0, 0, &unused))) {
                int64_t span[2] = {member - c->start, p - c->start};
                if (buf_put(&c->top, span, sizeof(span))) return NULL;
            }
        }
        int more = p ? next_member(c, &p, c->indent + W_TOP) : -1;
        if (more <= 0) return more ? NULL : p;
    }
}

static int scan_document(Ctx *c) {
    const char *p = skip_ws(c->start, c->end);
    if (p < c->end && *p == '{') p = scan_object(c, p);
    else p = scan_array(c, p);
    if (!p) return -1;
    if (skip_ws(p, c->end) != c->end) return fail(c, "trailing data");
    return 0;
}

static void buf_free(Buf *b) {
    if (b->obj) Py_DECREF(b->obj);
    else free(b->p);
    memset(b, 0, sizeof(*b));
}

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
    rc = rc || !side || set_bytes(out, "top", &c->top) || PyDict_SetItemString(out, "side", side) ||
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
        if (!PyArg_ParseTuple(item, "y#p", &k, &c->side_len[i], &decoded)) return -1;
        c->side_key[i] = k;
        c->side_decoded[i] = decoded;
        if (c->side_len[i]) c->side_sig |= 1ull << side_sig(k, (size_t)c->side_len[i]);
    }
    return 0;
}

static PyObject *scan(PyObject *self, PyObject *args) {
    (void)self;
    Py_buffer view;
    PyObject *keys, *name_filter, *cat_filter;
    if (!PyArg_ParseTuple(args, "y*O!OO:scan", &view, &PyTuple_Type, &keys, &name_filter, &cat_filter)) return NULL;
    Ctx c;
    memset(&c, 0, sizeof(c));
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
     "scan(buffer, side_keys, name_filter, cat_filter) -> dict of columns (see module doc)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {PyModuleDef_HEAD_INIT, "_kineto_scan", "One-pass Kineto traceEvents scanner.",
                                    -1, METHODS, NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__kineto_scan(void) { return PyModule_Create(&MODULE); }
