/* repr() of float64 values, for workbench/report/float_repr.py (the CSV's float cells).

   Python's repr prints the shortest decimal that reads back to the same double (the closest one to it when
   several have that length, ties to an even last digit; bounds included when the significand is even, as
   round-half-even reading includes them), in fixed notation when its decimal point position is in (-4, 16],
   otherwise as d.ddde±XX. Python finds those digits with big-number arithmetic (dtoa mode 0), about half a
   microsecond for the 17-digit values a comparison prints. Here they come from three 128-bit products by a
   power of five and a few divisions by ten (the method of Ryu, Adams, PLDI 2018): the interval of decimals
   that read back is bounded at the right power of ten, and digits are removed while its bounds still differ.
   The powers of five (125 significant bits each, two uint64 words, low first) are computed exactly by Python
   (float_repr.py) and passed in with their counts, which are checked here; `out` holds `cap` bytes, which
   must be at least LINE bytes a value. Each value's text is followed by a newline; nothing is allocated. */
#include <stdint.h>
#include <string.h>

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

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
    int n = 0;
    for (uint64_t rest = digits; rest; rest /= 10) text[19 - n++] = (char)('0' + rest % 10);
    const char *d = text + 20 - n;
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

/* Each value's repr and a newline into out; returns the bytes written without the last newline, or -1 when
   a table or `out` is too small. */
int64_t floatrepr_lines(const double *values, int64_t count, const uint64_t *inv, int64_t ninv,
                        const uint64_t *pow, int64_t npow, char *out, int64_t cap) {
    if (count < 1 || ninv < INV_NEEDED || npow < POW_NEEDED || cap / LINE < count) return -1;
    char *p = out;
    for (int64_t k = 0; k < count; k++) {
        p += repr_one(values[k], inv, pow, p);
        *p++ = '\n';
    }
    return (int64_t)(p - out) - 1;
}
