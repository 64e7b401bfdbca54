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

   Numbers: Clinger's exact fast path (at most 15 digits, so below 2^53, |power of ten| <= 22: one correctly rounded
   IEEE operation, the double Python's float() returns); other numbers of the grammar go through
   strtod on a bounded NUL-terminated local copy, and are handed back unless strtod reads all of it. */
#define _GNU_SOURCE
#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

int64_t logscan_non_ascii(const unsigned char *data, int64_t len);
int64_t logscan_norm_block(const unsigned char *data, int64_t len, int64_t pos, double *values, int64_t cap,
                           int64_t *stop, int64_t *lines);

#define MAX_FIELDS 256            /* more fields on one line: handed back */
#define MAX_TOKEN 512             /* longer number for strtod: handed back */
#define CODE_MAX 128              /* metric codes are int8 */

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
    int8_t *code;                 /* key_kind, below code_cap */
    double *value;
    int64_t rows_cap, rows;
    int64_t *code_rows;           /* rows written per code, code_cap of them */
    int64_t code_cap;
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
    int64_t non_ascii;            /* set once a line read so far holds a byte >= 0x80 */
} megatron_scan;

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

/* The first byte at or after p (before e) that is not a blank: one blank byte on its own, runs of
   spaces eight at a time (the first byte that is not a space is the lowest set byte of word ^ spaces). */
INLINE const unsigned char *skip_blanks(const unsigned char *p, const unsigned char *e) {
    if (p < e && !blank(*p)) return p;
    if (e - p >= 2 && *p == ' ' && !blank(p[1])) return p + 1;
    uint64_t word;
    while (SWAR && e - p >= 8) {
        memcpy(&word, p, 8);
        word ^= 0x2020202020202020ULL;
        if (word != 0) {
#if SWAR
            p += __builtin_ctzll(word) >> 3;
#endif
            break;
        }
        p += 8;
    }
    while (p < e && blank(*p)) p++;
    return p;
}

/* [s, s + n) equals key (n bytes), compared a word at a time. */
static int same(const unsigned char *s, const unsigned char *key, int64_t n) {
    uint64_t x, y;
    if (n >= 8) {                                        /* words, the last one overlapping */
        for (int64_t i = 0; i + 8 <= n; i += 8) {
            memcpy(&x, s + i, 8);
            memcpy(&y, key + i, 8);
            if (x != y) return 0;
        }
        memcpy(&x, s + n - 8, 8);
        memcpy(&y, key + n - 8, 8);
        return x == y;
    }
    for (; n > 0; n--) if (*s++ != *key++) return 0;
    return 1;
}

/* The first "iteration" in [s, e), or NULL. */
static const unsigned char *find_iteration(const unsigned char *s, const unsigned char *e) {
    while (e - s >= 9 && (s = memchr(s, 'i', (size_t)(e - s - 8))) != NULL) {
        if (same(s + 1, (const unsigned char *)"teration", 8)) return s;
        s++;
    }
    return NULL;
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

/* The run of digits at p (before e): its end, and mantissa * 10^length + its value in *mantissa
   (wrapping past 2^64: the caller counts the digits). Eight bytes at a time where eight are there:
   the non-digit bytes of a word are those with a high nibble other than 3 or a low one above 9
   (a carry out of a byte above 0xF9 only disturbs the bytes after it, past the first non-digit). */
INLINE const unsigned char *digits_at(const unsigned char *p, const unsigned char *e, uint64_t *mantissa) {
    uint64_t m = *mantissa;
#if SWAR
    while (e - p >= 8) {
        uint64_t word, x;
        memcpy(&word, p, 8);
        x = word ^ 0x3030303030303030ULL;
        uint64_t other = (x & 0xF0F0F0F0F0F0F0F0ULL) | ((x + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL);
        int n = other ? __builtin_ctzll(other) >> 3 : 8;
        if (n == 0) break;
        x = n == 8 ? x : x << (8 * (8 - n));           /* the n digits as the last n of eight, zeros before */
        x = x * 10 + (x >> 8);                           /* pairs, then fours, then eight: the run's value */
        x = (((x & 0x000000FF000000FFULL) * (100 + (1000000ULL << 32)))
             + (((x >> 16) & 0x000000FF000000FFULL) * (1 + (10000ULL << 32)))) >> 32;
        m = m * POW10_INT[n] + x;
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
        double value = (double)mantissa;
        value = exponent >= 0 ? value * POW10[exponent] : value / POW10[-exponent];
        *out = negative ? -value : value;
        return 1;
    }
    return slow_number(s, p, out);
}

/* The number that is exactly [s, e) (already stripped) into *out; 0 when it is not one. */
static int number(const unsigned char *s, const unsigned char *e, double *out) {
    const unsigned char *end = NULL;
    return number_at(s, e, &end, out) && end == e;
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
static int expected_field(const megatron_scan *st, const unsigned char *q, const unsigned char *b, int64_t k,
                          double *value, const unsigned char **r);

static int take_line(megatron_scan *st, const unsigned char *a, const unsigned char *b, const unsigned char *it,
                     int32_t *keys, double *values, int64_t *guess, int64_t *iteration, int64_t *rank, int64_t *flags) {
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
        if (fields >= MAX_FIELDS) return -1;
        const unsigned char *ks, *ke, *vs, *ve, *r;
        int64_t k = guess[fields];
        if (expected_field(st, q, b, k, &values[count], &r)) {
            *flags |= st->key_flags[k];
            keys[count++] = (int32_t)k;
            q = r + 1;
            continue;
        }
        r = memchr(q, '|', (size_t)(b - q));
        if (r == NULL) {                                   /* after the last '|': blanks only */
            for (; q < b; q++) if (!blank(*q)) return -1;
            break;
        }
        const unsigned char *colon = memchr(q, ':', (size_t)(r - q));
        ks = q, ke = colon ? colon : r, vs = colon ? colon + 1 : r, ve = r;
        strip(&ks, &ke);
        strip(&vs, &ve);
        if (colon == NULL || ks == ke || vs == ve) {       /* the Python parser skips it */
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
            *flags |= needles(vs, ve);
        } else {
            if (!number(vs, ve, &values[count])) return -1;
            keys[count++] = (int32_t)k;
        }
        q = r + 1;
    }
    return count;
}

/* The field at q when it holds key k (the same field of the line above, a metric's) and a plain
   number: its value and its closing '|' (*r); 0 otherwise (the general path decides). */
static int expected_field(const megatron_scan *st, const unsigned char *q, const unsigned char *b, int64_t k,
                          double *value, const unsigned char **r) {
    if (k < 0 || st->key_kind[k] < 0 || st->key_kind[k] >= st->code_cap) return 0;
    const unsigned char *key = st->keys + st->key_start[k];
    int64_t n = st->key_start[k + 1] - st->key_start[k];
    const unsigned char *p = skip_blanks(q, b);
    if (b - p <= n || !same(p, key, n)) return 0;
    p = skip_blanks(p + n, b);
    if (p >= b || *p != ':') return 0;
    p = skip_blanks(p + 1, b);
    if (!number_at(p, b, &p, value)) return 0;
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
    int64_t at = st->rows, line = st->line_no;
    int64_t *restrict ranks = st->rank + at, *restrict steps = st->step + at, *restrict lines = st->line + at;
    int8_t *restrict codes = st->code + at;
    double *restrict out = st->value + at;
    const int32_t *kind = st->key_kind, *shift = st->key_shift;
    for (int i = 0; i < count; i++) {
        int32_t k = keys[perm[i]];
        ranks[i] = rank;
        steps[i] = iteration + shift[k];
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
    int64_t guess[MAX_FIELDS];
    int last_count = -1;
    for (int i = 0; i < MAX_FIELDS; i++) guess[i] = -1;
    while (!st->done) {
        const unsigned char *a = data + st->pos;
        const unsigned char *nl = memchr(a, '\n', (size_t)(len - st->pos));
        const unsigned char *b = nl ? nl : data + len;
        const unsigned char *it = find_iteration(a, b);
        if (!st->non_ascii) st->non_ascii = logscan_non_ascii(a, b - a) >= 0;   /* the line is in cache now */
        if (it == NULL || memchr(a, '|', (size_t)(b - a)) == NULL) {
            st->flags |= needles(a, b);
        } else {
            int64_t iteration = 0, rank = -1, flags = 0;
            int count = take_line(st, a, b, it, keys, values, guess, &iteration, &rank, &flags);
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
                if (count != last_count || memcmp(keys, last_keys, sizeof(int32_t) * (size_t)count) != 0) {
                    sort_fields(st, keys, count, perm);
                    memcpy(last_keys, keys, sizeof(int32_t) * (size_t)count);
                    last_count = count;
                }
                store_rows(st, keys, perm, values, count, iteration, rank, counts);
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
int64_t logscan_non_ascii(const unsigned char *data, int64_t len) {
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

/* One numpy-printed local_norm array of a MindFormers log, from its first line at data[pos] to the end
   of the line holding the first ']': its numbers into values (at most cap), *stop the offset of that
   line's end, *lines the line ends inside. The count of numbers, or -1 for the Python parser to read
   it (what mindformers_scan._fast_block takes: the first line starts, after blanks, with '[', '-', a
   digit, '.', 'n' or 'i' and holds no "local_norm:"; every later line starts, after blanks other than
   '\n', with one of those; ASCII; numbers of the grammar above separated by blanks and brackets; no
   more than cap of them). */
int64_t logscan_norm_block(const unsigned char *data, int64_t len, int64_t pos, double *values, int64_t cap,
                           int64_t *stop, int64_t *lines) {
    const unsigned char *p = data + pos, *e = data + len;
    const unsigned char *close = memchr(p, ']', (size_t)(e - p));
    if (close == NULL) return -1;
    const unsigned char *nl = memchr(close, '\n', (size_t)(e - close));
    const unsigned char *end = nl ? nl : e, *first_end = memchr(p, '\n', (size_t)(end - p));
    first_end = first_end ? first_end : end;
    if (first_end - p >= 11 && memmem(p, (size_t)(first_end - p), "local_norm:", 11) != NULL) return -1;
    int64_t count = 0, ends = 0;
    int line_start = 1;
    while (p < end) {
        unsigned char c = *p;
        if (c & 0x80) return -1;
        if (line_start) {                                  /* the first byte after the line's blanks */
            if (c != '\n' && blank(c)) { p++; continue; }
            if (!(c == '[' || c == '-' || digit(c) || c == '.' || c == 'n' || c == 'i')) return -1;
            line_start = 0;
        }
        if (c == '\n') { ends++; line_start = 1; p++; continue; }
        if (blank(c) || c == '[' || c == ']') { p++; continue; }
        if (count >= cap || !number_at(p, end, &p, &values[count])) return -1;
        count++;
        if (p < end && !(blank(*p) || *p == '[' || *p == ']')) return -1;
    }
    if (line_start) return -1;
    *stop = end - data;
    *lines = ends;
    return count;
}

/* ------------------------------------------------------------------ MindFormers logs --------------

   logscan_mindformers reads the lines of a chunk that the exact per-line parser (mindformers._line)
   would read the same simple way, and hands back (stops before) any other:
     - a line without "Epoch:[", "norm_size:" or "Param groups = {": nothing to read;
     - a step line, ASCII: "Epoch:[" s* D{1,9} "/" s* D{1,9} "]," s* "step:[" s* D{1,12} "/" s* D{1,12} "],"
       then pieces split on ", ", each "key:value" whose key (as printed) Python passed in and whose
       value is what values.number reads: a plain number, a word (none, nan, true, false, inf, -inf:
       any case), either in "[ ]", with the key's unit; s is what Python's str regex calls \s;
     - a "norm_size:" line whose text from "norm_size:" on is the one Python read last (its sizes);
       then lines holding "local_norm:", then the array, read by logscan_norm_block with norm_size's
       count (a block stays open across a return: open_block).
   Rows go into arrays Python allocated (rows_cap, blocks_cap, values_cap); when one is full it stops
   before the line (MF_FULL). Blocks wait for the next step line, which gives them its step. */
enum { MF_DONE = 0, MF_BACK = 1, MF_FULL = 2 };
#define MAX_PIECES 64

typedef struct {
    const unsigned char *keys;     /* the keys of step-line pieces as printed, concatenated */
    const int64_t *key_start;      /* nkeys + 1 offsets */
    const int32_t *key_kind;       /* metric code (< CODE_MAX), or KIND_DROP: not in the YAML */
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
} mf_scan;

/* Python's \s for str (and what str.strip() removes) among ASCII bytes: \t \n \v \f \r, \x1c-\x1f, space. */
static int pyspace(unsigned char c) { return blank(c) || (c >= 0x1c && c <= 0x1f); }

static const unsigned char *find(const unsigned char *s, const unsigned char *e, const char *needle, size_t n) {
    if ((size_t)(e - s) < n) return NULL;
    return memmem(s, (size_t)(e - s), needle, n);
}

static int ascii(const unsigned char *s, const unsigned char *e) { return logscan_non_ascii(s, e - s) < 0; }

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

/* values.number(value, unit) for [s, e) when it reads it as a number; 0 for anything else. */
static int mf_value(const unsigned char *s, const unsigned char *e, const unsigned char *unit, int64_t unit_len,
                    double *out) {
    py_strip(&s, &e);
    if (unit_len > 0 && e - s >= unit_len && memcmp(e - unit_len, unit, (size_t)unit_len) == 0) {
        e -= unit_len;
        py_strip(&s, &e);
    }
    if (e - s > 64 || e == s) return 0;
    if (e - s >= 2 && s[0] == '[' && e[-1] == ']') {
        s++, e--;
        py_strip(&s, &e);
        if (memchr(s, '/', (size_t)(e - s)) != NULL || memchr(s, ' ', (size_t)(e - s)) != NULL) return 0;
    }
    return word(s, e, out) || (e > s && number(s, e, out));
}

/* The pieces after the step brackets, [p, b): their rows; 0 to hand the line back. */
static int mf_pieces(mf_scan *st, const unsigned char *p, const unsigned char *b, int64_t step) {
    int32_t codes[MAX_PIECES];
    double values[MAX_PIECES];
    int n = 0;
    while (1) {
        const unsigned char *cut = find(p, b, ", ", 2), *end = cut ? cut : b;
        const unsigned char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon != NULL) {
            int k = mf_key(st, p, colon);
            if (k < 0) return 0;
            if (st->key_kind[k] != KIND_DROP) {
                if (n >= MAX_PIECES || st->key_kind[k] < 0 || st->key_kind[k] >= CODE_MAX) return 0;
                if (!mf_value(colon + 1, end, st->units + st->unit_start[k], st->unit_start[k + 1] - st->unit_start[k],
                              &values[n])) return 0;
                codes[n++] = st->key_kind[k];
            }
        }
        if (cut == NULL) break;
        p = cut + 2;
    }
    if (st->rows + n > st->rows_cap) return -1;
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
    int64_t count = logscan_norm_block(data, len, st->pos, st->values + st->values_used, st->nsizes, &stop, &ends);
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
int logscan_mindformers(mf_scan *st, const unsigned char *data, int64_t len) {
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
