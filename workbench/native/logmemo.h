/* The last line's template, for logscan.c (included after megatron_scan and the prototype of
   expected_field; sort_fields is defined there): a line whose text between its numbers is byte for byte
   the last one's is taken without matching its keys again. Reads only inside the ranges it is given,
   copies at most TEMPLATE_BYTES (LINE_BYTES). */

/* What the last line taken field by field looked like, when all its fields were kept metrics: the
   bytes between its values (from the first '|' to the first value, between two values, and from the
   last value to the last '|'), each field's key and the keys' SEEN_* flags. A line whose text between
   its numbers is byte for byte that text has the same fields, keys and flags (its numbers are read by
   number_at, which stops at the blank or '|' the text goes on with, as the field-by-field path
   does): it is taken without matching keys again. guess: each field's key in the last line, for
   expected_field.

   line: the last line taken as that template, from its first '|' to its end, with where its numbers
   are (vs, ve: offsets into line) and their values. A line of the same length whose bytes differ from
   it only inside numbers is that template too (the text between the numbers is the same), and only the
   numbers that differ are read again (same_line): each must end where the last one did, so the bytes
   every other number's reading looked at (its own and the one after it, in the text) are unchanged. */
#define TEMPLATE_BYTES 4096
#define LINE_BYTES 4096
#define HEAD_BYTES 256
typedef struct {
    int64_t guess[MAX_FIELDS];
    unsigned char text[TEMPLATE_BYTES];
    int32_t start[MAX_FIELDS + 2];     /* piece i is text[start[i], start[i + 1]); piece count: the tail */
    int32_t keys[MAX_FIELDS];
    int32_t perm[MAX_FIELDS];          /* the fields in table order (sort_fields) */
    int32_t shift[MAX_FIELDS];         /* key_shift and key_kind of the field perm[i] */
    int8_t code[MAX_FIELDS];
    int count;                         /* 0: no template */
    int ascii;                         /* the text holds no byte >= 0x80 */
    int64_t flags;
    int64_t line_len;                  /* -1: no line */
    unsigned char line[LINE_BYTES];
    int32_t vs[MAX_FIELDS], ve[MAX_FIELDS];
    double values[MAX_FIELDS];
    /* head: the last templated line from its start to its first '|' after "iteration N/ T" (included). A
       line that starts with those bytes but digit for digit has its "iteration" and that '|' at the same
       offsets (digits make neither), the same needles and is ASCII there when the head was. */
    int64_t head_len, head_it, head_flags;             /* head_len: the '|''s offset, -1: no head */
    int head_ascii;
    unsigned char head[HEAD_BYTES];
} line_memo;

/* The head of the line [a, bar] ("iteration" at it; needles: its SEEN_* flags) as memo's. */
static void remember_head(line_memo *memo, const unsigned char *a, const unsigned char *it, const unsigned char *bar,
                          int64_t needles) {
    memo->head_len = -1;
    if (bar - a >= HEAD_BYTES) return;
    memcpy(memo->head, a, (size_t)(bar - a + 1));
    memo->head_it = it - a;
    memo->head_flags = needles;
    memo->head_ascii = first_non_ascii(a, bar - a) < 0;
    memo->head_len = bar - a;
}

/* Whether the line [a, b) starts with memo's head but digit for digit (the bytes that differ), a word
   at a time (the last one overlapping the one before: a byte seen twice is checked twice). */
static int same_head(const line_memo *memo, const unsigned char *a, const unsigned char *b) {
    int64_t n = memo->head_len + 1;
    if (memo->head_len < 0 || b - a < n || n < 8) return 0;
    for (int64_t i = 0; i < n; i += 8) {
        int64_t at = i + 8 <= n ? i : n - 8;
        uint64_t w, m;
        memcpy(&w, a + at, 8);
        memcpy(&m, memo->head + at, 8);
        for (uint64_t x = w ^ m; x != 0;) {                 /* each differing byte */
            int k = __builtin_ctzll(x) >> 3;
            if (!digit(a[at + k]) || !digit(memo->head[at + k])) return 0;
            x &= ~(0xFFULL << (8 * k));
        }
    }
    return 1;
}

/* The line [bar, b) as memo's last line (its numbers at bar + vs[i] .. bar + ve[i], already in memo). */
static void remember_line(line_memo *memo, const unsigned char *bar, const unsigned char *b, const double *values) {
    memo->line_len = -1;
    if (b - bar > LINE_BYTES) return;
    memcpy(memo->line, bar, (size_t)(b - bar));
    memcpy(memo->values, values, sizeof(double) * (size_t)memo->count);
    memo->line_len = b - bar;
}

/* The number i of the line at bar read again into memo: it must end where memo's did. */
INLINE int reread(line_memo *memo, const unsigned char *bar, const unsigned char *b, int i) {
    const unsigned char *end = NULL;
    return number_at(bar + memo->vs[i], b, &end, &memo->values[i]) && end == bar + memo->ve[i];
}

/* The bytes x (this line's xor memo's line, 8 from offset i) that differ: each inside a number (field:
   a cursor over the numbers, in order), each number read again once (last: the one read last); 0 when a
   byte differs between the numbers or a number does not read the same way. */
INLINE int differing(line_memo *memo, const unsigned char *bar, const unsigned char *b, int64_t i, uint64_t x,
                     int *field, int *last) {
    while (x != 0) {
        int64_t at = i + (__builtin_ctzll(x) >> 3);
        while (*field < memo->count && memo->ve[*field] <= at) (*field)++;
        if (*field == memo->count || at < memo->vs[*field]) return 0;             /* between the numbers */
        if (*field != *last && !reread(memo, bar, b, *field)) return 0;
        *last = *field;
        x = memo->ve[*field] - i >= 8 ? 0 : x & (~0ULL << (8 * (memo->ve[*field] - i)));
    }
    return 1;
}

/* The fields after the first '|' (at bar) of a line that is memo's last line but inside its numbers
   (module doc): their count, values filled, or -1 (memo's line then dropped: the next line goes through
   template_fields). Words are compared four at a time, then one. */
static int same_line(line_memo *memo, const unsigned char *bar, const unsigned char *b, double *values) {
    int64_t len = b - bar, i = 0;
    int field = 0, last = -1;
    if (memo->count < 1 || memo->line_len != len) return -1;
    for (; i + 32 <= len; i += 32) {
        uint64_t w[4], m[4];
        memcpy(w, bar + i, 32);
        memcpy(m, memo->line + i, 32);
        for (int k = 0; k < 4; k++) w[k] ^= m[k];
        if ((w[0] | w[1] | w[2] | w[3]) == 0) continue;
        for (int k = 0; k < 4; k++) {
            if (w[k] != 0 && !differing(memo, bar, b, i + 8 * k, w[k], &field, &last)) goto dropped;
        }
    }
    for (; i < len; i += 8) {
        uint64_t x = 0, w, m;
        if (len - i >= 8) {
            memcpy(&w, bar + i, 8);
            memcpy(&m, memo->line + i, 8);
            x = w ^ m;
        } else {
            for (int64_t k = 0; k < len - i; k++) x |= (uint64_t)(bar[i + k] ^ memo->line[i + k]) << (8 * k);
        }
        if (x != 0 && !differing(memo, bar, b, i, x, &field, &last)) goto dropped;
    }
    memcpy(memo->line, bar, (size_t)len);                  /* once, whole: fewer calls than per number */
    memcpy(values, memo->values, sizeof(double) * (size_t)memo->count);
    return memo->count;
dropped:
    memo->line_len = -1;                                   /* its values may be this line's now */
    return -1;
}

/* The fields after the first '|' (at bar) of a line shaped as memo's template: their count, or -1;
   the line becomes memo's last line. */
static int template_fields(line_memo *memo, const unsigned char *bar, const unsigned char *b, double *values) {
    const unsigned char *p = bar;
    memo->line_len = -1;                                   /* vs, ve are rewritten below */
    for (int i = 0; i <= memo->count; i++) {
        int64_t n = memo->start[i + 1] - memo->start[i];
        if (b - p < n || !same(p, memo->text + memo->start[i], n)) return -1;
        p += n;
        if (i == memo->count) break;
        memo->vs[i] = (int32_t)(p - bar);
        if (!number_at(p, b, &p, &values[i])) return -1;
        memo->ve[i] = (int32_t)(p - bar);
    }
    for (; p < b; p++) if (!blank(*p)) return -1;          /* after the last '|': blanks only */
    remember_line(memo, bar, b, values);
    return memo->count;
}

/* The template of a line taken field by field whose `count` fields were all kept: values[i] was read
   from [vs[i], ve[i]), the last '|' ends before `last`. */
static void sort_fields(const megatron_scan *st, const int32_t *keys, int count, int32_t *perm);

static void keep_template(line_memo *memo, const megatron_scan *st, const unsigned char *bar, const unsigned char *last,
                          const unsigned char *b, const unsigned char **vs, const unsigned char **ve, const int32_t *keys,
                          const double *values, int count) {
    int32_t at = 0;
    memo->count = 0;
    memo->line_len = -1;
    if (count < 1) return;
    memo->flags = 0;
    for (int i = 0; i <= count; i++) {
        const unsigned char *from = i == 0 ? bar : ve[i - 1], *to = i == count ? last : vs[i];
        if (to - from > TEMPLATE_BYTES - at) return;
        memcpy(memo->text + at, from, (size_t)(to - from));
        memo->start[i] = at;
        at += (int32_t)(to - from);
        if (i < count) {
            memo->vs[i] = (int32_t)(vs[i] - bar);
            memo->ve[i] = (int32_t)(ve[i] - bar);
            memo->keys[i] = keys[i];
            memo->flags |= st->key_flags[keys[i]];
        }
    }
    memo->start[count + 1] = at;
    memo->ascii = first_non_ascii(memo->text, at) < 0;
    sort_fields(st, memo->keys, count, memo->perm);
    for (int i = 0; i < count; i++) {
        memo->shift[i] = st->key_shift[memo->keys[memo->perm[i]]];
        memo->code[i] = (int8_t)st->key_kind[memo->keys[memo->perm[i]]];       /* a kept metric: below code_cap */
    }
    memo->count = count;
    remember_line(memo, bar, b, values);
}

/* store_rows for a line taken as memo's template: its codes and shifts looked up once, in keep_template. */
static void store_template_rows(megatron_scan *st, const line_memo *memo, const double *values, int64_t iteration,
                                int64_t rank, int64_t *restrict counts) {
    int64_t at = st->rows;
    int32_t line = (int32_t)st->line_no, step = (int32_t)iteration;      /* take_line checked they fit */
    int32_t *restrict ranks = st->rank + at, *restrict steps = st->step + at, *restrict lines = st->line + at;
    int8_t *restrict codes = st->code + at;
    double *restrict out = st->value + at;
    for (int i = 0; i < memo->count; i++) {
        ranks[i] = (int32_t)rank;
        steps[i] = step + memo->shift[i];
        lines[i] = line;
        codes[i] = memo->code[i];
        counts[memo->code[i]]++;
        out[i] = values[memo->perm[i]];
    }
    st->rows = at + memo->count;
    st->iteration[st->iterations++] = iteration;
}
