/* Fast path for the common DFTracer 2.x line: a complete event ("ph":1) whose strings hold no
 * backslash and whose args are flat. Such lines become int64 columns and interned strings
 * without creating a Python object per record. Every other line (metadata, counters,
 * aggregated records, older generations, anything unexpected or invalid) is returned by index
 * for the pure-Python parser, which remains the reference: tests require both paths to agree.
 *
 * parse(*buffers) -> (rows, lines, columns: dict[str, Column], names, cats, files, hosts,
 *                     fallback: list of (line index, line bytes), digest)
 * where digest is the I/O digest of the rows (see _iodigest.h). `size_bytes` is already what
 * a call moved: `ret` for the calls named by set_data_calls (0 when it failed), else -1.
 * parses the lines of each buffer in turn, as if the buffers were joined by a newline, so no
 * buffer is ever copied: the reader hands over the line that straddled two inflated blocks and
 * a view of the next block; the daemon, the messages it received.
 * A line in the layout DFTracer writes is read by literal keys (parse_template); any other
 * line by the general scanner (parse_line), which gives the same record for that layout.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#include "_iodigest.h"

#define UNKNOWN (-1)

typedef struct { const char *p; Py_ssize_t n; } span;

/* Word-at-a-time helpers: the scan's time goes into short strings and integers, and libc's
 * memcmp/memchr cost a call each for the few bytes a key or a hash has. */
#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define SWAR 1 /* the first matching byte is the lowest set bit: little-endian only */
#else
#define SWAR 0
#endif

static inline uint64_t load8(const char *p) { uint64_t w; memcpy(&w, p, 8); return w; }

/* high bit set in each byte of `w` equal to the byte repeated in `pattern`; exact up to the
 * first match, which is all the callers look at */
static inline uint64_t bytes_matching(uint64_t w, uint64_t pattern) {
    uint64_t x = w ^ pattern;
    return (x - ONES) & ~x & HIGHS;
}

static inline __attribute__((always_inline)) int bytes_equal(const char *a, const char *b,
                                                               Py_ssize_t n) {
    if (n >= 8) { /* whole words, the last one overlapping: no loop over the odd bytes */
        for (Py_ssize_t i = 0; i < n - 8; i += 8)
            if (load8(a + i) != load8(b + i)) return 0;
        return load8(a + n - 8) == load8(b + n - 8);
    }
    for (; n > 0; n--)
        if (*a++ != *b++) return 0;
    return 1;
}

/* ---- a small open-addressing intern table keyed by byte spans ---- */
typedef struct {
    span *keys;
    int64_t *codes;
    Py_ssize_t cap, used;
    span *order; /* keys in code order */
    span last; int64_t last_code; /* consecutive lines mostly repeat a string: no hashing */
} table;

/* eight bytes a step (a file hash is 16): only slots depend on it, not the codes */
static uint64_t hash_span(span s) {
    uint64_t h = 0x9E3779B97F4A7C15ULL ^ (uint64_t)s.n;
    const char *p = s.p;
    Py_ssize_t n = s.n;
    for (; n >= 8; p += 8, n -= 8) {
        h = (h ^ load8(p)) * 0xFF51AFD7ED558CCDULL;
        h ^= h >> 32;
    }
    if (n > 0) {
        uint64_t w = 0;
        memcpy(&w, p, (size_t)n);
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL;
    }
    h ^= h >> 33;
    h *= 0xC4CEB9FE1A85EC53ULL;
    return h ^ (h >> 29);
}

static int table_init(table *t) {
    t->cap = 64; t->used = 0; t->last.p = NULL; t->last.n = -1; t->last_code = 0;
    t->keys = calloc(t->cap, sizeof(span));
    t->codes = calloc(t->cap, sizeof(int64_t));
    t->order = calloc(t->cap, sizeof(span));
    return t->keys && t->codes && t->order ? 0 : -1;
}

static void table_free(table *t) { free(t->keys); free(t->codes); free(t->order); }

static int table_grow(table *t) {
    table bigger = *t; /* the last string looked up stays valid: codes do not change */
    bigger.cap = t->cap * 2;
    bigger.keys = calloc(bigger.cap, sizeof(span));
    bigger.codes = calloc(bigger.cap, sizeof(int64_t));
    span *order = bigger.keys && bigger.codes ? realloc(t->order, bigger.cap * sizeof(span))
                                              : NULL;
    if (!order) { free(bigger.keys); free(bigger.codes); return -1; } /* t left as it was */
    bigger.order = order;
    for (Py_ssize_t i = 0; i < t->cap; i++) {
        if (!t->keys[i].p) continue;
        uint64_t slot = hash_span(t->keys[i]) & (bigger.cap - 1);
        while (bigger.keys[slot].p) slot = (slot + 1) & (bigger.cap - 1);
        bigger.keys[slot] = t->keys[i]; bigger.codes[slot] = t->codes[i];
    }
    free(t->keys); free(t->codes);
    *t = bigger;
    return 0;
}

static int64_t table_lookup(table *t, span s) {
    if (t->used * 2 >= t->cap && table_grow(t) < 0) return -2;
    uint64_t slot = hash_span(s) & (t->cap - 1);
    while (t->keys[slot].p) {
        if (t->keys[slot].n == s.n && bytes_equal(t->keys[slot].p, s.p, s.n))
            return t->codes[slot];
        slot = (slot + 1) & (t->cap - 1);
    }
    t->keys[slot] = s; t->codes[slot] = t->used; t->order[t->used] = s;
    return t->used++;
}

static inline int64_t table_code(table *t, span s) {
    if (s.n == t->last.n && bytes_equal(s.p, t->last.p, s.n)) return t->last_code;
    int64_t code = table_lookup(t, s);
    if (code >= 0) { t->last = s; t->last_code = code; }
    return code;
}

static PyObject *table_list(table *t) {
    PyObject *list = PyList_New(t->used);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < t->used; i++) {
        PyObject *s = PyUnicode_DecodeUTF8(t->order[i].p, t->order[i].n, "replace");
        if (!s) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, i, s);
    }
    return list;
}

/* ---- the calls whose `ret` is a byte count (set once by set_data_calls) ---- */
static span data_calls[64];
static Py_ssize_t data_call_count = 0;

static int is_data_call(span name) {
    for (Py_ssize_t i = 0; i < data_call_count; i++)
        if (data_calls[i].n == name.n && memcmp(data_calls[i].p, name.p, (size_t)name.n) == 0)
            return 1;
    return 0;
}

/* ---- a scanner for one line ---- */
typedef struct { const char *p, *end; } cursor;

static void skip_ws(cursor *c) { while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\r')) c->p++; }

static int eat(cursor *c, char ch) {
    if (c->p < c->end && *c->p == ch) { c->p++; return 1; } /* compact JSON, as DFTracer writes */
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) { c->p++; return 1; }
    return 0;
}

/* the characters of a string whose opening quote was just passed; 0 at an escape (the Python
 * path reads escapes), at the end, or at a newline (no string spans lines: the template reads
 * up to the end of the buffer, not of the line, and must stop within its line) */
static inline int rest_of_string(cursor *c, span *out) {
    const char *start = c->p, *q = start, *end = c->end;
#if SWAR
    for (; end - q >= 8; q += 8) {
        uint64_t w = load8(q);
        uint64_t hit = bytes_matching(w, 0x2222222222222222ULL) |  /* '"' */
                       bytes_matching(w, 0x5c5c5c5c5c5c5c5cULL) |  /* '\\' */
                       bytes_matching(w, 0x0a0a0a0a0a0a0a0aULL);   /* '\n' */
        if (hit) { q += __builtin_ctzll(hit) >> 3; break; }
    }
#endif
    while (q < end && *q != '"' && *q != '\\' && *q != '\n') q++;
    if (q >= end || *q != '"') return 0;
    out->p = start; out->n = q - start;
    c->p = q + 1;
    return 1;
}

/* a string without escapes; 0 when anything else */
static inline int read_string(cursor *c, span *out) {
    if (c->p < c->end && *c->p != '"') skip_ws(c);
    if (c->p >= c->end || *c->p != '"') return 0;
    c->p++;
    return rest_of_string(c, out);
}

#if SWAR
/* simdjson's checks: eight ASCII digits, and their value */
static inline int eight_digits(uint64_t w) {
    return ((w & 0xF0F0F0F0F0F0F0F0ULL) |
            (((w + 0x0606060606060606ULL) & 0xF0F0F0F0F0F0F0F0ULL) >> 4)) ==
           0x3333333333333333ULL;
}

static inline uint64_t eight_digits_value(uint64_t w) {
    w = ((w & 0x0F0F0F0F0F0F0F0FULL) * 2561) >> 8;
    w = ((w & 0x00FF00FF00FF00FFULL) * 6553601) >> 16;
    return (uint64_t)(uint32_t)(((w & 0x0000FFFF0000FFFFULL) * 42949672960001ULL) >> 32);
}
#endif

/* an integer; 0 for floats, exponents, overflow, leading zeros or anything else */
static inline __attribute__((always_inline)) int read_int(cursor *c, int64_t *out) {
    if (c->p < c->end && *c->p == ' ') skip_ws(c);
    const char *q = c->p, *end = c->end;
    int neg = 0;
    if (q < end && *q == '-') { neg = 1; q++; }
    const char *first = q, *last = end - first > 18 ? first + 18 : end; /* 18 digits fit */
    uint64_t v = 0;
#if SWAR
    for (; last - q >= 8 && eight_digits(load8(q)); q += 8)
        v = v * 100000000 + eight_digits_value(load8(q));
#endif
    while (q < last && (unsigned)(*q - '0') < 10) v = v * 10 + (uint64_t)(*q++ - '0');
    if (q == first || (*first == '0' && q - first > 1)) return 0;
    if (q < end && ((unsigned)(*q - '0') < 10 || *q == '.' || *q == 'e' || *q == 'E')) return 0;
    c->p = q;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 1;
}

static int is_digit(char ch) { return (unsigned)(ch - '0') < 10; }

/* a JSON number, as the Python path's decoder accepts it (no leading zeros, no bare sign) */
static int skip_number(cursor *c) {
    const char *q = c->p, *end = c->end;
    if (q < end && *q == '-') q++;
    if (q >= end || !is_digit(*q)) return 0;
    if (*q == '0') q++;
    else while (q < end && is_digit(*q)) q++;
    if (q < end && *q == '.') {
        if (++q >= end || !is_digit(*q)) return 0;
        while (q < end && is_digit(*q)) q++;
    }
    if (q < end && (*q == 'e' || *q == 'E')) {
        if (++q < end && (*q == '+' || *q == '-')) q++;
        if (q >= end || !is_digit(*q)) return 0;
        while (q < end && is_digit(*q)) q++;
    }
    c->p = q;
    return 1;
}

static int skip_word(cursor *c, const char *word, Py_ssize_t n) {
    if (c->end - c->p < n || memcmp(c->p, word, (size_t)n) != 0) return 0;
    c->p += n;
    return 1;
}

/* skip a scalar value (string, number, true/false/null); 0 on objects, arrays, escapes and
 * anything that is not JSON (the Python path counts such a line invalid) */
static int skip_scalar(cursor *c) {
    skip_ws(c);
    if (c->p >= c->end) return 0;
    switch (*c->p) {
    case '"': { span s; return read_string(c, &s); }
    case 't': return skip_word(c, "true", 4);
    case 'f': return skip_word(c, "false", 5);
    case 'n': return skip_word(c, "null", 4);
    default: return skip_number(c);
    }
}

/* Objects and arrays nested this deep, or deeper, go to the Python path, which decides. */
#define SKIP_DEPTH 16

/* skip any JSON value: a scalar as skip_scalar does, an object or array with what it holds
 * (DFTracer's `end` event carries its configuration as objects in its args); 0 on anything
 * the Python path's decoder would not accept, or might not */
static int skip_any(cursor *c, int depth) {
    if (c->p < c->end && *c->p == ' ') skip_ws(c);
    if (c->p >= c->end || (*c->p != '{' && *c->p != '[')) return skip_scalar(c);
    if (depth >= SKIP_DEPTH) return 0;
    char close = *c->p == '{' ? '}' : ']';
    c->p++;
    if (eat(c, close)) return 1;
    do {
        span key;
        if (close == '}' && !(read_string(c, &key) && eat(c, ':'))) return 0;
        if (!skip_any(c, depth + 1)) return 0;
    } while (eat(c, ','));
    return eat(c, close);
}

/* An integer in the args of a line's tail: where it is, and which field it gives. A tail
 * remembered is compared as its bytes with these integers read in place, so a call whose
 * offsets or byte counts change from line to line (lseek64, writes of varying sizes) still
 * matches its previous tail; parse_args notes them. */
#define GAPS 4
enum { GAP_SKIPPED, GAP_RET, GAP_STEP, GAP_EPOCH };
typedef struct { const char *start, *end; int field; } gap;

/* A tail (`,"ph":1,"args":{...}}` to the end of the line) the template read, with what it
 * gave; `gaps` lie within `text`. */
typedef struct {
    span text, fhash, hhash;
    int64_t ret, step, epoch, file_code, host_code;
    int has_fhash, has_hhash, gap_count;
    gap gaps[GAPS];
} line_tail;

/* A head (about 70 bytes from after the id to `"ts":`: name, cat, type, pid, tid) the
 * template read, with what it gave and the last tail read after it. Heads are kept in a small
 * set-associative cache keyed by their first HEAD_KEY bytes: a trace has few distinct heads
 * (93 in a DLIO run, calls and regions), so nearly every line finds its head and, with it,
 * the tail its call wrote last time. Texts point into the buffers of the same parse() call,
 * all alive until it returns. */
typedef struct {
    span text, name, cat;
    int64_t layer, pid, tid, name_code, cat_code;
    line_tail tail;
} line_head;

#define HEAD_SETS 64
#define HEAD_WAYS 2
#define HEAD_KEY 32 /* `,"name":"` and 23 bytes more: within every head the template reads */

typedef struct {
    line_head way[HEAD_WAYS];
    int recent; /* the way used last: the other is replaced */
} head_set;

typedef struct {
    int64_t ts, dur, pid, tid, phase, layer, ret, step, epoch;
    span name, cat, fhash, hhash;
    int has_fhash, has_hhash;
    span head, tail; /* parse_template: the line from after its id to `"ts":`; after dur */
    head_set *set; /* where the head is, or would be, cached (NULL: too short to cache) */
    int way; /* the way of `set` holding this head, or -1 */
    int tail_hit; /* the tail matched that head's last tail */
    int gap_count; /* the integers parse_args read, the first GAPS of them */
    gap gaps[GAPS];
} record;

static inline head_set *set_of(head_set *sets, const char *at, const char *end) {
    if (end - at < HEAD_KEY) return NULL;
    uint64_t h = (load8(at + 8) ^ (load8(at + 16) * 0x9E3779B97F4A7C15ULL)) *
                 0xFF51AFD7ED558CCDULL;
    h = (h ^ load8(at + 24)) * 0xC4CEB9FE1A85EC53ULL;
    return &sets[(h >> 40) & (HEAD_SETS - 1)];
}

/* the tail remembered, matched at `c` with its gaps read into r; `c` moved past it */
static inline int tail_matches(const line_tail *t, cursor *c, record *r) {
    int64_t skipped, *fields[] = {&skipped, &r->ret, &r->step, &r->epoch};
    const char *at = c->p, *from = t->text.p;
    r->ret = t->ret; r->step = t->step; r->epoch = t->epoch;
    if (c->end - at >= t->text.n && bytes_equal(at, from, t->text.n)) { /* often the same */
        c->p = at + t->text.n;
        return 1;
    }
    for (int g = 0; g < t->gap_count; g++) {
        Py_ssize_t n = t->gaps[g].start - from;
        if (c->end - at < n || !bytes_equal(at, from, n)) return 0;
        cursor value = {at + n, c->end};
        if (!read_int(&value, fields[t->gaps[g].field])) return 0;
        at = value.p;
        from = t->gaps[g].end;
    }
    Py_ssize_t n = t->text.p + t->text.n - from;
    if (c->end - at < n || !bytes_equal(at, from, n)) return 0;
    c->p = at + n;
    return 1;
}

/* keys compared by length first, then inline (the lengths are constants: no memcmp call) */
#define KEY(k, lit) ((k).n == (Py_ssize_t)(sizeof(lit) - 1) && \
                     bytes_equal((k).p, lit, sizeof(lit) - 1))

/* DFTracer writes the host hash first: read by its literal key, the rest by the loop */
#define LITERAL(c, lit) ((c)->end - (c)->p >= (Py_ssize_t)(sizeof(lit) - 1) && \
                         bytes_equal((c)->p, lit, sizeof(lit) - 1) && \
                         ((c)->p += sizeof(lit) - 1, 1))

/* an integer value, read for `field` or skipped, noted as a gap of the line's tail */
static inline int read_gap(cursor *c, record *r, int field, int64_t *out) {
    if (c->p < c->end && *c->p == ' ') skip_ws(c);
    const char *start = c->p;
    if (!read_int(c, out)) return 0;
    if (r->gap_count < GAPS) r->gaps[r->gap_count++] = (gap){start, c->p, field};
    return 1;
}

/* a value parse_args does not keep: an integer is noted as a gap, anything else skipped */
static inline int skip_value(cursor *c, record *r) {
    int64_t ignored;
    return read_gap(c, r, GAP_SKIPPED, &ignored) || skip_any(c, 0);
}

static int parse_args(cursor *c, record *r) {
    if (LITERAL(c, "{\"hhash\":\"")) {
        if (!rest_of_string(c, &r->hhash)) return 0;
        r->has_hhash = 1;
        if (eat(c, '}')) return 1;
        if (!eat(c, ',')) return 0;
    } else {
        if (!eat(c, '{')) return 0;
        if (eat(c, '}')) return 1;
    }
    do {
        span key;
        if (!read_string(c, &key) || !eat(c, ':')) return 0;
        int ok;
        switch (key.n) {
        case 3:
            ok = KEY(key, "ret") ? read_gap(c, r, GAP_RET, &r->ret) : skip_value(c, r);
            break;
        case 4:
            if (KEY(key, "step")) ok = read_gap(c, r, GAP_STEP, &r->step);
            else if (KEY(key, "size")) return 0; /* stdio item size: Python multiplies it out */
            else ok = skip_value(c, r);
            break;
        case 5:
            if (KEY(key, "fhash")) { ok = read_string(c, &r->fhash); r->has_fhash = 1; }
            else if (KEY(key, "hhash")) { ok = read_string(c, &r->hhash); r->has_hhash = 1; }
            else if (KEY(key, "epoch")) ok = read_gap(c, r, GAP_EPOCH, &r->epoch);
            else ok = skip_value(c, r);
            break;
        default:
            ok = skip_value(c, r);
        }
        if (!ok) return 0;
    } while (eat(c, ','));
    return eat(c, '}');
}

static int parse_line(const char *p, const char *end, record *r) {
    cursor c = {p, end};
    memset(r, 0, sizeof(*r));
    r->ret = r->step = r->epoch = UNKNOWN;
    int seen_ph = 0;
    if (!eat(&c, '{')) return 0;
    do {
        span key;
        if (!read_string(&c, &key) || !eat(&c, ':')) return 0;
        int ok;
        switch (key.n) {
        case 2:
            if (KEY(key, "ts")) ok = read_int(&c, &r->ts);
            else if (KEY(key, "ph")) { ok = read_int(&c, &r->phase); seen_ph = 1; }
            else ok = skip_any(&c, 0);
            break;
        case 3:
            if (KEY(key, "pid")) ok = read_int(&c, &r->pid);
            else if (KEY(key, "tid")) ok = read_int(&c, &r->tid);
            else if (KEY(key, "cat")) ok = read_string(&c, &r->cat);
            else if (KEY(key, "dur")) ok = read_int(&c, &r->dur);
            else ok = skip_any(&c, 0);
            break;
        case 4:
            if (KEY(key, "name")) ok = read_string(&c, &r->name);
            else if (KEY(key, "type")) ok = read_int(&c, &r->layer);
            else if (KEY(key, "args")) ok = parse_args(&c, r);
            else ok = skip_any(&c, 0);
            break;
        default:
            ok = skip_any(&c, 0);
        }
        if (!ok) return 0;
    } while (eat(&c, ','));
    if (!eat(&c, '}')) return 0;
    skip_ws(&c);
    /* a negative time is an invalid line: the Python path counts it */
    return c.p == c.end && seen_ph && r->phase == 1 && r->ts >= 0 && r->dur >= 0;
}

/* The layout DFTracer 2.x writes every complete event in:
 *   {"id":N,"name":"S","cat":"S","type":N,"pid":N,"tid":N,"ts":N,"dur":N,"ph":1[,"args":{...}]}
 * Such a line is read by comparing its keys as literals, without reading and dispatching each
 * key; anything else (another order, spaces, other keys) goes to parse_line, which reads any
 * layout and gives the same record for this one. `end` is the end of the buffer: the template
 * finds the end of its line (no memchr first), and returns it, or NULL. */
static const char *parse_template(const char *p, const char *end, record *r,
                                  head_set *sets) {
    cursor c = {p, end};
    int64_t id;
    /* the fields the template does not set itself (no memset: it was a tenth of the scan) */
    r->ret = r->step = r->epoch = UNKNOWN;
    r->has_fhash = r->has_hhash = 0;
    r->way = -1; r->tail_hit = 0;
    if (!(LITERAL(&c, "{\"id\":") && read_int(&c, &id))) return NULL;
    r->head.p = c.p;
    r->set = set_of(sets, c.p, end);
    for (int w = 0; r->set && w < HEAD_WAYS; w++) {
        span text = r->set->way[w].text;
        if (text.n && end - c.p >= text.n && bytes_equal(c.p, text.p, text.n)) {
            r->way = w;
            break;
        }
    }
    const line_head *known = r->way >= 0 ? &r->set->way[r->way] : NULL;
    if (known) { /* the same bytes read the same */
        r->name = known->name; r->cat = known->cat; r->layer = known->layer;
        r->pid = known->pid; r->tid = known->tid;
        c.p += known->text.n;
    } else if (!(LITERAL(&c, ",\"name\":\"") && rest_of_string(&c, &r->name) &&
                 LITERAL(&c, ",\"cat\":\"") && rest_of_string(&c, &r->cat) &&
                 LITERAL(&c, ",\"type\":") && read_int(&c, &r->layer) &&
                 LITERAL(&c, ",\"pid\":") && read_int(&c, &r->pid) &&
                 LITERAL(&c, ",\"tid\":") && read_int(&c, &r->tid) &&
                 LITERAL(&c, ",\"ts\":"))) {
        return NULL;
    }
    r->head.n = c.p - r->head.p;
    if (!(read_int(&c, &r->ts) && LITERAL(&c, ",\"dur\":") && read_int(&c, &r->dur)))
        return NULL;
    r->phase = 1;
    r->tail.p = c.p;
    if (known && known->tail.text.n && tail_matches(&known->tail, &c, r)) {
        r->tail_hit = 1;
        r->fhash = known->tail.fhash; r->hhash = known->tail.hhash;
        r->has_fhash = known->tail.has_fhash; r->has_hhash = known->tail.has_hhash;
    } else {
        r->ret = r->step = r->epoch = UNKNOWN; /* a tail that did not match set some */
        r->gap_count = 0;
        if (!LITERAL(&c, ",\"ph\":1")) return NULL;
        if (LITERAL(&c, ",\"args\":") && !parse_args(&c, r)) return NULL;
        if (!LITERAL(&c, "}")) return NULL;
    }
    /* a remembered tail ended its line: so must this one */
    if ((c.p < end && *c.p != '\n') || r->ts < 0 || r->dur < 0) return NULL;
    r->tail.n = c.p - r->tail.p;
    return c.p;
}

/* A line the template read: its head cached (in the way not used last, when new) with the
 * tail it had, or its known head given the tail when that changed. */
static void remember(const record *r, int64_t name, int64_t cat, int64_t file, int64_t host) {
    if (!r->set) return;
    int w = r->way >= 0 ? r->way : 1 - r->set->recent;
    line_head *head = &r->set->way[w];
    r->set->recent = w;
    if (r->way < 0)
        *head = (line_head){r->head, r->name, r->cat, r->layer, r->pid, r->tid, name, cat};
    if (r->tail_hit) return;
    head->tail = (line_tail){r->tail, r->fhash, r->hhash, r->ret, r->step, r->epoch, file, host,
                             r->has_fhash, r->has_hhash, r->gap_count};
    memcpy(head->tail.gaps, r->gaps, (size_t)r->gap_count * sizeof(gap));
}

#define NCOLS 14
static const char *COLUMN_NAMES[NCOLS] = {
    "ts_us", "dur_us", "pid", "tid", "phase", "layer", "name", "cat", "file", "host",
    "size_bytes", "calls", "step", "epoch"};

/* A flag per string code, worked out once: -1 in `flags` until then. */
typedef struct { signed char *of; Py_ssize_t count; } code_flags;

typedef struct { Py_ssize_t line; span text; } left_line; /* a line left to Python */

typedef struct {
    int64_t *out[NCOLS];
    Py_ssize_t rows, cap;
    table names, cats, files, hosts;
    left_line *fallback;
    Py_ssize_t fallback_len, fallback_cap, lines;
    io_digest digest;
    code_flags data_names, io_cats; /* per name: a data call; per category: I/O calls */
    head_set heads[HEAD_SETS];
} scan_state;

static int flag_of(code_flags *flags, int64_t code, span text, int (*decide)(span)) {
    if (code >= flags->count) {
        Py_ssize_t cap = flags->count ? flags->count * 2 : 64;
        while (cap <= code) cap *= 2;
        signed char *grown = realloc(flags->of, (size_t)cap);
        if (!grown) return -1;
        memset(grown + flags->count, -1, (size_t)(cap - flags->count));
        flags->of = grown; flags->count = cap;
    }
    if (flags->of[code] < 0) flags->of[code] = (signed char)decide(text);
    return flags->of[code];
}

/* 1 for POSIX or STDIO in any case (a category of I/O calls, not regions), else 0; 2 when
 * not ASCII: Python's str.upper() maps a few other letters onto these ("ſ" to "S"), so such a
 * line is left to the Python parser */
static int io_cat_kind(span cat) {
    for (Py_ssize_t i = 0; i < cat.n; i++)
        if ((unsigned char)cat.p[i] >= 0x80) return 2;
    if (cat.n != 5) return 0;
    char upper[5];
    for (int i = 0; i < 5; i++) upper[i] = (char)(cat.p[i] & ~0x20);
    return memcmp(upper, "POSIX", 5) == 0 || memcmp(upper, "STDIO", 5) == 0;
}

/* The bytes a call moved: its `ret` for a data call (0 if it failed), else unknown; and a
 * step and epoch for regions only. The Python parser applies the same rules
 * (parse._byte_counts, parse._region_args). Returns 1, 0 for a line to leave to Python, or
 * -1 out of memory. */
static int call_values(scan_state *st, record *r, int64_t name, int64_t cat, int64_t *size) {
    int data = flag_of(&st->data_names, name, r->name, is_data_call);
    int io = r->layer == 3 ? 1 : flag_of(&st->io_cats, cat, r->cat, io_cat_kind);
    if (data < 0 || io < 0) return -1;
    if (io == 2) return 0;
    *size = !data ? UNKNOWN : r->ret < 0 && r->ret != UNKNOWN ? 0 : r->ret;
    if (io) r->step = r->epoch = UNKNOWN;
    return 1;
}

/* every column to `cap` rows */
static int grow_columns(scan_state *st, Py_ssize_t cap) {
    for (int i = 0; i < NCOLS; i++) {
        int64_t *grown = realloc(st->out[i], cap * sizeof(int64_t));
        if (!grown) return -1;
        st->out[i] = grown;
    }
    st->cap = cap;
    return 0;
}

static int add_fallback(scan_state *st, const char *p, const char *stop) {
    if (st->fallback_len == st->fallback_cap) {
        Py_ssize_t cap = st->fallback_cap ? st->fallback_cap * 2 : 32;
        left_line *grown = realloc(st->fallback, cap * sizeof(left_line));
        if (!grown) return -1;
        st->fallback = grown; st->fallback_cap = cap;
    }
    left_line *left = &st->fallback[st->fallback_len++];
    left->line = st->lines; left->text.p = p; left->text.n = stop - p;
    return 0;
}

static int add_row(scan_state *st, const record *r, int64_t name, int64_t cat, int64_t file,
                   int64_t host, int64_t size) {
    if (st->rows == st->cap && grow_columns(st, 2 * st->cap) < 0) return -1;
    int64_t values[NCOLS] = {r->ts, r->dur, r->pid, r->tid, 1, r->layer, name, cat, file, host,
                             size, 1, r->step, r->epoch};
    for (int i = 0; i < NCOLS; i++) st->out[i][st->rows] = values[i];
    st->rows++;
    return digest_add(&st->digest, name, cat, r->layer, file, host, size, r->pid, r->tid, r->ts,
                      r->dur);
}

/* The lines of one buffer, numbered on from the lines already scanned. It touches only C
 * memory (no line count first; the columns, sized from the input, grow only for lines shorter
 * than 96 bytes): it runs without the GIL, so parse threads overlap the thread that inflates
 * and aggregates. */
static int scan(scan_state *st, const char *p, const char *end) {
    while (p <= end) {
        record r;
        const char *stop = parse_template(p, end, &r, st->heads);
        int parsed = stop != NULL, templated = parsed;
        if (!parsed) {
            const char *nl = memchr(p, '\n', end - p);
            stop = nl ? nl : end;
            parsed = parse_line(p, stop, &r);
        }
        if (parsed) {
            int64_t file, host, name, cat, size;
            const line_head *known = templated && r.way >= 0 ? &r.set->way[r.way] : NULL;
            if (known && r.tail_hit) {
                file = known->tail.file_code;
                host = known->tail.host_code;
            } else {
                file = r.has_fhash ? table_code(&st->files, r.fhash) : UNKNOWN;
                host = r.has_hhash ? table_code(&st->hosts, r.hhash) : UNKNOWN;
            }
            if (known) {
                name = known->name_code;
                cat = known->cat_code;
            } else {
                name = table_code(&st->names, r.name); cat = table_code(&st->cats, r.cat);
            }
            if (file == -2 || host == -2 || name == -2 || cat == -2) return -1;
            if (templated) remember(&r, name, cat, file, host);
            int kept = call_values(st, &r, name, cat, &size);
            if (kept < 0 || (!kept && add_fallback(st, p, stop) < 0)) return -1;
            if (kept && add_row(st, &r, name, cat, file, host, size) < 0) return -1;
        } else if (stop > p && add_fallback(st, p, stop) < 0) {
            return -1;
        }
        st->lines++;
        if (stop == end) break;
        p = stop + 1;
    }
    return 0;
}

/* The lines handed to Python, as (line index, bytes) pairs. */
static PyObject *fallback_list(scan_state *st) {
    PyObject *list = PyList_New(st->fallback_len);
    if (!list) return NULL;
    for (Py_ssize_t i = 0; i < st->fallback_len; i++) {
        left_line *left = &st->fallback[i];
        PyObject *pair = Py_BuildValue("(ny#)", left->line, left->text.p, left->text.n);
        if (!pair) { Py_DECREF(list); return NULL; }
        PyList_SET_ITEM(list, i, pair);
    }
    return list;
}

/* ---- a column handed to numpy as it is (np.frombuffer keeps it alive): no copy ---- */
typedef struct { PyObject_HEAD int64_t *data; Py_ssize_t rows; } Column;

static int64_t no_rows[1];

static int column_getbuffer(PyObject *self, Py_buffer *view, int flags) {
    Column *col = (Column *)self;
    return PyBuffer_FillInfo(view, self, col->data ? (void *)col->data : (void *)no_rows,
                             col->rows * (Py_ssize_t)sizeof(int64_t), 0, flags);
}

static void column_dealloc(PyObject *self) {
    free(((Column *)self)->data);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs column_as_buffer = {column_getbuffer, NULL};

static PyTypeObject ColumnType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "scrtune.events._fastparse.Column",
    .tp_basicsize = sizeof(Column),
    .tp_dealloc = column_dealloc,
    .tp_as_buffer = &column_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "int64 values a parse produced, as a writable buffer",
};

/* the scan's column `i` as a Column, which takes its memory over (trimmed to the rows) */
static PyObject *take_column(scan_state *st, int i) {
    Column *col = PyObject_New(Column, &ColumnType);
    if (!col) return NULL;
    int64_t *data = st->out[i];
    if (data && !st->rows) {
        free(data);
        data = NULL;
    } else if (data && st->rows < st->cap) {
        int64_t *trimmed = realloc(data, st->rows * sizeof(int64_t));
        if (trimmed) data = trimmed; /* else the larger block serves as well */
    }
    col->data = data;
    col->rows = st->rows;
    st->out[i] = NULL;
    return (PyObject *)col;
}

static PyObject *build_result(scan_state *st) {
    PyObject *columns = PyDict_New();
    if (!columns) return NULL;
    for (int i = 0; i < NCOLS; i++) {
        PyObject *col = take_column(st, i);
        int failed = !col || PyDict_SetItemString(columns, COLUMN_NAMES[i], col) < 0;
        Py_XDECREF(col);
        if (failed) { Py_DECREF(columns); return NULL; }
    }
    PyObject *fallback = fallback_list(st), *digest = digest_result(&st->digest);
    PyObject *n = table_list(&st->names), *c = table_list(&st->cats),
             *f = table_list(&st->files), *h = table_list(&st->hosts);
    if (n && c && f && h && fallback && digest)
        return Py_BuildValue("(nnNNNNNNN)", st->rows, st->lines, columns, n, c, f, h, fallback,
                             digest);
    Py_DECREF(columns); Py_XDECREF(n); Py_XDECREF(c); Py_XDECREF(f); Py_XDECREF(h);
    Py_XDECREF(fallback); Py_XDECREF(digest);
    return NULL;
}

static PyObject *fast_parse(PyObject *self, PyObject *args) {
    Py_ssize_t count = PyTuple_GET_SIZE(args);
    if (count < 1) return PyErr_Format(PyExc_TypeError, "parse takes at least one buffer");
    Py_buffer *buffers = PyMem_Calloc((size_t)count, sizeof(Py_buffer));
    if (!buffers) return PyErr_NoMemory();
    Py_ssize_t held = 0;
    for (; held < count; held++)
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(args, held), &buffers[held], PyBUF_SIMPLE) < 0)
            break;
    scan_state st;
    memset(&st, 0, sizeof(st));
    PyObject *result = NULL;
    int ok = held == count && table_init(&st.names) == 0 && table_init(&st.cats) == 0 &&
             table_init(&st.files) == 0 && table_init(&st.hosts) == 0 &&
             digest_init(&st.digest) == 0;
    int scanned = -1;
    if (ok) { /* room for every line at 96 bytes a line (DFTracer's are twice that): no regrowth */
        Py_ssize_t total = 0;
        for (Py_ssize_t i = 0; i < count; i++) total += buffers[i].len;
        ok = grow_columns(&st, total / 96 + 256) == 0;
    }
    if (ok) {
        Py_BEGIN_ALLOW_THREADS
        scanned = 0;
        for (Py_ssize_t i = 0; i < count && scanned == 0; i++) {
            const char *start = buffers[i].buf;
            scanned = scan(&st, start, start + buffers[i].len);
        }
        Py_END_ALLOW_THREADS
    }
    if (held == count) {
        if (scanned < 0) PyErr_NoMemory();
        else result = build_result(&st);
    }
    for (int i = 0; i < NCOLS; i++) free(st.out[i]);
    free(st.fallback);
    table_free(&st.names); table_free(&st.cats); table_free(&st.files); table_free(&st.hosts);
    digest_free(&st.digest);
    free(st.data_names.of);
    free(st.io_cats.of);
    for (Py_ssize_t i = 0; i < held; i++) PyBuffer_Release(&buffers[i]);
    PyMem_Free(buffers);
    return result;
}

/* set_data_calls(names): the calls whose `ret` is a byte count. Called once, at import,
 * before any parse; the names are kept for the life of the process. */
static PyObject *set_data_calls(PyObject *self, PyObject *names) {
    PyObject *seq = PySequence_Fast(names, "set_data_calls takes a sequence of str");
    if (!seq) return NULL;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    if (count > (Py_ssize_t)(sizeof(data_calls) / sizeof(data_calls[0]))) {
        Py_DECREF(seq);
        return PyErr_Format(PyExc_ValueError, "at most 64 data calls, not %zd", count);
    }
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t n;
        const char *text = PyUnicode_AsUTF8AndSize(PySequence_Fast_GET_ITEM(seq, i), &n);
        char *copy = text ? malloc((size_t)n + 1) : NULL;
        if (!copy) { Py_DECREF(seq); return text ? PyErr_NoMemory() : NULL; }
        memcpy(copy, text, (size_t)n + 1);
        data_calls[i].p = copy; data_calls[i].n = n;
    }
    data_call_count = count;
    Py_DECREF(seq);
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"set_data_calls", set_data_calls, METH_O,
     "set_data_calls(names): the calls whose `ret` is a byte count (once, before parsing)"},
    {"parse", fast_parse, METH_VARARGS,
     "parse(*buffers) -> (rows, lines, columns, names, cats, files, hosts, "
     "fallback: [(line index, bytes)], digest): the lines of each buffer in turn"},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "_fastparse",
                                    "C fast path for DFTracer 2.x complete events", -1, methods};

PyMODINIT_FUNC PyInit__fastparse(void) {
    if (PyType_Ready(&ColumnType) < 0) return NULL;
    return PyModule_Create(&module);
}
