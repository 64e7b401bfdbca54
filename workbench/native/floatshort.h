/* Python's repr of a double (the shortest round-trip digits by the Ryu method), for floatrepr.c (the CSV's and
   the JSON's float cells a line each) and csvrows.c (a CSV's rows whole): see floatrepr.c for the method. The
   tables of powers of five come from Python (workbench/report/float_repr.py); each caller checks their counts
   (INV_NEEDED, POW_NEEDED) before calling repr_one, which writes at most LINE - 1 bytes. */
#ifndef WORKBENCH_FLOATSHORT_H
#define WORKBENCH_FLOATSHORT_H

#include <stdint.h>
#include <string.h>

typedef unsigned __int128 u128;

enum { POW5_BITS = 125, LINE = 25, INV_NEEDED = 292, POW_NEEDED = 326, BIAS = 1023, FRACTION_BITS = 52 };

/* ceil(log2(5^e)) for 0 < e < 3529 (1 for e = 0), floor(log10(2^e)), floor(log10(5^e)): exact in the ranges
   a double's exponent reaches (the multipliers are the usual fixed-point approximations). */
static int pow5_bits(int e) { return (int)(((uint32_t)e * 1217359u) >> 19) + 1; }
static int log10_pow2(int e) { return (int)(((uint32_t)e * 78913u) >> 18); }
static int log10_pow5(int e) { return (int)(((uint32_t)e * 732923u) >> 20); }

/* floor(m * factor / 2^shift), factor a table entry (low word, high word), shift >= 64. */
static uint64_t mul_shift(uint64_t m, const uint64_t *factor, int shift) {
    u128 low = (u128)m * factor[0], high = (u128)m * factor[1];
    return (uint64_t)(((low >> 64) + high) >> (shift - 64));
}

static int fives(uint64_t v) {                       /* how many times 5 divides v (v > 0) */
    int count = 0;
    while (v % 5 == 0) { v /= 5; count++; }
    return count;
}

/* The shortest decimal digits of a finite, nonzero double given by its bits without the sign:
   the value reads back from *digits x 10^*power. */
static void shortest(uint64_t bits, const uint64_t *inv, const uint64_t *pow, uint64_t *digits, int *power) {
    uint64_t fraction = bits & ((1ull << FRACTION_BITS) - 1);
    int biased = (int)(bits >> FRACTION_BITS);
    int e2 = (biased ? biased : 1) - BIAS - FRACTION_BITS - 2;           /* two more bits for the bounds */
    uint64_t m2 = biased ? fraction | (1ull << FRACTION_BITS) : fraction;
    int even = (m2 & 1) == 0;
    uint64_t mv = 4 * m2;
    uint64_t low_gap = (fraction != 0 || biased <= 1) ? 2 : 1;          /* a power of two: the gap below halves */
    uint64_t vr, vp, vm;
    int e10, vm_exact = 0, vr_exact = 0;          /* the bound below / the value itself end in removed zeros */
    if (e2 >= 0) {                                                       /* value x 2^e2 / 10^q */
        int q = log10_pow2(e2) - (e2 > 3);
        const uint64_t *factor = inv + 2 * q;
        int shift = -e2 + q + POW5_BITS + pow5_bits(q) - 1;
        e10 = q;
        vr = mul_shift(mv, factor, shift);
        vp = mul_shift(mv + 2, factor, shift);
        vm = mul_shift(mv - low_gap, factor, shift);
        if (q <= 21) {                    /* only then can one of the three be a multiple of 10^q exactly */
            if (mv % 5 == 0) vr_exact = fives(mv) >= q;
            else if (even) vm_exact = fives(mv - low_gap) >= q;
            else vp -= fives(mv + 2) >= q;                             /* the excluded upper bound */
        }
    } else {                                                             /* value x 5^-e2 / 10^q */
        int q = log10_pow5(-e2) - (-e2 > 1);
        int i = -e2 - q;
        const uint64_t *factor = pow + 2 * i;
        int shift = q - (pow5_bits(i) - POW5_BITS);
        e10 = q + e2;
        vr = mul_shift(mv, factor, shift);
        vp = mul_shift(mv + 2, factor, shift);
        vm = mul_shift(mv - low_gap, factor, shift);
        if (q <= 1) {
            vr_exact = 1;
            if (even) vm_exact = ((~(mv - low_gap)) & 1) >= (uint64_t)q;
            else vp -= 1;
        } else if (q < 63) {
            vr_exact = (mv & ((1ull << (q - 1)) - 1)) == 0;
        }
    }
    int removed = 0, last = 0;
    uint64_t result;
    if (vm_exact || vr_exact) {                                           /* rare: exact ties are possible */
        while (vp / 10 > vm / 10) {
            vm_exact &= vm % 10 == 0;
            vr_exact &= last == 0;
            last = (int)(vr % 10);
            vr /= 10; vp /= 10; vm /= 10; removed++;
        }
        if (vm_exact) {
            while (vm % 10 == 0) {
                vr_exact &= last == 0;
                last = (int)(vr % 10);
                vr /= 10; vp /= 10; vm /= 10; removed++;
            }
        }
        if (vr_exact && last == 5 && vr % 2 == 0) last = 4;              /* exactly half way: to even */
        result = vr + ((vr == vm && (!even || !vm_exact)) || last >= 5);
    } else {
        while (vp / 10 > vm / 10) {
            last = (int)(vr % 10);
            vr /= 10; vp /= 10; vm /= 10; removed++;
        }
        result = vr + (vr == vm || last >= 5);
    }
    while (result % 10 == 0) { result /= 10; removed++; }                /* Python prints no trailing zero */
    *digits = result;
    *power = e10 + removed;
}

/* The decimal digits of value (> 0) written to end at `end`; returns where they start. Eight digits at a
   time are split in 32 bits into four independent pairs (a 17-digit value's divisions are then no longer one
   chain of dependent 64-bit divisions, which took a third of a float cell's time). */
static const char *decimal_digits(uint64_t value, char *end) {
    static const char pairs[] = "00010203040506070809101112131415161718192021222324252627282930313233343536373839"
                                "40414243444546474849505152535455565758596061626364656667686970717273747576777879"
                                "8081828384858687888990919293949596979899";
    while (value >= 100000000) {
        uint32_t eight = (uint32_t)(value % 100000000), high = eight / 10000, low = eight % 10000;
        value /= 100000000;
        end -= 8;
        memcpy(end, pairs + 2 * (high / 100), 2);
        memcpy(end + 2, pairs + 2 * (high % 100), 2);
        memcpy(end + 4, pairs + 2 * (low / 100), 2);
        memcpy(end + 6, pairs + 2 * (low % 100), 2);
    }
    uint32_t rest = (uint32_t)value;
    while (rest >= 100) {
        end -= 2;
        memcpy(end, pairs + 2 * (rest % 100), 2);
        rest /= 100;
    }
    if (rest >= 10) {
        end -= 2;
        memcpy(end, pairs + 2 * rest, 2);
    } else {
        *--end = (char)('0' + rest);
    }
    return end;
}

/* Python's repr of one double into out (at most LINE - 1 bytes); returns the bytes written. */
static int repr_one(double value, const uint64_t *inv, const uint64_t *pow, char *out) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    char *p = out;
    uint64_t magnitude = bits & ~(1ull << 63);
    if ((magnitude >> FRACTION_BITS) == 0x7ff) {
        if (magnitude & ((1ull << FRACTION_BITS) - 1)) { memcpy(p, "nan", 3); return 3; }   /* any sign */
        if (bits >> 63) *p++ = '-';
        memcpy(p, "inf", 3);
        return (int)(p - out) + 3;
    }
    if (bits >> 63) *p++ = '-';
    if (magnitude == 0) { memcpy(p, "0.0", 3); return (int)(p - out) + 3; }
    uint64_t digits;
    int power;
    shortest(magnitude, inv, pow, &digits, &power);
    char text[20];
    const char *d = decimal_digits(digits, text + 20);
    int n = (int)(text + 20 - d);
    int point = power + n;                                /* value = 0.d1d2... x 10^point */
    if (point <= -4 || point > 16) {
        *p++ = d[0];
        if (n > 1) { *p++ = '.'; memcpy(p, d + 1, (size_t)(n - 1)); p += n - 1; }
        int exponent = point - 1;
        *p++ = 'e';
        *p++ = exponent < 0 ? '-' : '+';
        if (exponent < 0) exponent = -exponent;
        if (exponent >= 100) *p++ = (char)('0' + exponent / 100);
        *p++ = (char)('0' + exponent / 10 % 10);
        *p++ = (char)('0' + exponent % 10);
    } else if (point <= 0) {
        memcpy(p, "0.", 2); p += 2;
        memset(p, '0', (size_t)(-point)); p += -point;
        memcpy(p, d, (size_t)n); p += n;
    } else if (point >= n) {
        memcpy(p, d, (size_t)n); p += n;
        memset(p, '0', (size_t)(point - n)); p += point - n;
        memcpy(p, ".0", 2); p += 2;
    } else {
        memcpy(p, d, (size_t)point); p += point;
        *p++ = '.';
        memcpy(p, d + point, (size_t)(n - point)); p += n - point;
    }
    return (int)(p - out);
}

#endif
