/* The local_norm array of a MindFormers log read whole (mfscan_norm_block), for mfscan.c, which
   includes it once after lognum.h (its numbers: numpy_e_at, number_at). Nothing past `len` is read;
   numbers go into the array Python allocated, at most `cap` of them. */

/* One numpy-printed local_norm array of a MindFormers log, from its first line at data[pos] to the end
   of the line holding the first ']': its numbers into values (at most cap), *stop the offset of that
   line's end, *lines the line ends inside. The count of numbers, or -1 for the Python parser to read
   it (what mindformers_scan._fast_block takes: the first line starts, after blanks, with '[', '-', a
   digit, '.', 'n' or 'i' and holds no "local_norm:"; every later line starts, after blanks other than
   '\n', with one of those; ASCII; numbers of the grammar above separated by blanks and brackets; no
   more than cap of them). */
int64_t mfscan_norm_block(const unsigned char *data, int64_t len, int64_t pos, double *values, int64_t cap,
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
        while (1) {                                        /* numbers one space apart: no byte loop */
            if (count >= cap) return -1;
            const unsigned char *after = numpy_e_at(p, end, &values[count]);   /* the usual form, else any */
            if (after != NULL) p = after;
            else if (!number_at(p, end, &p, &values[count])) return -1;
            count++;
            if (end - p < 2 || p[0] != ' ' || !digit(p[1])) break;
            p++;
        }
        if (p < end && !(blank(*p) || *p == '[' || *p == ']')) return -1;
    }
    if (line_start) return -1;
    *stop = end - data;
    *lines = ends;
    return count;
}
