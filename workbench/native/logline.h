/* Pieces of a Megatron iteration line, for logscan.c (included after its megatron_scan type): blank runs,
   key comparison a word at a time, finding "iteration", the "tensor("/"local_norm/" needles, the launcher
   prefix's rank, a printed key's index. Each reads only inside the range it is given. */

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
INLINE int same(const unsigned char *s, const unsigned char *key, int64_t n) {
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
    const unsigned char *p = s;
    while (SWAR && e - p >= 8) {                      /* words holding neither '(' nor '/' are skipped */
        uint64_t word, x, y;
        memcpy(&word, p, 8);
        x = word ^ 0x2828282828282828ULL;
        y = word ^ 0x2F2F2F2F2F2F2F2FULL;
        if (((x - 0x0101010101010101ULL) & ~x & 0x8080808080808080ULL)
            | ((y - 0x0101010101010101ULL) & ~y & 0x8080808080808080ULL)) break;
        p += 8;
    }
    for (; p < e; p++) {
        if (*p == '(' && p - s >= 6 && memcmp(p - 6, "tensor", 6) == 0) flags |= SEEN_TENSOR;
        else if (*p == '/' && p - s >= 10 && memcmp(p - 10, "local_norm", 10) == 0) flags |= SEEN_LOCAL_NORM;
    }
    return flags;
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
