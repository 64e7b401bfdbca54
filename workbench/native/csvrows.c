/* The rows of a report's CSV, for workbench/report/csv_rows.py: the text DataFrame.to_csv(index=False) writes
   after its header, from the table's columns as arrays, without a Python string per cell.

   Each column is one of:
   - FLOAT64: doubles, printed as Python's repr (floatshort.h), NaN (any sign or payload) as an empty cell;
   - INT64: printed in decimal; BOOL8: bytes, 0 as False and anything else as True (numpy's bool is 0 or 1);
   - TEXT: the column's cells, already quoted as the csv module quotes them and encoded in UTF-8, each followed
     by a NUL byte, one after the other in row order; a column whose bytes are not all read by the last row
     had a NUL inside a cell, and is refused.
   Cells are separated by commas and each row ends with a newline. `out` holds `cap` bytes, which Python sized
   from an upper bound of the text (LINE - 1 bytes a float cell, the widest integer of its column, a text
   column's own bytes); each cell is checked against what is left before it is written, every text cell
   against the end of its column's bytes, and every array against `rows`, so nothing is read or written past a
   size Python passed. A double that was printed just before in the same column (a tolerance, a zero) is copied
   from its previous text instead of formatted again. Nothing is allocated: `scratch` (3 int64 a column) holds
   each column's read position or last double. */
#include <stdint.h>
#include <string.h>

#include "floatshort.h"

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

enum { FLOAT64 = 0, INT64 = 1, BOOL8 = 2, TEXT = 3 };
enum { INT_WIDTH = 20 };                          /* "-9223372036854775808" */

/* value in decimal into out (at most INT_WIDTH bytes); returns the bytes written. */
static int int_text(int64_t value, char *out) {
    char digits[INT_WIDTH];
    int count = 0, length = 0;
    uint64_t rest = value < 0 ? 0 - (uint64_t)value : (uint64_t)value;
    do { digits[count++] = (char)('0' + rest % 10); rest /= 10; } while (rest);
    if (value < 0) out[length++] = '-';
    while (count) out[length++] = digits[--count];
    return length;
}

/* One float cell at p (room for LINE - 1 bytes checked); memo holds the column's last bits, where their text
   starts in out and its length (-1: none yet). */
static int float_cell(double value, int64_t *memo, char *out, char *p, const uint64_t *inv, const uint64_t *pow) {
    uint64_t bits;
    memcpy(&bits, &value, sizeof bits);
    if ((bits & ~(1ull << 63)) > 0x7ff0000000000000ull) return 0;            /* NaN: missing, empty */
    if (memo[2] >= 0 && (uint64_t)memo[0] == bits) {
        memmove(p, out + memo[1], (size_t)memo[2]);
        return (int)memo[2];
    }
    int length = repr_one(value, inv, pow, p);
    memo[0] = (int64_t)bits;
    memo[1] = p - out;
    memo[2] = length;
    return length;
}

/* Every row's text into out; returns the bytes written, or -1 when an argument is out of range, a text column
   ends too soon or `out` is too small (the caller then writes the table another way). */
int64_t csvrows_write(int64_t rows, int64_t columns, const int32_t *kinds, const void *const *data,
                      const int64_t *sizes, int64_t *scratch, const uint64_t *inv, int64_t ninv,
                      const uint64_t *pow, int64_t npow, char *out, int64_t cap) {
    if (rows < 0 || columns < 1 || ninv < INV_NEEDED || npow < POW_NEEDED || cap < 0) return -1;
    for (int64_t c = 0; c < columns; c++) {
        if (kinds[c] < FLOAT64 || kinds[c] > TEXT || sizes[c] < 0 || (kinds[c] != TEXT && sizes[c] < rows))
            return -1;
        scratch[3 * c] = 0;                                      /* TEXT: read position; FLOAT64: last bits */
        scratch[3 * c + 1] = 0;
        scratch[3 * c + 2] = -1;
    }
    char *p = out, *end = out + cap;
    for (int64_t r = 0; r < rows; r++) {
        for (int64_t c = 0; c < columns; c++) {
            int64_t left = end - p;
            switch (kinds[c]) {
            case FLOAT64:
                if (left < LINE) return -1;                      /* the cell and its separator */
                p += float_cell(((const double *)data[c])[r], scratch + 3 * c, out, p, inv, pow);
                break;
            case INT64:
                if (left < INT_WIDTH + 1) return -1;
                p += int_text(((const int64_t *)data[c])[r], p);
                break;
            case BOOL8:
                if (left < 6) return -1;
                if (((const uint8_t *)data[c])[r]) { memcpy(p, "True", 4); p += 4; }
                else { memcpy(p, "False", 5); p += 5; }
                break;
            default: {                                           /* TEXT */
                const char *text = (const char *)data[c], *cell = text + scratch[3 * c];
                const char *stop = memchr(cell, 0, (size_t)(sizes[c] - scratch[3 * c]));
                if (stop == NULL || stop - cell >= left) return -1;
                memcpy(p, cell, (size_t)(stop - cell));
                p += stop - cell;
                scratch[3 * c] = stop + 1 - text;
            }
            }
            *p++ = c + 1 < columns ? ',' : '\n';
        }
    }
    for (int64_t c = 0; c < columns; c++)       /* a text column's bytes all read: no cell held a NUL */
        if (kinds[c] == TEXT && scratch[3 * c] != sizes[c]) return -1;
    return p - out;
}
