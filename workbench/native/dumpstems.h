/* The stems of API entry names and their numbering, for workbench/dumps/api_stems.py (`stem_codes`), and names
   looked up among keys by their bytes (`dumpscan_join`, below).

   A name `{head}.{digits}.{forward|backward}` (digits: one or more ASCII 0-9) has the stem (head, pass), as
   api_stems.stem gives it; any other name has none (code -1). The names are `n` (offset, length) rows of `spans`
   into `text` (dump.json's bytes, valid UTF-8, so a '.' byte is the character '.'). Output, in arrays Python
   allocated with the sizes it passed: `code` (each name's stem numbered in order of first appearance, or -1)
   and `first` (each number's first name); `table` is Python's zeroed hash table of `slots` entries (a power of
   two, at least twice `n`), which holds 1 + the first name of each distinct stem. Returns the number of distinct
   stems, or -1 when an argument or a span is out of range (Python then reads the names one by one). Nothing is
   allocated; nothing is executed or followed from the input. */

/* 0 forward, 1 backward, -1 otherwise: the pass the bytes [p, end) spell. */
static int stem_pass(const unsigned char *p, const unsigned char *end) {
    if (end - p == 7 && memcmp(p, "forward", 7) == 0) return 0;
    if (end - p == 8 && memcmp(p, "backward", 8) == 0) return 1;
    return -1;
}

/* The length of the head of `{head}.{digits}.{pass}` at [name, end) with its pass in `*pass`, or -1. */
static int64_t stem_head(const unsigned char *name, const unsigned char *end, int *pass) {
    const unsigned char *dot = end;
    while (dot > name && dot[-1] != '.') dot--;
    if (dot == name) return -1;                                         /* no dot */
    *pass = stem_pass(dot, end);
    if (*pass < 0) return -1;
    const unsigned char *digit = dot - 1;                               /* the dot before the pass */
    while (digit > name && digit[-1] >= '0' && digit[-1] <= '9') digit--;
    if (digit == dot - 1 || digit == name || digit[-1] != '.') return -1;  /* no digits, or no dot before them */
    return (digit - 1) - name;
}

/* Whether (offset, length) lies within `size` bytes. */
static int span_in(int64_t offset, int64_t length, int64_t size) {
    return offset >= 0 && length >= 0 && offset <= size && length <= size - offset;
}

/* Whether a hash table of `slots` entries can hold `entries` rows: a power of two, at least twice as many. */
static int table_fits(int64_t slots, int64_t entries) {
    return entries >= 0 && slots >= 2 && slots >= 2 * entries && (slots & (slots - 1)) == 0;
}

/* dumpjson.h's word_hash, then the pass: fnv1a's multiply a byte was most of a join (~40-byte names, ~80k keys and
   as many names a side). Equal keys are decided by their bytes; the hash only spreads them over the slots. */
static uint64_t stem_hash(const unsigned char *p, int64_t length, int pass) {
    uint64_t h = (word_hash(p, length) ^ (uint64_t)(pass + 1)) * 0x9e3779b97f4a7c15ull;
    return h ^ (h >> 32);
}

struct stem_key { const unsigned char *text, *name; const int64_t *spans; int64_t head; int pass; };

static int same_stem(const void *context, int64_t other_row) {      /* spancodes.h's `same`: head and pass equal */
    const struct stem_key *key = context;
    const unsigned char *other = key->text + key->spans[2 * other_row];
    int other_pass = -1;
    int64_t other_head = stem_head(other, other + key->spans[2 * other_row + 1], &other_pass);
    return other_head == key->head && other_pass == key->pass && memcmp(other, key->name, (size_t)key->head) == 0;
}

int64_t dumpscan_stems(const unsigned char *text, int64_t text_size, const int64_t *spans, int64_t n,
                       int64_t *code, int64_t *first, int64_t *table, int64_t slots) {
    if (text_size < 0 || !table_fits(slots, n)) return -1;
    int64_t distinct = 0, previous = -1, previous_head = -1;
    int previous_pass = -1;
    for (int64_t row = 0; row < n; row++) {
        int64_t offset = spans[2 * row], length = spans[2 * row + 1];
        if (!span_in(offset, length, text_size)) return -1;
        const unsigned char *name = text + offset;
        int pass = -1;
        int64_t head = stem_head(name, name + length, &pass);
        code[row] = -1;
        if (head < 0) continue;
        if (previous >= 0 && previous_head == head && previous_pass == pass &&
            memcmp(text + spans[2 * first[code[previous]]], name, (size_t)head) == 0) {
            code[row] = code[previous];         /* a stem repeated at once (x.0.forward, x.1.forward): no hash visit */
            previous = row;
            continue;
        }
        struct stem_key key = {text, name, spans, head, pass};
        code[row] = span_code(table, slots, stem_hash(name, head, pass), row, code, first, &distinct, same_stem, &key);
        previous = row;
        previous_head = head;
        previous_pass = pass;
    }
    return distinct;
}

/* The slot of `table` (`slots` entries, a power of two; an entry is a row number + 1, 0 where empty) holding a row of
   `rows` ((offset, length) pairs into `rows_text`) whose bytes are the `length` bytes at `bytes`, else the empty slot
   where the probe stopped; `*found`: that row, or -1. */
static uint64_t probe_slot(const int64_t *table, int64_t slots, const int64_t *rows, const unsigned char *rows_text,
                           const unsigned char *bytes, int64_t length, int64_t *found) {
    uint64_t slot = stem_hash(bytes, length, 0) & (uint64_t)(slots - 1);
    for (;;) {
        int64_t held = table[slot];
        if (held == 0) { *found = -1; return slot; }
        int64_t other = held - 1;
        if (rows[2 * other + 1] == length && memcmp(rows_text + rows[2 * other], bytes, (size_t)length) == 0) {
            *found = other;
            return slot;
        }
        slot = (slot + 1) & (uint64_t)(slots - 1);
    }
}

/* Names looked up among keys by their bytes, for workbench/dumps/msprobe_join.py: for each of the `n` (offset,
   length) rows of `spans` into `text`, the index of the row of `keys` (into `keys_text`, `nkeys` rows) holding the
   same bytes, the last such row when `last` is 1 (a JSON object keeps a repeated name's last value), else the
   first; -1 where none. `table`: Python's zeroed hash table of `slots` entries (a power of two, at least twice
   `nkeys`). Returns 0, or -1 when an argument or a row is out of range. Nothing is allocated. */
int64_t dumpscan_join(const unsigned char *text, int64_t text_size, const int64_t *spans, int64_t n,
                      const unsigned char *keys_text, int64_t keys_size, const int64_t *keys, int64_t nkeys,
                      int64_t last, int64_t *out, int64_t *table, int64_t slots) {
    if (n < 0 || text_size < 0 || keys_size < 0 || !table_fits(slots, nkeys)) return -1;
    for (int64_t k = 0; k < nkeys; k++) {
        int64_t offset = keys[2 * k], length = keys[2 * k + 1];
        if (!span_in(offset, length, keys_size)) return -1;
        int64_t other;
        uint64_t slot = probe_slot(table, slots, keys, keys_text, keys_text + offset, length, &other);
        if (other < 0 || last) table[slot] = k + 1;
    }
    for (int64_t row = 0; row < n; row++) {
        int64_t offset = spans[2 * row], length = spans[2 * row + 1];
        if (!span_in(offset, length, text_size)) return -1;
        probe_slot(table, slots, keys, keys_text, text + offset, length, &out[row]);
    }
    return 0;
}

/* dumpscan_join's result where the `n` names are distinct, with the hash table made of the names rather than of the
   keys: the names are packed in a small buffer (dump.json's entry names, a line each), the keys are spread over a
   large file (construct.json, stack.json), so the keys are read once in their order and the random reads fall in
   the names' table and buffer, not in the keys' file. `table`: Python's zeroed table of `slots` entries (a power of
   two, at least twice `n`). Returns 0; -1 as dumpscan_join; -2 where two names are equal (out is then partial:
   Python calls dumpscan_join). Nothing is allocated. */
int64_t dumpscan_join_names(const unsigned char *text, int64_t text_size, const int64_t *spans, int64_t n,
                            const unsigned char *keys_text, int64_t keys_size, const int64_t *keys, int64_t nkeys,
                            int64_t last, int64_t *out, int64_t *table, int64_t slots) {
    if (nkeys < 0 || text_size < 0 || keys_size < 0 || !table_fits(slots, n)) return -1;
    for (int64_t row = 0; row < n; row++) {
        int64_t offset = spans[2 * row], length = spans[2 * row + 1];
        if (!span_in(offset, length, text_size)) return -1;
        out[row] = -1;
        int64_t other;
        uint64_t slot = probe_slot(table, slots, spans, text, text + offset, length, &other);
        if (other >= 0) return -2;
        table[slot] = row + 1;
    }
    for (int64_t k = 0; k < nkeys; k++) {
        int64_t offset = keys[2 * k], length = keys[2 * k + 1];
        if (!span_in(offset, length, keys_size)) return -1;
        int64_t other;                                              /* -1: no name holds this key */
        probe_slot(table, slots, spans, text, keys_text + offset, length, &other);
        if (other >= 0 && (last || out[other] < 0)) out[other] = k;
    }
    return 0;
}

/* The distinct byte strings among `n` (offset, length) rows of `spans` into `text`, numbered in order of first
   appearance: `code` per row, `first` per number (its first row); `table` as above, at least twice `n` slots. A
   row equal to the one before is numbered without a hash table visit. Returns the number of distinct strings, or
   -1 when an argument or a row is out of range. Nothing is allocated. */
int64_t dumpscan_distinct(const unsigned char *text, int64_t text_size, const int64_t *spans, int64_t n,
                        int64_t *code, int64_t *first, int64_t *table, int64_t slots) {
    if (text_size < 0 || !table_fits(slots, n)) return -1;
    int64_t distinct = 0;
    for (int64_t row = 0; row < n; row++) {
        int64_t offset = spans[2 * row], length = spans[2 * row + 1];
        if (!span_in(offset, length, text_size)) return -1;
        if (row && spans[2 * row - 1] == length &&
            memcmp(text + spans[2 * row - 2], text + offset, (size_t)length) == 0) {
            code[row] = code[row - 1];
            continue;
        }
        uint64_t slot = stem_hash(text + offset, length, 0) & (uint64_t)(slots - 1);
        for (;;) {
            int64_t held = table[slot];
            if (held == 0) {
                table[slot] = row + 1;
                first[distinct] = row;
                code[row] = distinct++;
                break;
            }
            int64_t other = held - 1;
            if (spans[2 * other + 1] == length && memcmp(text + spans[2 * other], text + offset, (size_t)length) == 0) {
                code[row] = code[other];
                break;
            }
            slot = (slot + 1) & (uint64_t)(slots - 1);
        }
    }
    return distinct;
}
