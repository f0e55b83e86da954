/* Byte-class scans 16 or 32 bytes at a time (SSE2, else an exact SWAR fallback): where a
   string scan must stop, whitespace (with the predicted indentation skip), digit runs and
   their values. No Ctx: they take and return positions. */
#pragma once
#include "bytes.h"
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

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

/* Value of the n (1..16) ASCII digits at s; 8 bytes readable at s and at s + n - 8 when n > 8. */
static inline uint64_t short_digits(const char *s, size_t n) {
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    if (n <= 8) return eight_digits_word(load64(s) << (8 * (8 - n))); /* zero bytes lead: value 0 */
    return eight_digits_word(load64(s) << (8 * (16 - n))) * 100000000 + eight_digits(s + n - 8);
#else
    return digits_value(s, n);
#endif
}
