/* The last line's template, for logscan.c (included after megatron_scan and the prototype of
   expected_field; sort_fields is defined there): a line whose text between its numbers is byte for byte
   the last one's is taken without matching its keys again. Reads only inside the ranges it is given,
   copies at most TEMPLATE_BYTES. */

/* What the last line taken field by field looked like, when all its fields were kept metrics: the
   bytes between its values (from the first '|' to the first value, between two values, and from the
   last value to the last '|'), each field's key and the keys' SEEN_* flags. A line whose text between
   its numbers is byte for byte that text has the same fields, keys and flags (its numbers are read by
   number_at, which stops at the blank or '|' the text goes on with, as the field-by-field path
   does): it is taken without matching keys again. guess: each field's key in the last line, for
   expected_field. */
#define TEMPLATE_BYTES 4096
typedef struct {
    int64_t guess[MAX_FIELDS];
    unsigned char text[TEMPLATE_BYTES];
    int32_t start[MAX_FIELDS + 2];     /* piece i is text[start[i], start[i + 1]); piece count: the tail */
    int32_t keys[MAX_FIELDS];
    int32_t perm[MAX_FIELDS];          /* the fields in table order (sort_fields) */
    int count;                         /* 0: no template */
    int ascii;                         /* the text holds no byte >= 0x80 */
    int64_t flags;
} line_memo;

/* The fields after the first '|' (at bar) of a line shaped as memo's template: their count, or -1. */
static int template_fields(const line_memo *memo, const unsigned char *bar, const unsigned char *b, double *values) {
    const unsigned char *p = bar;
    for (int i = 0; i <= memo->count; i++) {
        int64_t n = memo->start[i + 1] - memo->start[i];
        if (b - p < n || !same(p, memo->text + memo->start[i], n)) return -1;
        p += n;
        if (i < memo->count && !number_at(p, b, &p, &values[i])) return -1;
    }
    for (; p < b; p++) if (!blank(*p)) return -1;          /* after the last '|': blanks only */
    return memo->count;
}

/* The template of a line taken field by field whose `count` fields were all kept: values[i] was read
   from [vs[i], ve[i]), the last '|' ends before `last`. */
static void sort_fields(const megatron_scan *st, const int32_t *keys, int count, int32_t *perm);

static void keep_template(line_memo *memo, const megatron_scan *st, const unsigned char *bar, const unsigned char *last,
                          const unsigned char **vs, const unsigned char **ve, const int32_t *keys, int count) {
    int32_t at = 0;
    memo->count = 0;
    if (count < 1) return;
    memo->flags = 0;
    for (int i = 0; i <= count; i++) {
        const unsigned char *from = i == 0 ? bar : ve[i - 1], *to = i == count ? last : vs[i];
        if (to - from > TEMPLATE_BYTES - at) return;
        memcpy(memo->text + at, from, (size_t)(to - from));
        memo->start[i] = at;
        at += (int32_t)(to - from);
        if (i < count) {
            memo->keys[i] = keys[i];
            memo->flags |= st->key_flags[keys[i]];
        }
    }
    memo->start[count + 1] = at;
    memo->ascii = first_non_ascii(memo->text, at) < 0;
    sort_fields(st, memo->keys, count, memo->perm);
    memo->count = count;
}
