/* One open-addressing table that numbers distinct keys in order of first appearance, for the two stem numberings
   (dumpstems.h: API entry stems; callstems.c: matching's call stems). `table` holds `slots` entries (a power of two,
   more than the rows; Python zeroed it), each 0 or 1 + the first row of a distinct key; `code` the numbers given so
   far, `first` each number's first row. Whether two rows hold the same key is the caller's (`same`). Nothing is
   allocated. */

typedef int (*same_key)(const void *context, int64_t other);

/* FNV-1a of [p, p + length) (inline: dumpscan.c hashes with dumpjson.h's word_hash and no longer calls it). */
static inline uint64_t fnv1a(const unsigned char *p, int64_t length) {
    uint64_t h = 1469598103934665603ull;
    for (int64_t i = 0; i < length; i++) h = (h ^ p[i]) * 1099511628211ull;
    return h;
}

/* The number of `row`'s key, whose hash is `hash`: an earlier row's number when `same(context, that row)`, else
   the next number (`*distinct` grows, `first` records the row). */
static int64_t span_code(int64_t *table, int64_t slots, uint64_t hash, int64_t row, const int64_t *code,
                         int64_t *first, int64_t *distinct, same_key same, const void *context) {
    uint64_t slot = hash & (uint64_t)(slots - 1);
    for (;;) {
        int64_t held = table[slot];
        if (held == 0) {                                                 /* a key not seen before */
            table[slot] = row + 1;
            first[*distinct] = row;
            return (*distinct)++;
        }
        if (same(context, held - 1)) return code[held - 1];
        slot = (slot + 1) & (uint64_t)(slots - 1);
    }
}
