/* An msprobe stack.json and construct.json (dumpconstruct, at the end), for workbench/dumps/msprobe_side.py and msprobe_native.py.
   Included at the end of dumpscan.c: it uses its scanner (Scan, string, expect, space), which never reads
   past `size`.

   dumpside() walks a top-level object whose members are all `id: [[names], [lines]]` and writes into arrays
   the caller allocated: per member its id (offset, length); per name its member index and span; the lines
   are validated and skipped (never decoded). Ids and names with escapes, any other form or type, and invalid
   JSON return IRREGULAR (the caller's json path decides: result or one-line error); FULL: a capacity was too
   small. Nesting is 3 deep. */

typedef struct {
    int64_t *members; int64_t member_cap, nmembers;             /* 2 per member: id off, len */
    int64_t *names; int64_t name_cap, nnames;
} Side;

/* A list of strings; `member` >= 0: their spans are recorded as that member's names (no escapes). */
static void side_strings(Scan *s, Side *o, int64_t member) {
    expect(s, '[');
    space(s);
    if (peek(s) == ']') { s->i++; return; }
    for (;;) {
        int64_t off, len;
        space(s);
        string(s, &off, &len, member < 0);
        if (member >= 0) {
            if (o->nnames >= o->name_cap) full(s);
            int64_t *r = o->names + 3 * o->nnames++;
            r[0] = member; r[1] = off; r[2] = len;
        }
        if (container_ends(s, ']')) return;
    }
}

static void side_document(Scan *s, Side *o) {
    expect(s, '{');
    space(s);
    if (peek(s) == '}') s->i++;
    else for (;;) {
        if (o->nmembers >= o->member_cap) full(s);
        int64_t *r = o->members + 2 * o->nmembers;
        space(s);
        string(s, &r[0], &r[1], 0);
        expect(s, ':');
        expect(s, '[');
        side_strings(s, o, o->nmembers);
        expect(s, ',');
        side_strings(s, o, -1);
        expect(s, ']');
        o->nmembers++;
        if (container_ends(s, '}')) break;
    }
    space(s);
    if (s->i != s->n) irregular(s);
}

static int side_run(Scan *s, Side *o) {
    int code = setjmp(s->fail);
    if (code != 0) return code;
    side_document(s, o);
    return SCAN_OK;
}

/* counts[0..1] <- members and names written. Returns SCAN_OK, SCAN_IRREGULAR or SCAN_FULL. */
int dumpside(const unsigned char *text, int64_t size, int64_t *members, int64_t member_cap,
             int64_t *names, int64_t name_cap, int64_t *counts) {
    Scan s;
    memset(&s, 0, sizeof s);
    s.p = text; s.n = size; s.depth_limit = 3;
    Side o;
    o.members = members; o.member_cap = member_cap; o.nmembers = 0;
    o.names = names; o.name_cap = name_cap; o.nnames = 0;
    counts[0] = counts[1] = 0;
    if (size < 0 || member_cap < 0 || name_cap < 0) return SCAN_IRREGULAR;
    int code = side_run(&s, &o);
    counts[0] = o.nmembers; counts[1] = o.nnames;
    return code;
}

/* construct.json: a top-level object whose members are all `name: "parent"` or `name: null`. dumpconstruct()
   writes 4 per member: the name's offset and length, the parent's offset and length (-1, -1: null). Escapes,
   any other value, invalid JSON: IRREGULAR; FULL: `cap` members were not enough. Nesting is 1 deep. */
static void construct_document(Scan *s, int64_t *pairs, int64_t cap, int64_t *count) {
    expect(s, '{');
    space(s);
    if (peek(s) == '}') s->i++;
    else for (;;) {
        if (*count >= cap) full(s);
        int64_t *r = pairs + 4 * *count;
        space(s);
        string(s, &r[0], &r[1], 0);
        expect(s, ':');
        space(s);
        if (peek(s) == 'n' && word(s, "null")) r[2] = r[3] = -1;
        else string(s, &r[2], &r[3], 0);
        ++*count;
        if (container_ends(s, '}')) break;
    }
    space(s);
    if (s->i != s->n) irregular(s);
}

static int construct_run(Scan *s, int64_t *pairs, int64_t cap, int64_t *count) {
    int code = setjmp(s->fail);
    if (code != 0) return code;
    construct_document(s, pairs, cap, count);
    return SCAN_OK;
}

/* counts[0] <- members written. Returns SCAN_OK, SCAN_IRREGULAR or SCAN_FULL. */
int dumpconstruct(const unsigned char *text, int64_t size, int64_t *pairs, int64_t cap, int64_t *counts) {
    Scan s;
    memset(&s, 0, sizeof s);
    s.p = text; s.n = size; s.depth_limit = 1;
    counts[0] = 0;
    if (size < 0 || cap < 0) return SCAN_IRREGULAR;
    return construct_run(&s, pairs, cap, counts);
}
