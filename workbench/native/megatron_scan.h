/* The state of the Megatron scan (logscan.c), field for field `logscan.Scan` in workbench/logs/logscan.py:
   the keys Python passed in, the row arrays Python allocated (with their capacities), the lines handed
   back, and where the scan is. Included once by logscan.c, before logline.h and logmemo.h, which read it. */

#define MAX_FIELDS 256            /* more fields on one line: handed back */
#define CODE_MAX 128              /* metric codes are int8 */

enum { KIND_DROP = -1, KIND_SLOW = -2 };                 /* key_kind below, else a metric code >= 0 */
enum { SEEN_TENSOR = 1, SEEN_LOCAL_NORM = 2 };          /* flags: "tensor(" / "local_norm/" in the chunk */

typedef struct {
    /* keys, from Python */
    const unsigned char *keys;    /* stripped keys, concatenated */
    const int64_t *key_start;     /* nkeys + 1 offsets into keys */
    const int32_t *key_kind;      /* metric code, KIND_DROP (not in the YAML) or KIND_SLOW (has a unit) */
    const int32_t *key_order;     /* rows of one line are sorted by it (then by field position) */
    const int32_t *key_shift;     /* added to the iteration: 1 for values of the next update */
    const int32_t *key_flags;     /* SEEN_* flags of the key's own bytes */
    int64_t nkeys;
    /* rows: one per kept field of a taken line, capacity rows_cap; a line whose step (iteration + shift),
       rank or number is outside int32 is handed back (tables.narrow: Python widens that column) */
    int32_t *rank, *step, *line;
    int8_t *code;                 /* key_kind, below code_cap */
    double *value;
    int64_t rows_cap, rows;
    int64_t *code_rows;           /* rows written per code, code_cap of them */
    int64_t code_cap;
    /* one per taken line with a kept field: its iteration, capacity rows_cap too */
    int64_t *iteration;
    int64_t iterations;
    /* lines handed back: (start, end, number) triples, capacity back_cap triples */
    int64_t *back;
    int64_t back_cap, backs;
    /* where the scan is: offset of the next line and its number; done when the chunk is read */
    int64_t pos, line_no, done;
    int64_t last_candidate;       /* offset of the last line holding "iteration" and "|", or -1 */
    int64_t flags;                /* SEEN_* */
    int64_t non_ascii;            /* set once a line read so far holds a byte >= 0x80 */
} megatron_scan;
