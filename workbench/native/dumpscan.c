/* msprobe dump.json → columns of tensor records, for workbench/dumps/msprobe_native.py.

   The scanner walks the JSON bytes once, bounded by the given length and by a nesting limit, and
   writes into arrays the caller allocated (with capacities it passes): per entry of the top-level
   "data" object its name (offset, length) and the length of its "input_args" list; per record (an
   object with "type" in a list or in a mapping of a body member) the entry, the member's key code,
   the position, the mapping key (offset, length), ids of its type/dtype/shape/md5 spellings and its
   counts, and its statistics as doubles. A spelling id is the index of its first occurrence in
   `dist` (offset, length), found through an open-addressing table the caller sized (exact byte
   comparison, no hashing shortcut). Numbers: integers of up to 18 digits exactly, other numbers
   with decimal.h's one x87 operation where it decides exactly, else strtod on a bounded copy (both
   correctly rounded, as Python's float()), NaN/Infinity/-Infinity as
   Python's json module reads them.

   It never allocates and never reads past `size`. Anything it does not handle exactly (escapes in
   names or spellings, nesting it does not expect, repeated members, values of unexpected types,
   invalid JSON) returns IRREGULAR and the caller runs the pure-Python reader, which decides (result
   or one-line error). FULL: a capacity was too small. */
#include <math.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

const char *workbench_source_hash(void) { return WORKBENCH_SOURCE_HASH; }

enum { SCAN_OK = 0, SCAN_IRREGULAR = 1, SCAN_FULL = 2 };
enum { F_TYPE = 0, F_DTYPE, F_SHAPE, F_NAN, F_INF, F_FIXED };   /* then md5 fields, then stat fields */
/* C_INNER: the position in a nested list, or -1; after C_FIXED, one id per md5 field */
enum { C_ENTRY = 0, C_KEY, C_INDEX, C_SUB_OFF, C_SUB_LEN, C_NULL, C_TYPE, C_DTYPE, C_SHAPE, C_NAN, C_INF,
       C_INNER, C_FIXED };
#define MAX_FIELDS 64
#define MAX_NUMBER 63

typedef struct {
    const unsigned char *p;
    int64_t n, i;
    int64_t depth_limit;
    const char *const *keys; const int64_t *key_lens; int64_t nkeys; int64_t args_code;
    const char *const *fields; const int64_t *field_lens; int64_t nfields, nmd5, nstat;
    int64_t *entries; int64_t entry_cap, nentries;               /* 3 per entry: name off, len, args length */
    int64_t *rows; double *stats; int64_t row_cap, nrows, ncols;
    int64_t *dist; int64_t dist_cap, ndist;                      /* 2 per spelling: off, len */
    int64_t *table; int64_t table_mask;                          /* -1: free */
    int fast_decimal;                                            /* decimal.h's path is usable */
    jmp_buf fail;
} Scan;

#include "decimal.h"
#include "spancodes.h"
#include "dumpjson.h"

#include "dumprecord.h"

/* A body member's value: a list of records/nulls, a mapping of records/nulls, or null. */
static void member(Scan *s, int64_t depth, int64_t entry, int64_t key) {
    int c = peek(s);
    int64_t index = 0;
    if (c == 'n' && word(s, "null")) return;
    if (depth > s->depth_limit) irregular(s);
    if (c == '[') {
        s->i++;
        space(s);
        if (peek(s) == ']') s->i++;
        else for (;;) {
            space(s);
            c = peek(s);
            if (c == '{') record(s, depth + 1, entry, key, index, -1, -1, -1);
            else if (c == '[') inner_list(s, depth + 1, entry, key, index);
            else if (!(c == 'n' && word(s, "null"))) irregular(s);
            index++;
            if (container_ends(s, ']')) break;
        }
        if (key == s->args_code) s->entries[3 * entry + 2] = index;
        return;
    }
    if (c != '{') irregular(s);
    s->i++;
    space(s);
    if (peek(s) == '}') { s->i++; return; }
    for (;;) {
        int64_t off, len;
        space(s);
        string(s, &off, &len, 0);
        if (len == 4 && memcmp(s->p + off, "type", 4) == 0) irregular(s);   /* a record itself */
        expect(s, ':');
        space(s);
        c = peek(s);
        if (c == '{') record(s, depth + 1, entry, key, index, -1, off, len);
        else if (c == 'n' && word(s, "null")) null_row(s, entry, key, index, off, len);
        else irregular(s);
        index++;
        if (container_ends(s, '}')) return;
    }
}

static void body(Scan *s, int64_t depth, int64_t entry) {
    if (depth > s->depth_limit) irregular(s);
    space(s);
    if (peek(s) != '{') irregular(s);
    s->i++;
    space(s);
    if (peek(s) == '}') { s->i++; return; }
    uint64_t seen = 0;
    for (;;) {
        int64_t off, len;
        space(s);
        string(s, &off, &len, 0);
        expect(s, ':');
        space(s);
        int64_t key = find(s->keys, s->key_lens, s->nkeys, s->p + off, len);
        if (key < 0) {
            skip(s, depth + 1);
        } else {
            if (seen & (1ULL << key)) irregular(s);
            seen |= 1ULL << key;
            member(s, depth + 1, entry, key);
        }
        if (container_ends(s, '}')) return;
    }
}

static void data(Scan *s, int64_t depth) {
    if (depth > s->depth_limit) irregular(s);
    s->i++;
    space(s);
    if (peek(s) == '}') { s->i++; return; }
    for (;;) {
        int64_t off, len;
        space(s);
        string(s, &off, &len, 0);
        expect(s, ':');
        if (s->nentries >= s->entry_cap) full(s);
        int64_t entry = s->nentries++;
        s->entries[3 * entry] = off;
        s->entries[3 * entry + 1] = len;
        s->entries[3 * entry + 2] = -1;
        body(s, depth + 1, entry);
        if (container_ends(s, '}')) return;
    }
}

static void document(Scan *s) {
    int found = 0;
    space(s);
    if (peek(s) != '{' || s->depth_limit < 1) irregular(s);
    s->i++;
    space(s);
    if (peek(s) == '}') irregular(s);                      /* no "data" */
    for (;;) {
        int64_t off, len;
        space(s);
        string(s, &off, &len, 0);
        expect(s, ':');
        space(s);
        if (len == 4 && memcmp(s->p + off, "data", 4) == 0) {
            if (found || peek(s) != '{') irregular(s);     /* json.loads keeps the last one; not an object */
            found = 1;
            data(s, 2);
        } else {
            skip(s, 2);
        }
        if (container_ends(s, '}')) break;
    }
    space(s);
    if (!found || s->i != s->n) irregular(s);
}

static int run(Scan *s) {
    int code = setjmp(s->fail);
    if (code != 0) return code;
    document(s);
    return SCAN_OK;
}

/* counts[0..3] ← entries, rows, spellings written, and the byte offset reached (where it stopped). Returns SCAN_OK, SCAN_IRREGULAR or SCAN_FULL. */
int dumpscan(const unsigned char *text, int64_t size, int64_t depth_limit,
             const char *const *keys, const int64_t *key_lens, int64_t nkeys, int64_t args_code,
             const char *const *fields, const int64_t *field_lens, int64_t nmd5, int64_t nstat,
             int64_t *entries, int64_t entry_cap, int64_t *rows, double *stats, int64_t row_cap,
             int64_t *dist, int64_t dist_cap, int64_t *table, int64_t table_size, int64_t *counts) {
    Scan s;
    memset(&s, 0, sizeof s);
    s.p = text; s.n = size; s.depth_limit = depth_limit;
    s.keys = keys; s.key_lens = key_lens; s.nkeys = nkeys; s.args_code = args_code;
    s.fields = fields; s.field_lens = field_lens; s.nmd5 = nmd5; s.nstat = nstat;
    s.nfields = F_FIXED + nmd5 + nstat;
    s.entries = entries; s.entry_cap = entry_cap;
    s.rows = rows; s.stats = stats; s.row_cap = row_cap; s.ncols = C_FIXED + nmd5;
    s.dist = dist; s.dist_cap = dist_cap; s.table = table; s.table_mask = table_size - 1;
    s.fast_decimal = decimal_fast_usable();
    counts[0] = counts[1] = counts[2] = counts[3] = 0;
    if (nkeys > 64 || s.nfields > MAX_FIELDS || table_size < 2 * dist_cap || table_size < 2 ||
        (table_size & (table_size - 1)) != 0 || size < 0)
        return SCAN_IRREGULAR;
    int code = run(&s);
    counts[0] = s.nentries; counts[1] = s.nrows; counts[2] = s.ndist; counts[3] = s.i;
    return code;
}

#include "dumpside.h"
#include "dumplines.h"
#include "dumpstems.h"
#include "dumplayers.h"
#include "jsondepth.h"
