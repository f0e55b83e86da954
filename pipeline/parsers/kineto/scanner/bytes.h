/* Byte-level primitives: growable byte buffers (Buf), unaligned loads, the string hash, and
   a comparison of short byte runs without a call. No JSON grammar, no Ctx. */
#pragma once
#include <Python.h>
#include <stdint.h>
#include <string.h>

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
    if (!n) return 0; /* an empty buffer has no memory yet: memcpy must not see its NULL */
    if (buf_reserve(b, n)) return -1;
    memcpy(b->p + b->len, src, n);
    b->len += n;
    return 0;
}

static void buf_free(Buf *b) {
    if (b->obj) Py_DECREF(b->obj);
    else free(b->p);
    memset(b, 0, sizeof(*b));
}

static inline uint64_t load64(const char *s) {
    uint64_t w;
    memcpy(&w, s, 8);
    return w;
}

static inline uint64_t mix(uint64_t h, uint64_t w, uint64_t k) {
    h = (h ^ w) * k;
    return h ^ (h >> 32);
}

static inline uint32_t load32(const char *s) {
    uint32_t w;
    memcpy(&w, s, 4);
    return w;
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
