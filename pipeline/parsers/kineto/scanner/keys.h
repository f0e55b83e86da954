/* Object members: key ids for the event and args keys the scanner keeps (recognised from
   raw bytes when plain), the ':' after a key and the ',' or '}' after a value. */
#pragma once
#include "json_value.h"

static int key_is(const char *k, size_t n, const char *lit) { return strlen(lit) == n && memcmp(k, lit, n) == 0; }

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
