/* JSON strings: scanning with escapes checked (surrogate pairs included), resolving escapes
   into UTF-8, and strict UTF-8 validation where msgspec would decode. */
#pragma once
#include "ctx.h"
#include "scan16.h"

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
