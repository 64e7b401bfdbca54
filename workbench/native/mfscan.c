/* Compiled scanner for MindFormers logs (workbench/logs/mindformers_native.py, mindformers_scan.py).

   It reads a chunk of whole lines given as (pointer, length): the bytes are NOT NUL-terminated and
   nothing past `len` is read. It never allocates: numbers go into arrays Python allocated, with their
   capacity. It executes and follows nothing from the input. Numbers: lognum.h. */
#define _GNU_SOURCE
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "lognum.h"
#include "mfblock.h"

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

enum { KIND_DROP = -1 };          /* key_kind: not in the YAML, else a metric code >= 0 */
#define CODE_MAX 128              /* metric codes are int8 */

/* ------------------------------------------------------------------ MindFormers logs --------------

   mfscan_mindformers reads the lines of a chunk that the exact per-line parser (mindformers._line)
   would read the same simple way, and hands back (stops before) any other:
     - a line without "Epoch:[", "norm_size:" or "Param groups = {": nothing to read;
     - a step line, ASCII: "Epoch:[" s* D{1,9} "/" s* D{1,9} "]," s* "step:[" s* D{1,12} "/" s* D{1,12} "],"
       then pieces split on ", ", each "key:value" whose key (as printed) Python passed in and whose
       value is what values.number reads: a plain number, a word (none, nan, true, false, inf, -inf:
       any case), either in "[ ]" (or "[current/mean]"), with the key's unit; s is what Python's str
       regex calls \s;
     - a "norm_size:" line whose text from "norm_size:" on is the one Python read last (its sizes);
       then lines holding "local_norm:", then the array, read by mfscan_norm_block with norm_size's
       count (a block stays open across a return: open_block).
   Rows go into arrays Python allocated (rows_cap, blocks_cap, values_cap); when one is full it stops
   before the line (MF_FULL). Blocks wait for the next step line, which gives them its step. */
enum { MF_DONE = 0, MF_BACK = 1, MF_FULL = 2 };
#define MAX_PIECES 64

typedef struct {
    const unsigned char *keys;     /* the keys of step-line pieces as printed, concatenated */
    const int64_t *key_start;      /* nkeys + 1 offsets */
    const int32_t *key_kind;       /* metric code (< CODE_MAX), or KIND_DROP: not in the YAML */
    const int32_t *key_loss;       /* 1 for a key whose metric is the loss (and has no unit): "[cur/mean]" */
    const unsigned char *units;    /* each key's unit ("" for none), concatenated */
    const int64_t *unit_start;     /* nkeys + 1 offsets */
    int64_t nkeys;
    const unsigned char *sizes;    /* the last norm_size line Python read, from "norm_size:" to its end */
    int64_t sizes_len, nsizes;     /* its length, and how many sizes it lists (0: none read yet) */
    int64_t *step, *line;          /* series rows, rows_cap of them */
    int8_t *code;
    double *value;
    int64_t rows_cap, rows;
    int64_t *block_line, *block_step, *block_at;   /* blocks: norm_size line, step (-1: waiting), values offset */
    int64_t blocks_cap, blocks;
    double *values;                /* block values, values_cap of them */
    int64_t values_cap, values_used;
    int64_t waiting;               /* blocks since the last step line */
    int64_t last_step;             /* the last step line's step */
    int64_t steps_read, first_step;   /* step lines read since Python reset steps_read, the first one's step */
    int64_t pos, line_no;          /* the next line and its number */
    int64_t open_block;            /* line of the norm_size of a block whose array has not started, or -1 */
    int64_t non_sink;              /* set once a loss piece read "[current/mean]" with a mean */
} mf_scan;

/* Python's \s for str (and what str.strip() removes) among ASCII bytes: \t \n \v \f \r, \x1c-\x1f, space. */
static int pyspace(unsigned char c) { return blank(c) || (c >= 0x1c && c <= 0x1f); }

/* The first `needle` (n >= 1 bytes) in [s, e), or NULL: memchr for its last byte ('[', ':', '{': rare in
   the long lines, norm_size's 5 KB and more, where a general memmem costs several instructions a byte),
   then the bytes before it compared. */
static const unsigned char *find(const unsigned char *s, const unsigned char *e, const char *needle, size_t n) {
    const unsigned char *p = s + n - 1, *last;
    if ((size_t)(e - s) < n) return NULL;
    while (p < e && (last = memchr(p, (unsigned char)needle[n - 1], (size_t)(e - p))) != NULL) {
        if (memcmp(last - (n - 1), needle, n - 1) == 0) return last - (n - 1);
        p = last + 1;
    }
    return NULL;
}

static int ascii(const unsigned char *s, const unsigned char *e) { return first_non_ascii(s, e - s) < 0; }

/* At *p: s* then 1..max digits then `stop` (one byte); their value in *out and *p past `stop`. */
static int counter(const unsigned char **p, const unsigned char *e, int max, unsigned char stop, int64_t *out) {
    const unsigned char *q = *p;
    int64_t value = 0;
    int n = 0;
    while (q < e && pyspace(*q)) q++;
    for (; q < e && digit(*q); q++, n++) if (n < 18) value = value * 10 + (*q - '0');
    if (n < 1 || n > max || q >= e || *q != stop) return 0;
    *p = q + 1;
    *out = value;
    return 1;
}

static int mf_key(const mf_scan *st, const unsigned char *s, const unsigned char *e) {
    for (int64_t k = 0; k < st->nkeys; k++) {
        int64_t n = st->key_start[k + 1] - st->key_start[k];
        if (n == e - s && memcmp(st->keys + st->key_start[k], s, (size_t)n) == 0) return (int)k;
    }
    return -1;
}

static void py_strip(const unsigned char **s, const unsigned char **e) {
    while (*s < *e && pyspace(**s)) (*s)++;
    while (*e > *s && pyspace((*e)[-1])) (*e)--;
}

/* The word (none nan false true inf -inf, any case) that is exactly [s, e): its value; 0 if none. */
static int word(const unsigned char *s, const unsigned char *e, double *out) {
    static const char *const words[] = {"none", "nan", "false", "true", "inf", "-inf"};
    static const double values[] = {NAN, NAN, 0.0, 1.0, INFINITY, -INFINITY};
    for (int w = 0; w < 6; w++) {
        size_t n = strlen(words[w]), i = 0;
        if ((size_t)(e - s) != n) continue;
        while (i < n && (s[i] >= 'A' && s[i] <= 'Z' ? s[i] + 32 : s[i]) == words[w][i]) i++;
        if (i == n) { *out = values[w]; return 1; }
    }
    return 0;
}

/* values.number(value, unit) for [s, e) when it reads it as a number; 0 for anything else. With
   `mean` (a key whose metric is the loss): *mean is 1 when values.mean_part reads a number after the
   '/' of "[current/mean]" (a non-sink loss line), else 0. */
static int mf_value(const unsigned char *s, const unsigned char *e, const unsigned char *unit, int64_t unit_len,
                    double *out, int *mean) {
    const unsigned char *raw = s, *raw_end = e;
    py_strip(&s, &e);
    if (unit_len > 0 && e - s >= unit_len && memcmp(e - unit_len, unit, (size_t)unit_len) == 0) {
        e -= unit_len;
        py_strip(&s, &e);
    }
    if (e - s > 64 || e == s) return 0;
    if (e - s >= 2 && s[0] == '[' && e[-1] == ']') {
        s++, e--;
        py_strip(&s, &e);
        const unsigned char *slash = memchr(s, '/', (size_t)(e - s));
        if (slash != NULL) {                                 /* inner.split("/", 1)[0].strip() */
            e = slash;
            py_strip(&s, &e);
        }
        if (memchr(s, ' ', (size_t)(e - s)) != NULL) return 0;
    }
    if (!word(s, e, out) && !(e > s && number(s, e, out))) return 0;
    if (mean != NULL) {                                      /* values.mean_part(value) */
        double ignored;
        py_strip(&raw, &raw_end);
        const unsigned char *slash = raw_end - raw >= 2 && raw[0] == '[' && raw_end[-1] == ']'
                                     ? memchr(raw + 1, '/', (size_t)(raw_end - raw - 2)) : NULL;
        *mean = slash != NULL && mf_value(slash + 1, raw_end - 1, unit, 0, &ignored, NULL);
    }
    return 1;
}

/* The pieces after the step brackets, [p, b): their rows; 0 to hand the line back. */
static int mf_pieces(mf_scan *st, const unsigned char *p, const unsigned char *b, int64_t step) {
    int32_t codes[MAX_PIECES];
    double values[MAX_PIECES];
    int n = 0, non_sink = 0;
    while (1) {
        const unsigned char *cut = find(p, b, ", ", 2), *end = cut ? cut : b;
        const unsigned char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon != NULL) {
            int k = mf_key(st, p, colon);
            if (k < 0) return 0;
            if (st->key_kind[k] != KIND_DROP) {
                if (n >= MAX_PIECES || st->key_kind[k] < 0 || st->key_kind[k] >= CODE_MAX) return 0;
                int mean = 0;
                if (!mf_value(colon + 1, end, st->units + st->unit_start[k], st->unit_start[k + 1] - st->unit_start[k],
                              &values[n], st->key_loss[k] ? &mean : NULL)) return 0;
                non_sink |= mean;
                codes[n++] = st->key_kind[k];
            }
        }
        if (cut == NULL) break;
        p = cut + 2;
    }
    if (st->rows + n > st->rows_cap) return -1;
    st->non_sink |= non_sink;
    for (int i = 0; i < n; i++, st->rows++) {
        st->step[st->rows] = step;
        st->line[st->rows] = st->line_no;
        st->code[st->rows] = (int8_t)codes[i];
        st->value[st->rows] = values[i];
    }
    return 1;
}

/* A step line at [a, b), "Epoch:[" at e: MF_DONE when read, MF_BACK or MF_FULL. */
static int mf_step_line(mf_scan *st, const unsigned char *e, const unsigned char *b) {
    const unsigned char *p = e + 7;
    int64_t epoch, epochs, step, steps;
    if (!counter(&p, b, 9, '/', &epoch) || !counter(&p, b, 9, ']', &epochs)) return MF_BACK;
    if (p >= b || *p++ != ',') return MF_BACK;
    while (p < b && pyspace(*p)) p++;
    if (b - p < 6 || memcmp(p, "step:[", 6) != 0) return MF_BACK;
    p += 6;
    if (!counter(&p, b, 12, '/', &step) || !counter(&p, b, 12, ']', &steps)) return MF_BACK;
    if (p >= b || *p++ != ',') return MF_BACK;                  /* no ',': a monitor line */
    while (p < b && pyspace(*p)) p++;
    if (epoch > 1 && steps > (INT64_MAX - step) / (epoch - 1)) return MF_BACK;
    int64_t global = (epoch - 1) * steps + step;
    int read = mf_pieces(st, p, b, global);
    if (read <= 0) return read < 0 ? MF_FULL : MF_BACK;
    if (st->steps_read++ == 0) st->first_step = global;
    for (int64_t i = st->blocks - st->waiting; i < st->blocks; i++) st->block_step[i] = global;
    st->waiting = 0;
    st->last_step = global;
    return MF_DONE;
}

/* The array of the open block at [a, ...): MF_DONE when read (st->pos, line_no past it), else MF_BACK
   or MF_FULL. */
static int mf_array(mf_scan *st, const unsigned char *data, int64_t len) {
    if (st->blocks >= st->blocks_cap || st->values_cap - st->values_used < st->nsizes) return MF_FULL;
    int64_t stop = 0, ends = 0;
    int64_t count = mfscan_norm_block(data, len, st->pos, st->values + st->values_used, st->nsizes, &stop, &ends);
    if (count != st->nsizes) return MF_BACK;
    st->block_line[st->blocks] = st->open_block;
    st->block_step[st->blocks] = -1;
    st->block_at[st->blocks++] = st->values_used;
    st->values_used += count;
    st->waiting++;
    st->open_block = -1;
    st->line_no += ends;
    st->pos = stop;                                          /* the array's last line end (or len) */
    return MF_DONE;
}

/* One line [a, b) outside a block: MF_DONE when read, else MF_BACK or MF_FULL. */
static int mf_line(mf_scan *st, const unsigned char *a, const unsigned char *b) {
    const unsigned char *e = find(a, b, "Epoch:[", 7);
    if (e != NULL) return ascii(a, b) ? mf_step_line(st, e, b) : MF_BACK;
    const unsigned char *sizes = find(a, b, "norm_size:", 10);
    if (sizes != NULL) {
        if (st->nsizes <= 0 || !ascii(a, b) || b - sizes != st->sizes_len
            || memcmp(sizes, st->sizes, (size_t)st->sizes_len) != 0) return MF_BACK;
        st->open_block = st->line_no;
        return MF_DONE;
    }
    return find(a, b, "Param groups = {", 16) != NULL ? MF_BACK : MF_DONE;
}

/* Read the chunk [data, data + len) from st->pos: MF_DONE at its end, MF_BACK before a line for the
   Python parser (st->pos, st->line_no: that line), MF_FULL before a line whose rows do not fit. */
int mfscan_mindformers(mf_scan *st, const unsigned char *data, int64_t len) {
    while (st->pos <= len) {
        const unsigned char *a = data + st->pos;
        const unsigned char *nl = memchr(a, '\n', (size_t)(len - st->pos));
        const unsigned char *b = nl ? nl : data + len;
        int status;
        if (st->open_block < 0) {
            status = mf_line(st, a, b);
        } else if (find(a, b, "local_norm:", 11) != NULL) {
            status = MF_DONE;
        } else {
            status = mf_array(st, data, len);
            if (status == MF_DONE) {                           /* st->pos: the array's last line end */
                if (st->pos >= len) break;
                st->pos++;
                st->line_no++;
                continue;
            }
        }
        if (status != MF_DONE) return status;
        if (nl == NULL) break;
        st->pos = nl + 1 - data;
        st->line_no++;
    }
    st->pos = len + 1;
    return MF_DONE;
}
