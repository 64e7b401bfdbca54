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

#include "floatshort.h"

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

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
