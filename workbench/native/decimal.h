/* A JSON number token (its grammar already checked) to the double Python's float() gives, without strtod when
   one correctly rounded operation of the x87's 64-bit significands decides it: dump.json's statistics are
   16-17 digit decimals, and glibc's strtod (multi-precision arithmetic for them, ~100 ns) was a third of
   dumpscan's instructions.

   The token's significant digits w (at most 19: exact in a 64-bit significand) and its power of ten q
   (|q| <= 27: 10^|q| is exact in one too) give w * 10^q or w / 10^-q rounded once to 64 bits, within half a unit
   of its last bit of the exact value. Rounding that to a double's 53 bits gives the exact value's rounding
   unless it lies on a midpoint between two doubles (its 11 dropped bits 0x400) or one unit beside one (where
   the exact value could be on the other side): those, and every other token, return 0 and strtod reads them.
   Where long double is not the x87 format, or the x87 does not round to 64 bits, nothing is decided here. */
#include <float.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) && LDBL_MANT_DIG == 64
#define DECIMAL_FAST 1
static const long double TENS[28] = {1e0L, 1e1L, 1e2L, 1e3L, 1e4L, 1e5L, 1e6L, 1e7L, 1e8L, 1e9L, 1e10L, 1e11L,
                                     1e12L, 1e13L, 1e14L, 1e15L, 1e16L, 1e17L, 1e18L, 1e19L, 1e20L, 1e21L, 1e22L,
                                     1e23L, 1e24L, 1e25L, 1e26L, 1e27L};
#else
#define DECIMAL_FAST 0
#endif

/* Whether the x87 rounds to 64 significant bits now (its default; a changed control word turns this off). */
static int decimal_fast_usable(void) {
#if DECIMAL_FAST
    volatile long double one = 1.0L, tiny = 0x1p-60L;
    return one + tiny != one;
#else
    return 0;
#endif
}

/* Appends a digit to w unless it is a leading zero; 0 past 19 significant digits. */
static inline int decimal_digit(uint64_t *w, int *count, int digit) {
    if (*count == 0 && digit == 0) return 1;
    if (++*count > 19) return 0;
    *w = *w * 10 + (uint64_t)digit;
    return 1;
}

/* Whether the 8 bytes of v (in memory order) are all ASCII digits: each byte's high nibble is 3 and stays 3 when
   6 is added (its low one at most 9); a byte with another high nibble fails the first test whatever carries. */
static inline int eight_digits(uint64_t v) {
    return ((v & 0xf0f0f0f0f0f0f0f0ull) | (((v + 0x0606060606060606ull) & 0xf0f0f0f0f0f0f0f0ull) >> 4))
           == 0x3333333333333333ull;
}

/* The value of 8 ASCII digits (eight_digits(v)), the first in memory the most significant: pairs, then
   quadruples, then the whole, three multiplications instead of eight dependent steps. */
static inline uint64_t eight_value(uint64_t v) {
    v = ((v & 0x0f0f0f0f0f0f0f0full) * 2561) >> 8;
    v = ((v & 0x00ff00ff00ff00ffull) * 6553601) >> 16;
    return ((v & 0x0000ffff0000ffffull) * 42949672960001ull) >> 32;
}

/* The run of digits at *p (before end) appended to w as decimal_digit does one at a time, 8 at a time while they
   stay within 19 significant digits (a statistic's 16-17 digits took 17 dependent steps); *p moves past the run.
   Returns the digits read, or -1 past 19 significant ones. */
static inline int64_t decimal_run(const unsigned char **p, const unsigned char *end, uint64_t *w, int *count) {
    const unsigned char *q = *p, *start = q;
    if (*count == 0)
        while (q < end && *q == '0') q++;                   /* leading zeros are not significant */
    uint64_t v;
    while (end - q >= 8 && *count <= 11 && (memcpy(&v, q, sizeof v), eight_digits(v))) {
        *w = *w * 100000000ull + eight_value(v);             /* below 10^19: fits */
        *count += 8;
        q += 8;
    }
    for (; q < end && *q >= '0' && *q <= '9'; q++)
        if (!decimal_digit(w, count, *q - '0')) return -1;
    *p = q;
    return q - start;
}

/* 1 and *out when decided here, else 0 (the caller uses strtod). [p, p + size) is a whole number token. */
static int decimal_fast(const unsigned char *p, int64_t size, double *out) {
#if DECIMAL_FAST
    const unsigned char *end = p + size;
    int negative = p < end && *p == '-', count = 0;
    uint64_t w = 0;
    int64_t fraction = 0, exponent = 0;
    p += negative;
    if (decimal_run(&p, end, &w, &count) < 0) return 0;
    if (p < end && *p == '.') {
        p++;
        fraction = decimal_run(&p, end, &w, &count);
        if (fraction < 0) return 0;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        int minus = 0;
        p++;
        if (p < end && (*p == '+' || *p == '-')) minus = *p++ == '-';
        for (; p < end && *p >= '0' && *p <= '9'; p++) {
            if (exponent > 1000000) return 0;
            exponent = exponent * 10 + (*p - '0');
        }
        if (minus) exponent = -exponent;
    }
    if (p != end) return 0;
    if (w == 0) { *out = negative ? -0.0 : 0.0; return 1; }
    int64_t q = exponent - fraction;
    if (q < -27 || q > 27) return 0;
    long double r = q < 0 ? (long double)w / TENS[-q] : (long double)w * TENS[q];
    uint64_t significand;
    memcpy(&significand, &r, sizeof significand);            /* the x87 format: the 64-bit significand first */
    if ((significand & 0x7ff) - 0x3ff <= 2) return 0;        /* on or beside a midpoint between doubles */
    double value = (double)r;
    *out = negative ? -value : value;
    return 1;
#else
    (void)p; (void)size; (void)out;
    return 0;
#endif
}
