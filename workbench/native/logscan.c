/* Compiled scanner for Megatron / MindSpeed-LLM iteration lines (workbench/logs/megatron_native.py).

   It reads a chunk of whole lines given as (pointer, length): the bytes are NOT NUL-terminated and
   nothing past `len` is read. It never allocates: numbers go into arrays Python allocated, with their
   capacity; when one is full it stops before the line it could not store and says where (`pos`), and
   Python continues with fresh arrays. It executes and follows nothing from the input.

   A line is taken here only when it is exactly what the exact Python parser (megatron._slow_line)
   reads the same way:
     [ws]* ( "[default" D{1,18} "]:" | D{1,18} ":" ws )? ... "iteration" ws+ D{1,18} ws* "/" ws* D+ ... "|"
     then fields " key : value |" whose stripped key is one of the keys Python passed in (the keys of
     datasets/log_formats.yaml seen so far: nothing is hard-coded here) and whose stripped value is a
     plain decimal number ([+-]?digits[.digits][(e|E)[+-]digits]) or "nan", and nothing but blanks after
     the last "|".
   Every other line holding "iteration" and "|" is handed back (its offsets and number) for the Python
   parser, so values, notes, errors and line numbers stay those of the exact parser.

   Numbers: lognum.h. MindFormers logs: mfscan.c. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lognum.h"

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

#include "megatron_scan.h"

#include "logline.h"

/* One line holding "iteration" (at `it`) and a '|': its rows into `rows`; the count, or -1 to hand it
   back, -2 to hand it back because it holds a key Python has not passed in yet. */
static int expected_field(const megatron_scan *st, const unsigned char *q, const unsigned char *b, int64_t k,
                          double *value, const unsigned char **r, const unsigned char **vs, const unsigned char **ve);

#include "logmemo.h"

/* The rows of the line [a, b) (it: its "iteration"): their count (keys and values filled), or -1 / -2
   (see scan_lines). A line shaped as memo's template leaves keys alone and sets *templated (its keys
   and their order are memo's) and *unchecked to its first '|': the bytes from there on are the
   template's text, numbers and blanks, ASCII when memo->ascii is (and to a when its head is ASCII too).
   head: the line starts as memo's head (same_head): its first '|' and needles are the head's. */
static int take_line(megatron_scan *st, const unsigned char *a, const unsigned char *b, const unsigned char *it,
                     int head, int32_t *keys, double *values, line_memo *memo, int64_t *iteration, int64_t *rank,
                     int64_t *flags, int *templated, const unsigned char **unchecked) {
    const unsigned char *vs_of[MAX_FIELDS], *ve_of[MAX_FIELDS];
    int64_t *guess = memo->guess;
    int all_kept = 1;
    const unsigned char *p = it + 9;
    int64_t counter = 0;
    int n = 0, count = 0, fields = 0;
    if (p >= b || !blank(*p)) return -1;
    while (p < b && blank(*p)) p++;
    for (; p < b && digit(*p); p++, n++) { if (n < 18) counter = counter * 10 + (*p - '0'); }
    if (n < 1 || n > 18 || counter >= INT32_MAX || st->line_no > INT32_MAX) return -1;   /* shift: at most 1 */
    while (p < b && blank(*p)) p++;
    if (p >= b || *p != '/') return -1;
    for (p++; p < b && blank(*p); p++) {}
    if (p >= b || !digit(*p)) return -1;
    for (n = 0; p < b && digit(*p) && n < 18; p++, n++) {}
    const unsigned char *bar = head ? a + memo->head_len : memchr(p, '|', (size_t)(b - p));
    if (bar == NULL) return -1;
    int64_t head_flags = head ? memo->head_flags : needles(a, it) | needles(p, bar);
    *flags |= head_flags;
    *iteration = counter;
    *rank = rank_of(a, it);
    if (*rank > INT32_MAX) return -1;
    if (memo->count > 0 && (same_line(memo, bar, b, values) == memo->count
                            || template_fields(memo, bar, b, values) == memo->count)) {
        *flags |= memo->flags;
        *templated = 1;
        if (!head) remember_head(memo, a, it, bar, head_flags);
        if (memo->ascii) *unchecked = memo->head_len >= 0 && memo->head_ascii ? a : bar;
        return memo->count;
    }
    for (const unsigned char *q = bar + 1;; fields++) {
        if (fields >= MAX_FIELDS) return -1;
        const unsigned char *ks, *ke, *vs, *ve, *r;
        int64_t k = guess[fields];
        if (expected_field(st, q, b, k, &values[count], &r, &vs_of[count], &ve_of[count])) {
            *flags |= st->key_flags[k];
            keys[count++] = (int32_t)k;
            q = r + 1;
            continue;
        }
        r = memchr(q, '|', (size_t)(b - q));
        if (r == NULL) {                                   /* after the last '|': blanks only */
            const unsigned char *last = q;
            for (; q < b; q++) if (!blank(*q)) return -1;
            if (all_kept && fields == count) keep_template(memo, st, bar, last, b, vs_of, ve_of, keys, values, count);
            break;
        }
        const unsigned char *colon = memchr(q, ':', (size_t)(r - q));
        ks = q, ke = colon ? colon : r, vs = colon ? colon + 1 : r, ve = r;
        strip(&ks, &ke);
        strip(&vs, &ve);
        if (colon == NULL || ks == ke || vs == ve) {       /* the Python parser skips it */
            all_kept = 0;
            *flags |= needles(q, r);
            q = r + 1;
            continue;
        }
        k = key_index(st, ks, (size_t)(ke - ks), k);
        if (k < 0) return -2;                              /* a key Python has not seen yet */
        guess[fields] = k;
        int32_t kind = st->key_kind[k];
        if (kind == KIND_SLOW || kind >= st->code_cap) return -1;
        *flags |= st->key_flags[k];
        if (kind == KIND_DROP) {
            all_kept = 0;
            *flags |= needles(vs, ve);
        } else {
            if (!number(vs, ve, &values[count])) return -1;
            vs_of[count] = vs;
            ve_of[count] = ve;
            keys[count++] = (int32_t)k;
        }
        q = r + 1;
    }
    return count;
}

/* The field at q when it holds key k (the same field of the line above, a metric's) and a plain
   number: its value and its closing '|' (*r); 0 otherwise (the general path decides). */
static int expected_field(const megatron_scan *st, const unsigned char *q, const unsigned char *b, int64_t k,
                          double *value, const unsigned char **r, const unsigned char **vs, const unsigned char **ve) {
    if (k < 0 || st->key_kind[k] < 0 || st->key_kind[k] >= st->code_cap) return 0;
    const unsigned char *key = st->keys + st->key_start[k];
    int64_t n = st->key_start[k + 1] - st->key_start[k];
    const unsigned char *p = skip_blanks(q, b);
    if (b - p <= n || !same(p, key, n)) return 0;
    p = skip_blanks(p + n, b);
    if (p >= b || *p != ':') return 0;
    p = skip_blanks(p + 1, b);
    *vs = p;
    if (!number_at(p, b, &p, value)) return 0;
    *ve = p;
    p = skip_blanks(p, b);
    if (p >= b || *p != '|') return 0;
    *r = p;
    return 1;
}

/* perm: the fields of a line in table order: by key order, then by position (a stable sort). */
static void sort_fields(const megatron_scan *st, const int32_t *keys, int count, int32_t *perm) {
    for (int i = 0; i < count; i++) {
        int j = i;
        for (; j > 0 && st->key_order[keys[perm[j - 1]]] > st->key_order[keys[i]]; j--) perm[j] = perm[j - 1];
        perm[j] = i;
    }
}

static int hand_back(megatron_scan *st, int64_t start, int64_t end) {
    if (st->backs >= st->back_cap) return 0;
    int64_t *slot = st->back + 3 * st->backs++;
    slot[0] = start;
    slot[1] = end;
    slot[2] = st->line_no;
    return 1;
}

static void advance(megatron_scan *st, const unsigned char *data, const unsigned char *nl) {
    if (nl == NULL) {
        st->done = 1;
    } else {
        st->pos = nl + 1 - data;
        st->line_no++;
    }
}

/* The rows of a taken line, in table order (perm), and each row's code counted in counts. */
static void store_rows(megatron_scan *st, const int32_t *keys, const int32_t *perm, const double *values, int count,
                       int64_t iteration, int64_t rank, int64_t *restrict counts) {
    int64_t at = st->rows;
    int32_t line = (int32_t)st->line_no;                 /* take_line checked it fits, and the step, rank */
    int32_t *restrict ranks = st->rank + at, *restrict steps = st->step + at, *restrict lines = st->line + at;
    int8_t *restrict codes = st->code + at;
    double *restrict out = st->value + at;
    const int32_t *kind = st->key_kind, *shift = st->key_shift;
    for (int i = 0; i < count; i++) {
        int32_t k = keys[perm[i]];
        ranks[i] = (int32_t)rank;
        steps[i] = (int32_t)(iteration + shift[k]);
        lines[i] = line;
        codes[i] = (int8_t)kind[k];
        counts[kind[k]]++;
        out[i] = values[perm[i]];
    }
    st->rows = at + count;
    if (count > 0) st->iteration[st->iterations++] = iteration;
}

/* logscan_megatron's loop; rows per code go to counts (CODE_MAX of them). */
static int scan_lines(megatron_scan *st, const unsigned char *data, int64_t len, int64_t *counts) {
    int32_t keys[MAX_FIELDS], last_keys[MAX_FIELDS], perm[MAX_FIELDS];
    double values[MAX_FIELDS];
    line_memo memo;
    int last_count = -1;
    memo.count = 0;
    memo.line_len = memo.head_len = -1;
    for (int i = 0; i < MAX_FIELDS; i++) memo.guess[i] = -1;
    while (!st->done) {
        const unsigned char *a = data + st->pos;
        const unsigned char *nl = memchr(a, '\n', (size_t)(len - st->pos));
        const unsigned char *b = nl ? nl : data + len;
        int head = same_head(&memo, a, b);
        const unsigned char *it = head ? a + memo.head_it : find_iteration(a, b);
        if (it == NULL || (!head && memchr(a, '|', (size_t)(b - a)) == NULL)) {
            if (!st->non_ascii) st->non_ascii = first_non_ascii(a, b - a) >= 0;   /* the line is in cache now */
            st->flags |= needles(a, b);
        } else {
            int64_t iteration = 0, rank = -1, flags = 0;
            int templated = 0;
            const unsigned char *unchecked = b;                /* [a, unchecked) is checked for bytes >= 0x80 */
            int count = take_line(st, a, b, it, head, keys, values, &memo, &iteration, &rank, &flags, &templated,
                                  &unchecked);
            if (!st->non_ascii) st->non_ascii = first_non_ascii(a, unchecked - a) >= 0;
            if (count < 0) {
                if (!hand_back(st, a - data, b - data)) return 1;
                st->flags |= needles(a, b);
                if (count == -2) {                         /* Python reads it, passes its keys in, calls again */
                    st->last_candidate = a - data;
                    advance(st, data, nl);
                    return 2;
                }
            } else {
                if (st->rows + count > st->rows_cap) return 1;
                if (templated) {
                    store_template_rows(st, &memo, values, iteration, rank, counts);
                } else {
                    if (count != last_count || memcmp(keys, last_keys, sizeof(int32_t) * (size_t)count) != 0) {
                        sort_fields(st, keys, count, perm);
                        memcpy(last_keys, keys, sizeof(int32_t) * (size_t)count);
                        last_count = count;
                    }
                    store_rows(st, keys, perm, values, count, iteration, rank, counts);
                }
                st->flags |= flags;
            }
            st->last_candidate = a - data;
        }
        advance(st, data, nl);
    }
    return 0;
}

/* Scan the chunk from st->pos; returns 0 when it is done, 1 when an array is full, 2 after handing
   back a line with a new key (call again, with that key passed in). Codes from code_cap (at most
   CODE_MAX) on are handed back. */
int logscan_megatron(megatron_scan *st, const unsigned char *data, int64_t len) {
    int64_t counts[CODE_MAX] = {0};
    if (st->code_cap > CODE_MAX) st->code_cap = CODE_MAX;
    int status = scan_lines(st, data, len, counts);
    for (int64_t i = 0; i < st->code_cap; i++) st->code_rows[i] += counts[i];
    return status;
}

/* codes[i] = lut[codes[i]] for the n codes (each below 128; the table's sorted category order). */
void logscan_recode(int8_t *codes, int64_t n, const int8_t *lut) {
    for (int64_t i = 0; i < n; i++) codes[i] = lut[(uint8_t)codes[i] & 0x7f];
}

/* Offset of the first byte >= 0x80 in [data, data + len), or -1. */
int64_t logscan_non_ascii(const unsigned char *data, int64_t len) { return first_non_ascii(data, len); }

/* How many '\n' are in [data, data + len). */
int64_t logscan_count_lines(const unsigned char *data, int64_t len) {
    int64_t count = 0;
    const unsigned char *p = data, *e = data + len;
    while (p < e && (p = memchr(p, '\n', (size_t)(e - p))) != NULL) {
        count++;
        p++;
    }
    return count;
}
