/* One tensor record of an msprobe dump.json into one row of dumpscan.c's arrays (included there, after
   dumpjson.h: it uses its Scan, lexer and interning, and never reads past `size`): `record` an object with
   "type" (its spellings interned, its statistics as doubles, each field at most once), `null_row` a null in
   a list, `inner_list` a list inside a member's list, `shape` a list of non-negative integers. */

/* A shape: a list of non-negative integers (no sign, fraction or exponent), its raw text interned. */
static int64_t shape(Scan *s, int64_t depth) {
    if (depth > s->depth_limit) irregular(s);
    int64_t start = s->i++;
    space(s);
    if (peek(s) != ']') {
        for (;;) {
            space(s);
            int64_t first = s->i;
            while (peek(s) >= '0' && peek(s) <= '9') s->i++;
            int64_t digits = s->i - first;
            if (digits == 0 || digits > 18 || (digits > 1 && s->p[first] == '0')) irregular(s);
            int c = peek(s);
            if (c == '.' || c == 'e' || c == 'E') irregular(s);
            space(s);
            c = peek(s);
            if (c == ']') break;
            if (c != ',') irregular(s);
            s->i++;
        }
    }
    s->i++;
    return intern(s, start, s->i - start);
}

/* The next row (not counted yet) with its place filled in, no spellings (-1) and no statistics (NaN). */
static int64_t *blank_row(Scan *s, int64_t entry, int64_t key, int64_t index, int64_t sub_off, int64_t sub_len,
                          int64_t null) {
    if (s->nrows >= s->row_cap) full(s);
    int64_t *row = s->rows + s->nrows * s->ncols;
    double *stat = s->stats + s->nrows * s->nstat;
    row[C_ENTRY] = entry; row[C_KEY] = key; row[C_INDEX] = index; row[C_SUB_OFF] = sub_off;
    row[C_SUB_LEN] = sub_len; row[C_NULL] = null;
    for (int64_t k = C_TYPE; k < s->ncols; k++) row[k] = -1;
    for (int64_t k = 0; k < s->nstat; k++) stat[k] = NAN;
    return row;
}

/* A tensor record (an object with "type"): one row. */
static void record(Scan *s, int64_t depth, int64_t entry, int64_t key, int64_t index, int64_t inner,
                   int64_t sub_off, int64_t sub_len) {
    if (depth > s->depth_limit) irregular(s);
    int64_t *row = blank_row(s, entry, key, index, sub_off, sub_len, 0);
    double *stat = s->stats + s->nrows * s->nstat;
    row[C_INNER] = inner;
    uint64_t seen = 0;
    s->i++;
    space(s);
    if (peek(s) != '}') {
        for (;;) {
            space(s);
            int64_t off, len, id = -1, whole;
            int integer;
            string(s, &off, &len, 0);
            expect(s, ':');
            space(s);
            int64_t field = find(s->fields, s->field_lens, s->nfields, s->p + off, len);
            int c = peek(s);
            if (field < 0) {
                skip(s, depth + 1);
            } else {
                if (seen & (1ULL << field)) irregular(s);
                seen |= 1ULL << field;
                if (field == F_TYPE || field == F_DTYPE) {
                    if (c == 'n' && field == F_DTYPE && word(s, "null")) {
                        id = -1;
                    } else {
                        string(s, &off, &len, 0);
                        id = intern(s, off, len);
                    }
                    row[field == F_TYPE ? C_TYPE : C_DTYPE] = id;
                } else if (field == F_SHAPE) {
                    if (c == 'n' && word(s, "null")) row[C_SHAPE] = -1;
                    else if (c == '[') row[C_SHAPE] = shape(s, depth + 1);
                    else irregular(s);
                } else if (field == F_NAN || field == F_INF) {
                    if (c == 'n' && word(s, "null")) {
                        whole = -1;
                    } else {
                        if (c == '-' || c == 'N' || c == 'I') irregular(s);
                        number(s, &integer, &whole);
                        if (!integer) irregular(s);
                    }
                    row[field == F_NAN ? C_NAN : C_INF] = whole;
                } else if (field < F_FIXED + s->nmd5) {
                    if (c == '"') {
                        string(s, &off, &len, 0);
                        row[C_FIXED + field - F_FIXED] = intern(s, off, len);
                    } else if (c == 'n' || c == '[' || c == '{') {
                        skip(s, depth + 1);             /* not a str or int: json path skips it too */
                    } else {
                        irregular(s);
                    }
                } else {
                    double *out = stat + (field - F_FIXED - s->nmd5);
                    if (c == 'n' && word(s, "null")) *out = NAN;
                    else if (c == 't' && word(s, "true")) *out = 1.0;
                    else if (c == 'f' && word(s, "false")) *out = 0.0;
                    else if (c == '"' || c == '[' || c == '{') irregular(s);
                    else *out = number(s, &integer, &whole);
                }
            }
            if (container_ends(s, '}')) break;
        }
    } else {
        s->i++;
    }
    if (!(seen & (1ULL << F_TYPE))) irregular(s);
    s->nrows++;
}

static void null_row(Scan *s, int64_t entry, int64_t key, int64_t index, int64_t sub_off, int64_t sub_len) {
    blank_row(s, entry, key, index, sub_off, sub_len, 1);
    s->nrows++;
}

/* A list inside a member's list (a list argument, e.g. the tensors of a concatenation): records or nulls. */
static void inner_list(Scan *s, int64_t depth, int64_t entry, int64_t key, int64_t index) {
    if (depth > s->depth_limit) irregular(s);
    int64_t inner = 0;
    s->i++;
    space(s);
    if (peek(s) == ']') { s->i++; return; }
    for (;;) {
        space(s);
        int c = peek(s);
        if (c == '{') record(s, depth + 1, entry, key, index, inner, -1, -1);
        else if (!(c == 'n' && word(s, "null"))) irregular(s);
        inner++;
        if (container_ends(s, ']')) return;
    }
}
