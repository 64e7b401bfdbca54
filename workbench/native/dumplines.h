/* Strings as the lines of one buffer, for workbench/dumps/msprobe_lines.py: Python decodes the buffer once and
   splits it, instead of one bytes object and one decode (or one concatenation) per string.

   Line r is the pieces r * per_line .. r * per_line + per_line - 1 of `pieces` (three int64 each: the source, 0 =
   `text` or 1 = `extra`, the offset and the length), followed by '\n'. Every piece is checked against its source
   and against the room left in `out` before it is copied; the lines must fill `out` exactly. It never allocates. */

/* Returns the bytes written (`out_size`), or -1: a piece outside its source, a bad count, or `out` not filled
   exactly (nothing written past `out_size`). `pieces` holds 3 * nlines * per_line values (the caller's array). */
int64_t dumpscan_lines(const unsigned char *text, int64_t text_size, const unsigned char *extra, int64_t extra_size,
                       const int64_t *pieces, int64_t nlines, int64_t per_line, unsigned char *out, int64_t out_size) {
    int64_t written = 0;
    if (nlines < 0 || per_line < 1 || text_size < 0 || extra_size < 0 || out_size < 0) return -1;
    for (int64_t line = 0; line < nlines; line++) {
        const int64_t *piece = pieces + 3 * line * per_line;
        for (int64_t k = 0; k < per_line; k++, piece += 3) {
            const unsigned char *source = piece[0] == 0 ? text : piece[0] == 1 ? extra : NULL;
            int64_t size = piece[0] == 0 ? text_size : extra_size, offset = piece[1], length = piece[2];
            if (source == NULL || offset < 0 || length < 0 || offset > size || length > size - offset ||
                length > out_size - written)
                return -1;
            memcpy(out + written, source + offset, (size_t)length);
            written += length;
        }
        if (written >= out_size) return -1;
        out[written++] = '\n';
    }
    return written == out_size ? written : -1;
}
