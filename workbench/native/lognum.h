/* Reading numbers and blanks exactly as Python does, for the log scanners (logscan.c, mfscan.c).

   Numbers: Clinger's exact fast path (at most 15 digits, so below 2^53, |power of ten| <= 22: one
   correctly rounded IEEE operation, the double Python's float() returns); other numbers of the grammar
   [+-]?digits[.digits][(e|E)[+-]digits] go through strtod on a bounded NUL-terminated local copy, and
   are refused unless strtod reads all of it. Nothing is read at or past the end pointer given. */
#ifndef WORKBENCH_LOGNUM_H
#define WORKBENCH_LOGNUM_H
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOKEN 512             /* longer number for strtod: refused */

#define B 1                       /* Python's \s for bytes, what bytes.strip() removes: \t \n \v \f \r and space */
static const unsigned char BLANK[256] = {[9] = B, [10] = B, [11] = B, [12] = B, [13] = B, [32] = B};
static int blank(unsigned char c) { return BLANK[c]; }
static int digit(unsigned char c) { return (unsigned char)(c - '0') <= 9; }

#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR 1                    /* bytes eight at a time: the first byte of a word is its lowest */
#define INLINE static inline __attribute__((always_inline))
#else
#define SWAR 0
#define INLINE static inline
#endif

static const uint64_t POW10_INT[9] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000};

/* [s, p) by strtod on a bounded NUL-terminated copy: 0 unless it reads all of it. */
static int slow_number(const unsigned char *s, const unsigned char *p, double *out) {
    if (p - s >= MAX_TOKEN) return 0;                    /* wrapped mantissa above: strtod reads the text */
    char copy[MAX_TOKEN];
    memcpy(copy, s, (size_t)(p - s));
    copy[p - s] = '\0';
    char *stop = NULL;
    double value = strtod(copy, &stop);
    if (stop != copy + (p - s)) return 0;                /* a locale that reads '.' otherwise */
    *out = value;
    return 1;
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

#if SWAR
/* The bytes of a word that are not digits, once the word is xor-ed with '0' in every byte: those with
   a high nibble other than 0 or a low one above 9 (a carry out of a byte above 0xF9 only disturbs the
   bytes after it, past the first non-digit). */
INLINE uint64_t not_digits(uint64_t x) {
    return (x & 0xF0F0F0F0F0F0F0F0ULL) | ((x + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL);
}

/* The value of eight digits xor-ed with '0', the first the lowest byte: pairs, then fours, then eight. */
INLINE uint64_t eight_digits(uint64_t x) {
    x = x * 10 + (x >> 8);
    return (((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)))
            + (((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
}
#endif

/* The run of digits at p (before e): its end, and mantissa * 10^length + its value in *mantissa
   (wrapping past 2^64: the caller counts the digits). Eight bytes at a time where eight are there. */
INLINE const unsigned char *digits_at(const unsigned char *p, const unsigned char *e, uint64_t *mantissa) {
    uint64_t m = *mantissa;
#if SWAR
    while (e - p >= 8) {
        uint64_t word, x;
        memcpy(&word, p, 8);
        x = word ^ 0x3030303030303030ULL;
        uint64_t other = not_digits(x);
        int n = other ? __builtin_ctzll(other) >> 3 : 8;
        if (n == 0) break;
        x = n == 8 ? x : x << (8 * (8 - n));           /* the n digits as the last n of eight, zeros before */
        m = m * POW10_INT[n] + eight_digits(x);
        p += n;
        if (n < 8) { *mantissa = m; return p; }
    }
#endif
    for (; p < e && digit(*p); p++) m = m * 10 + (uint64_t)(*p - '0');
    *mantissa = m;
    return p;
}

/* The longest number of the grammar at s (reading no further than e): its end in *end and its value
   in *out; 0 when none starts there or it is not read exactly. */
INLINE int number_at(const unsigned char *s, const unsigned char *e, const unsigned char **end, double *out) {
    const unsigned char *p = s, *digits;
    int negative = 0;
    uint64_t mantissa = 0;
    int64_t fraction = 0, exponent = 0, count;
    if (e - s >= 3 && s[0] == 'n' && s[1] == 'a' && s[2] == 'n') { *end = s + 3; *out = NAN; return 1; }
    if (p < e && (*p == '+' || *p == '-')) negative = *p++ == '-';
    digits = p;
    p = digits_at(p, e, &mantissa);
    count = p - digits;
    if (p < e && *p == '.') {
        digits = ++p;
        p = digits_at(p, e, &mantissa);
        fraction = p - digits;
    }
    if (count + fraction == 0) return 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        int minus = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) minus = *p++ == '-';
        for (digits = p; p < e && digit(*p); p++) if (exponent < 100000) exponent = exponent * 10 + (*p - '0');
        if (p == digits) return 0;
        if (minus) exponent = -exponent;
    }
    *end = p;
    exponent -= fraction;
    if (count + fraction <= 15 && exponent >= -22 && exponent <= 22) {   /* 15 digits < 2^53: exact */
        double value = (double)(int64_t)mantissa;      /* below 10^15: exact, one conversion */
        value = exponent >= 0 ? value * POW10[exponent] : value / POW10[-exponent];
        *out = negative ? -value : value;
        return 1;
    }
    return slow_number(s, p, out);
}

#if SWAR
/* numpy_e_at past the n digits after the point (their value: fraction): the exponent and the value. */
INLINE const unsigned char *numpy_e_tail(const unsigned char *s, const unsigned char *e, int n, uint64_t fraction,
                                         double *out) {
    const unsigned char *x = s + 2 + n;                  /* the 'e' */
    if (e - x < 5 || (x[0] | 0x20) != 'e' || (x[1] != '-' && x[1] != '+') || !digit(x[2]) || !digit(x[3])
        || digit(x[4])) return NULL;
    int64_t exponent = (x[2] - '0') * 10 + (x[3] - '0');
    exponent = (x[1] == '-' ? -exponent : exponent) - n;
    if (exponent < -22 || exponent > 22) return NULL;
    double value = (double)(int64_t)((uint64_t)(s[0] - '0') * POW10_INT[n] + fraction);
    *out = exponent >= 0 ? value * POW10[exponent] : value / POW10[-exponent];
    return x + 4;
}
#endif

/* numpy's scientific form at s, "d." then 1 to 8 digits, 'e' or 'E', a sign and two digits not followed
   by a digit (what np.array2string prints for a float32 array with its default precision, 8, every
   value with the digits the array needs): its end and its value in *out, the same one operation on the
   same mantissa and power of ten as number_at (so the same double), with word tests in place of its
   byte loops; NULL for number_at to read it (another form, a negative number, the array's end within
   the form, a power of ten past 10^22). */
INLINE const unsigned char *numpy_e_at(const unsigned char *s, const unsigned char *e, double *out) {
#if SWAR
    uint64_t word;
    if (e - s < 10 || !digit(s[0]) || s[1] != '.') return NULL;
    memcpy(&word, s + 2, 8);                             /* the digits after the point, and what follows */
    word ^= 0x3030303030303030ULL;
    uint64_t other = not_digits(word);
    if (other == 0) return numpy_e_tail(s, e, 8, eight_digits(word), out);      /* the usual 8: constants */
    int n = __builtin_ctzll(other) >> 3;
    return n == 0 ? NULL : numpy_e_tail(s, e, n, eight_digits(word << (8 * (8 - n))), out);   /* as digits_at */
#else
    (void)s, (void)e, (void)out;
    return NULL;
#endif
}

/* The number that is exactly [s, e) (already stripped) into *out; 0 when it is not one. */
static int number(const unsigned char *s, const unsigned char *e, double *out) {
    const unsigned char *end = NULL;
    return number_at(s, e, &end, out) && end == e;
}

/* Offset of the first byte >= 0x80 in [data, data + len), or -1. */
static int64_t first_non_ascii(const unsigned char *data, int64_t len) {
    int64_t i = 0;
    for (; i + 32 <= len; i += 32) {                     /* four words at a time: one test */
        uint64_t word[4];
        memcpy(word, data + i, 32);
        if ((word[0] | word[1] | word[2] | word[3]) & 0x8080808080808080ULL) break;
    }
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        memcpy(&word, data + i, 8);
        if (word & 0x8080808080808080ULL) break;
    }
    for (; i < len; i++) if (data[i] & 0x80) return i;
    return -1;
}

#endif
