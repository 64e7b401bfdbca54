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

   Numbers: Clinger's exact fast path (mantissa <= 2^53, |power of ten| <= 22: one correctly rounded
   IEEE operation, the double Python's float() returns); other numbers of the grammar go through
   strtod on a bounded NUL-terminated local copy, and are handed back unless strtod reads all of it. */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

#define MAX_FIELDS 256            /* more fields on one line: handed back */
#define MAX_TOKEN 512             /* longer number for strtod: handed back */
#define EXACT (((uint64_t)1) << 53)

enum { KIND_DROP = -1, KIND_SLOW = -2 };                 /* key_kind below, else a metric code >= 0 */
enum { SEEN_TENSOR = 1, SEEN_LOCAL_NORM = 2 };          /* flags: "tensor(" / "local_norm/" in the chunk */

typedef struct {
    /* keys, from Python */
    const unsigned char *keys;    /* stripped keys, concatenated */
    const int64_t *key_start;     /* nkeys + 1 offsets into keys */
    const int32_t *key_kind;      /* metric code, KIND_DROP (not in the YAML) or KIND_SLOW (has a unit) */
    const int32_t *key_order;     /* rows of one line are sorted by it (then by field position) */
    const int32_t *key_shift;     /* added to the iteration: 1 for values of the next update */
    const int32_t *key_flags;     /* SEEN_* flags of the key's own bytes */
    int64_t nkeys;
    /* rows: one per kept field of a taken line, capacity rows_cap */
    int64_t *rank, *step, *line;
    int32_t *code;
    double *value;
    int64_t rows_cap, rows;
    /* one per taken line with a kept field: its iteration, capacity rows_cap too */
    int64_t *iteration;
    int64_t iterations;
    /* lines handed back: (start, end, number) triples, capacity back_cap triples */
    int64_t *back;
    int64_t back_cap, backs;
    /* where the scan is: offset of the next line and its number; done when the chunk is read */
    int64_t pos, line_no, done;
    int64_t last_candidate;       /* offset of the last line holding "iteration" and "|", or -1 */
    int64_t flags;                /* SEEN_* */
} megatron_scan;

typedef struct { int32_t order, field, code; int64_t step; double value; } row_t;

static int blank(unsigned char c) { return c == ' ' || (c >= '\t' && c <= '\r'); }   /* Python's \s, bytes.strip */
static int digit(unsigned char c) { return c >= '0' && c <= '9'; }

static const unsigned char *find(const unsigned char *s, const unsigned char *e, const char *needle, size_t n) {
    if (e - s < (ptrdiff_t)n) return NULL;
    return memmem(s, (size_t)(e - s), needle, n);
}

/* SEEN_* for the text [s, e): a '(' ending "tensor(" or a '/' ending "local_norm/". */
static int64_t needles(const unsigned char *s, const unsigned char *e) {
    int64_t flags = 0;
    for (const unsigned char *p = s; p < e; p++) {
        if (*p == '(' && p - s >= 6 && memcmp(p - 6, "tensor", 6) == 0) flags |= SEEN_TENSOR;
        else if (*p == '/' && p - s >= 10 && memcmp(p - 10, "local_norm", 10) == 0) flags |= SEEN_LOCAL_NORM;
    }
    return flags;
}

static const double POW10[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12,
                                 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* The number [s, e) (already stripped) into *out; 0 when it is not of the grammar or not read exactly. */
static int number(const unsigned char *s, const unsigned char *e, double *out) {
    const unsigned char *p = s;
    int negative = 0, any = 0, big = 0;
    uint64_t mantissa = 0;
    int64_t fraction = 0, exponent = 0;
    if (p < e && (*p == '+' || *p == '-')) negative = *p++ == '-';
    if (e - s == 3 && memcmp(s, "nan", 3) == 0) { *out = NAN; return 1; }
    for (; p < e && digit(*p); p++, any = 1) {
        if (mantissa > (EXACT - 9) / 10) big = 1; else mantissa = mantissa * 10 + (uint64_t)(*p - '0');
    }
    if (p < e && *p == '.') {
        for (p++; p < e && digit(*p); p++, any = 1, fraction++) {
            if (mantissa > (EXACT - 9) / 10) big = 1; else mantissa = mantissa * 10 + (uint64_t)(*p - '0');
        }
    }
    if (!any) return 0;
    if (p < e && (*p == 'e' || *p == 'E')) {
        int minus = 0, exp_digits = 0;
        p++;
        if (p < e && (*p == '+' || *p == '-')) minus = *p++ == '-';
        for (; p < e && digit(*p); p++, exp_digits++) {
            if (exponent > 100000) big = 1; else exponent = exponent * 10 + (*p - '0');
        }
        if (!exp_digits) return 0;
        if (minus) exponent = -exponent;
    }
    if (p != e) return 0;
    exponent -= fraction;
    if (!big && exponent >= -22 && exponent <= 22) {
        double value = (double)mantissa;                 /* exact: mantissa <= 2^53 */
        value = exponent >= 0 ? value * POW10[exponent] : value / POW10[-exponent];
        *out = negative ? -value : value;
        return 1;
    }
    if (e - s >= MAX_TOKEN) return 0;
    char copy[MAX_TOKEN];
    memcpy(copy, s, (size_t)(e - s));
    copy[e - s] = '\0';
    char *stop = NULL;
    double value = strtod(copy, &stop);
    if (stop != copy + (e - s)) return 0;                /* a locale that reads '.' otherwise */
    *out = value;
    return 1;
}

/* The rank a launcher prefix [s, e) names ("[default3]:", Slurm "3: "), else -1 (lines.RANK_PREFIX). */
static int64_t rank_of(const unsigned char *s, const unsigned char *e) {
    const unsigned char *p = s;
    int64_t rank = 0;
    int n = 0;
    while (p < e && blank(*p)) p++;
    if (e - p >= 8 && memcmp(p, "[default", 8) == 0) {
        for (p += 8; p < e && digit(*p) && n < 19; p++, n++) rank = rank * 10 + (*p - '0');
        return (n >= 1 && n <= 18 && e - p >= 2 && p[0] == ']' && p[1] == ':') ? rank : -1;
    }
    for (; p < e && digit(*p) && n < 19; p++, n++) rank = rank * 10 + (*p - '0');
    return (n >= 1 && n <= 18 && e - p >= 2 && p[0] == ':' && blank(p[1])) ? rank : -1;
}

static int64_t key_index(const megatron_scan *st, const unsigned char *s, size_t n, int64_t guess) {
    if (guess >= 0 && guess < st->nkeys && (size_t)(st->key_start[guess + 1] - st->key_start[guess]) == n
        && memcmp(st->keys + st->key_start[guess], s, n) == 0)
        return guess;
    for (int64_t k = 0; k < st->nkeys; k++) {
        if ((size_t)(st->key_start[k + 1] - st->key_start[k]) == n && memcmp(st->keys + st->key_start[k], s, n) == 0)
            return k;
    }
    return -1;
}

static void strip(const unsigned char **s, const unsigned char **e) {
    while (*s < *e && blank(**s)) (*s)++;
    while (*e > *s && blank((*e)[-1])) (*e)--;
}

/* One line holding "iteration" (at `it`) and a '|': its rows into `rows`; the count, or -1 to hand it
   back, -2 to hand it back because it holds a key Python has not passed in yet. */
static int take_line(megatron_scan *st, const unsigned char *a, const unsigned char *b, const unsigned char *it,
                     row_t *rows, int64_t *guess, int64_t *iteration, int64_t *rank, int64_t *flags) {
    const unsigned char *p = it + 9;
    int64_t counter = 0;
    int n = 0, count = 0, fields = 0;
    if (p >= b || !blank(*p)) return -1;
    while (p < b && blank(*p)) p++;
    for (; p < b && digit(*p); p++, n++) { if (n < 18) counter = counter * 10 + (*p - '0'); }
    if (n < 1 || n > 18) return -1;
    while (p < b && blank(*p)) p++;
    if (p >= b || *p != '/') return -1;
    for (p++; p < b && blank(*p); p++) {}
    if (p >= b || !digit(*p)) return -1;
    for (n = 0; p < b && digit(*p) && n < 18; p++, n++) {}
    const unsigned char *bar = memchr(p, '|', (size_t)(b - p));
    if (bar == NULL) return -1;
    *flags |= needles(a, it) | needles(p, bar);
    *iteration = counter;
    *rank = rank_of(a, it);
    for (const unsigned char *q = bar + 1;; fields++) {
        const unsigned char *r = memchr(q, '|', (size_t)(b - q));
        if (r == NULL) {                                   /* after the last '|': blanks only */
            for (; q < b; q++) if (!blank(*q)) return -1;
            break;
        }
        if (fields >= MAX_FIELDS) return -1;
        const unsigned char *colon = memchr(q, ':', (size_t)(r - q));
        const unsigned char *ks = q, *ke = colon ? colon : r, *vs = colon ? colon + 1 : r, *ve = r;
        strip(&ks, &ke);
        strip(&vs, &ve);
        if (colon == NULL || ks == ke || vs == ve) {       /* the Python parser skips it */
            *flags |= needles(q, r);
            q = r + 1;
            continue;
        }
        int64_t k = key_index(st, ks, (size_t)(ke - ks), guess[fields]);
        if (k < 0) return -2;                              /* a key Python has not seen yet */
        if (st->key_kind[k] == KIND_SLOW) return -1;
        guess[fields] = k;
        *flags |= st->key_flags[k];
        if (st->key_kind[k] == KIND_DROP) {
            *flags |= needles(vs, ve);
        } else {
            row_t *row = &rows[count++];
            if (!number(vs, ve, &row->value)) return -1;
            row->order = st->key_order[k];
            row->field = fields;
            row->code = st->key_kind[k];
            row->step = counter + st->key_shift[k];
        }
        q = r + 1;
    }
    for (int i = 1; i < count; i++) {                      /* stable: by key order, then field position */
        row_t held = rows[i];
        int j = i;
        for (; j > 0 && rows[j - 1].order > held.order; j--) rows[j] = rows[j - 1];
        rows[j] = held;
    }
    return count;
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

/* Scan the chunk from st->pos; returns 0 when it is done, 1 when an array is full, 2 after handing
   back a line with a new key (call again, with that key passed in). */
int logscan_megatron(megatron_scan *st, const unsigned char *data, int64_t len) {
    row_t rows[MAX_FIELDS];
    int64_t guess[MAX_FIELDS];
    for (int i = 0; i < MAX_FIELDS; i++) guess[i] = -1;
    while (!st->done) {
        const unsigned char *a = data + st->pos;
        const unsigned char *nl = memchr(a, '\n', (size_t)(len - st->pos));
        const unsigned char *b = nl ? nl : data + len;
        const unsigned char *it = find(a, b, "iteration", 9);
        if (it == NULL || memchr(a, '|', (size_t)(b - a)) == NULL) {
            st->flags |= needles(a, b);
        } else {
            int64_t iteration = 0, rank = -1, flags = 0;
            int count = take_line(st, a, b, it, rows, guess, &iteration, &rank, &flags);
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
                for (int i = 0; i < count; i++) {
                    int64_t at = st->rows++;
                    st->rank[at] = rank;
                    st->step[at] = rows[i].step;
                    st->line[at] = st->line_no;
                    st->code[at] = rows[i].code;
                    st->value[at] = rows[i].value;
                }
                if (count > 0) st->iteration[st->iterations++] = iteration;
                st->flags |= flags;
            }
            st->last_candidate = a - data;
        }
        advance(st, data, nl);
    }
    return 0;
}

/* Offset of the first byte >= 0x80 in [data, data + len), or -1. */
int64_t logscan_non_ascii(const unsigned char *data, int64_t len) {
    int64_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        memcpy(&word, data + i, 8);
        if (word & 0x8080808080808080ULL) break;
    }
    for (; i < len; i++) if (data[i] & 0x80) return i;
    return -1;
}

/* Number of '\n' in [data, data + len). */
int64_t logscan_count_lines(const unsigned char *data, int64_t len) {
    int64_t count = 0;
    const unsigned char *p = data, *e = data + len;
    while (p < e && (p = memchr(p, '\n', (size_t)(e - p))) != NULL) { count++; p++; }
    return count;
}
