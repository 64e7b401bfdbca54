/* The JSON lexer of dumpscan.c (included by it after its Scan type: it uses s->p, s->n, s->i, s->fail
   and, for interning, s->dist and s->table). Every function reads at s->i, never past s->n, and jumps
   to s->fail with SCAN_IRREGULAR on anything it does not read exactly (the caller's Python path then
   decides) or SCAN_FULL when a capacity is too small. Validates as Python's json module does: escapes,
   the number grammar, NaN/Infinity/-Infinity, nesting bounded by s->depth_limit. */

static void irregular(Scan *s) { longjmp(s->fail, SCAN_IRREGULAR); }
static void full(Scan *s) { longjmp(s->fail, SCAN_FULL); }

static inline int peek(Scan *s) { return s->i < s->n ? s->p[s->i] : -1; }

static inline void space(Scan *s) {
    const unsigned char *p = s->p;
    int64_t i = s->i, n = s->n;
    while (i < n && (p[i] == ' ' || p[i] == '\n' || p[i] == '\t' || p[i] == '\r')) i++;
    s->i = i;
}

/* After a member or element: blanks, then its separator. 1 at `closer` (the container ends), 0 at ','
   (another follows); anything else is irregular. */
static inline int container_ends(Scan *s, int closer) {
    space(s);
    int c = peek(s);
    s->i++;
    if (c == closer) return 1;
    if (c != ',') irregular(s);
    return 0;
}

static void expect(Scan *s, int c) {
    space(s);
    if (peek(s) != c) irregular(s);
    s->i++;
}

static int is_hex(int c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); }

#define BYTES_OF(c) (0x0101010101010101ull * (uint64_t)(c))

/* Whether any of the 8 bytes at p (all below s->n) ends a string's plain run: '"', '\\' or a control character.
   A word at a time (the exact "has a byte below n" test: (w - n) & ~w & 0x80 per byte, for n <= 0x80): the
   byte loop's three comparisons a byte were a seventh of the scan, and stack.json's lines are long. */
static inline int special_byte(const unsigned char *p) {
    uint64_t w, quote, slash;
    memcpy(&w, p, sizeof w);
    quote = w ^ BYTES_OF('"');
    slash = w ^ BYTES_OF('\\');
    return (((quote - BYTES_OF(1)) & ~quote) | ((slash - BYTES_OF(1)) & ~slash) | ((w - BYTES_OF(0x20)) & ~w))
           & BYTES_OF(0x80) ? 1 : 0;
}

/* A string at s->i (its opening quote); *off and *len: its raw content. Escapes are validated, and refused
   unless `escapes` (a spelling with escapes would need decoding). Control characters are invalid JSON. */
static void string(Scan *s, int64_t *off, int64_t *len, int escapes) {
    if (peek(s) != '"') irregular(s);
    int64_t start = ++s->i;
    for (;;) {
        while (s->i + 8 <= s->n && !special_byte(s->p + s->i)) s->i += 8;
        while (s->i < s->n && s->p[s->i] != '"' && s->p[s->i] != '\\' && s->p[s->i] >= 0x20) s->i++;
        if (s->i >= s->n) irregular(s);
        unsigned char c = s->p[s->i];
        if (c == '"') break;
        if (c < 0x20) irregular(s);
        if (c == '\\') {
            if (!escapes || s->i + 1 >= s->n) irregular(s);
            unsigned char e = s->p[s->i + 1];
            if (e == 'u') {
                if (s->i + 5 >= s->n) irregular(s);
                for (int k = 2; k < 6; k++)
                    if (!is_hex(s->p[s->i + k])) irregular(s);
                s->i += 6;
            } else if (strchr("\"\\/bfnrt", e) != NULL && e != 0) {
                s->i += 2;
            } else {
                irregular(s);
            }
            continue;
        }
        s->i++;
    }
    *off = start;
    *len = s->i - start;
    s->i++;
}

static int word(Scan *s, const char *text) {
    int64_t size = (int64_t)strlen(text);
    if (s->n - s->i < size || memcmp(s->p + s->i, text, (size_t)size) != 0) return 0;
    s->i += size;
    return 1;
}

static void digits(Scan *s) {
    if (!(peek(s) >= '0' && peek(s) <= '9')) irregular(s);
    while (peek(s) >= '0' && peek(s) <= '9') s->i++;
}

/* The JSON number grammar from s->i; returns whether it has a fraction or an exponent. */
static int number_token(Scan *s) {
    int fraction = 0;
    if (peek(s) == '-') s->i++;
    if (peek(s) == '0') s->i++;
    else digits(s);
    if (peek(s) == '.') {
        s->i++;
        digits(s);
        fraction = 1;
    }
    if (peek(s) == 'e' || peek(s) == 'E') {
        s->i++;
        if (peek(s) == '+' || peek(s) == '-') s->i++;
        digits(s);
        fraction = 1;
    }
    return fraction;
}

/* A number token (JSON grammar, or NaN/Infinity/-Infinity as Python's json reads them). *integer: an
   integer token (no fraction or exponent) of at most 18 digits, its value in *whole. Returns the double
   json.loads then float() give (an integer token: float(int), so "-0" is +0.0); longer integers and
   longer tokens are IRREGULAR. */
static double number(Scan *s, int *integer, int64_t *whole) {
    *integer = 0;
    if (word(s, "NaN")) return NAN;
    if (word(s, "Infinity")) return INFINITY;
    if (word(s, "-Infinity")) return -INFINITY;
    int64_t start = s->i;
    int fraction = number_token(s);
    int64_t size = s->i - start;
    if (!fraction) {
        int negative = s->p[start] == '-';
        if (size - negative > 18) irregular(s);
        int64_t value = 0;
        for (int64_t k = start + negative; k < s->i; k++) value = value * 10 + (s->p[k] - '0');
        *integer = 1;
        *whole = negative ? -value : value;
        return (double)*whole;
    }
    if (size > MAX_NUMBER) irregular(s);
    double value;
    if (s->fast_decimal && decimal_fast(s->p + start, size, &value)) return value;
    char copy[MAX_NUMBER + 1];
    memcpy(copy, s->p + start, (size_t)size);
    copy[size] = 0;
    char *end = NULL;
    value = strtod(copy, &end);
    if (end != copy + size) irregular(s);           /* a locale with another decimal point */
    return value;
}

/* A number token as the scanner reads it (for the tests: decimal.h's path against float()): *fast is 1 when
   decimal.h decided it, 0 when strtod did. Returns 0, or -1 for a token the scanner does not read. */
int dumpscan_number(const unsigned char *text, int64_t size, double *out, int *fast) {
    Scan s;
    memset(&s, 0, sizeof s);
    s.p = text; s.n = size; s.fast_decimal = decimal_fast_usable();
    double probe;
    *fast = s.fast_decimal && size > 0 && decimal_fast(text, size, &probe);
    if (setjmp(s.fail)) return -1;
    int integer;
    int64_t whole;
    *out = number(&s, &integer, &whole);
    return s.i == size ? 0 : -1;
}

static void skip(Scan *s, int64_t depth);

static void skip_container(Scan *s, int64_t depth, int close, int members) {
    if (depth > s->depth_limit) irregular(s);
    s->i++;
    space(s);
    if (peek(s) == close) { s->i++; return; }
    for (;;) {
        space(s);
        if (members) {
            int64_t off, len;
            string(s, &off, &len, 1);
            expect(s, ':');
        }
        skip(s, depth + 1);
        space(s);
        int c = peek(s);
        s->i++;
        if (c == close) return;
        if (c != ',') irregular(s);
    }
}

/* Any JSON value, validated and skipped; `depth`: the nesting of a container it opens. */
static void skip(Scan *s, int64_t depth) {
    space(s);
    int c = peek(s);
    int64_t off, len;
    if (c == '{') skip_container(s, depth, '}', 1);
    else if (c == '[') skip_container(s, depth, ']', 0);
    else if (c == '"') string(s, &off, &len, 1);
    else if (word(s, "true") || word(s, "false") || word(s, "null")) return;
    else if (word(s, "NaN") || word(s, "Infinity") || word(s, "-Infinity")) return;
    else if (c == '-' || (c >= '0' && c <= '9')) number_token(s);        /* any length: only skipped */
    else irregular(s);
}

/* A hash of [p, p + length) eight bytes at a time, for interning: fnv1a's multiply a byte, one after the other,
   was 80 % of intern (a shape's spelling holds its blanks: ~40 bytes, 600k spellings a 200k-row dump). Which
   spellings are equal is decided by their bytes; the hash only spreads them over the slots, so the high bits of
   each product are folded down (the slot is taken from the low ones). */
static inline uint64_t word_hash(const unsigned char *p, int64_t length) {
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    uint64_t h = (uint64_t)length * k, w;
    int64_t i = 0;
    for (; i + 8 <= length; i += 8) {
        memcpy(&w, p + i, sizeof w);
        h = (h ^ w) * k;
        h ^= h >> 32;
    }
    for (w = 0; i < length; i++) w = (w << 8) | p[i];
    h = (h ^ w) * k;
    return h ^ (h >> 29);
}

static int64_t intern(Scan *s, int64_t off, int64_t len) {
    uint64_t hash = word_hash((const unsigned char *)s->p + off, len);
    int64_t slot = (int64_t)(hash & (uint64_t)s->table_mask);
    while (s->table[slot] >= 0) {
        int64_t id = s->table[slot];
        if (s->dist[2 * id + 1] == len && memcmp(s->p + s->dist[2 * id], s->p + off, (size_t)len) == 0) return id;
        slot = (slot + 1) & s->table_mask;
    }
    if (s->ndist >= s->dist_cap) full(s);
    s->table[slot] = s->ndist;
    s->dist[2 * s->ndist] = off;
    s->dist[2 * s->ndist + 1] = len;
    return s->ndist++;
}

static int64_t find(const char *const *names, const int64_t *lens, int64_t count, const unsigned char *text,
                    int64_t len) {
    for (int64_t k = 0; k < count; k++)
        if (lens[k] == len && memcmp(names[k], text, (size_t)len) == 0) return k;
    return -1;
}
