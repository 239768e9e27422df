/* checkpoint.c - saving and restoring parameters, optimizer state and the run's counters.
 *
 * Layout (little-endian, no padding):
 *   "SAGACKPT"  u32 version (1)  u32 n_params
 *   per parameter: u32 name_len, name bytes, i64 rows, i64 cols, f32 data[rows * cols]
 *   u32 optimizer kind (UINT32_MAX: none)  i64 steps  u32 n_state
 *   per parameter, per state buffer: f32 data[rows * cols]
 *   i64 user_step  u64 rng_counter
 *   u32 CRC-32 (zlib) of every byte before it
 * The file is written to PATH.tmp and renamed, so a crash leaves the old checkpoint whole. A load
 * checks everything before it changes anything. */
#include "nn_internal.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <zlib.h>

#define CKPT_MAGIC "SAGACKPT"
#define CKPT_VERSION 1u
#define CKPT_NO_OPTIM UINT32_MAX

/* ---- a growing byte buffer ---------------------------------------------------------------- */

typedef struct wbuf {
    unsigned char *p;
    size_t n, cap;
} wbuf;

static saga_status put(wbuf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap *= 2;
        saga_status st = saga_realloc_array((void **)&b->p, cap, 1, "checkpoint buffer");
        if (st < 0)
            return st;
        b->cap = cap;
    }
    if (n && src)
        memcpy(b->p + b->n, src, n);
    b->n += n;
    return SAGA_OK;
}

static saga_status put_u32(wbuf *b, uint32_t v) {
    return put(b, &v, sizeof v);
}
static saga_status put_i64(wbuf *b, int64_t v) {
    return put(b, &v, sizeof v);
}

/* Appends a tensor's contents, read from the device. */
static saga_status put_tensor(wbuf *b, const saga_tensor *t) {
    saga_status st = put(b, NULL, t->nbytes);
    if (st < 0)
        return st;
    return saga_tensor_to_host(t, b->p + b->n - t->nbytes);
}

saga_status saga_checkpoint_save(const char *path, const saga_model *m, const saga_optim *o,
                                 int64_t user_step, uint64_t rng_counter) {
    saga_status st = SAGA_OK;
    wbuf b = {0};
    char *tmp = NULL;
    FILE *f = NULL;
    SAGA_CHECK(path && m, SAGA_ERR_INVALID_ARG, "saga_checkpoint_save: %s is NULL",
               path ? "model" : "path");
    SAGA_CHECK(!o || (o->m == m && o->n == m->n), SAGA_ERR_INVALID_ARG,
               "saga_checkpoint_save: the optimizer belongs to another model or misses "
               "parameters added after it");
    SAGA_TRY(put(&b, CKPT_MAGIC, 8));
    SAGA_TRY(put_u32(&b, CKPT_VERSION));
    SAGA_TRY(put_u32(&b, (uint32_t)m->n));
    for (int i = 0; i < m->n; i++) {
        uint32_t len = (uint32_t)strlen(m->names[i]);
        SAGA_TRY(put_u32(&b, len));
        SAGA_TRY(put(&b, m->names[i], len));
        SAGA_TRY(put_i64(&b, m->params[i]->rows));
        SAGA_TRY(put_i64(&b, m->params[i]->cols));
        SAGA_TRY(put_tensor(&b, m->params[i]));
    }
    int n_state = o ? saga_optim_n_state(&o->o) : 0;
    SAGA_TRY(put_u32(&b, o ? (uint32_t)o->o.kind : CKPT_NO_OPTIM));
    SAGA_TRY(put_i64(&b, o ? o->step : 0));
    SAGA_TRY(put_u32(&b, (uint32_t)n_state));
    for (int i = 0; o && i < o->n; i++) {
        if (n_state >= 1)
            SAGA_TRY(put_tensor(&b, o->buf1[i]));
        if (n_state >= 2)
            SAGA_TRY(put_tensor(&b, o->buf2[i]));
    }
    SAGA_TRY(put_i64(&b, user_step));
    SAGA_TRY(put(&b, &rng_counter, sizeof rng_counter));
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < b.n;) { /* zlib takes uInt lengths */
        uInt chunk = (uInt)(b.n - off > (1u << 30) ? (1u << 30) : b.n - off);
        crc = crc32(crc, b.p + off, chunk);
        off += chunk;
    }
    SAGA_TRY(put_u32(&b, (uint32_t)crc));

    size_t plen = strlen(path);
    SAGA_TRY(saga_alloc_array((void **)&tmp, plen + 5, 1, "checkpoint path"));
    memcpy(tmp, path, plen);
    memcpy(tmp + plen, ".tmp", 5);
    f = fopen(tmp, "wb");
    SAGA_CHECK(f, SAGA_ERR_IO, "%s: cannot create: %s", tmp, strerror(errno));
    SAGA_CHECK(fwrite(b.p, 1, b.n, f) == b.n, SAGA_ERR_IO, "%s: write failed: %s", tmp,
               strerror(errno));
    int rc = fclose(f);
    f = NULL;
    SAGA_CHECK(rc == 0, SAGA_ERR_IO, "%s: write failed: %s", tmp, strerror(errno));
    SAGA_CHECK(rename(tmp, path) == 0, SAGA_ERR_IO, "%s: cannot rename %s into place: %s", path,
               tmp, strerror(errno));
    saga_free(tmp);
    saga_free(b.p);
    return SAGA_OK;
fail:
    if (f)
        fclose(f);
    if (tmp)
        remove(tmp);
    saga_free(tmp);
    saga_free(b.p);
    return st;
}

/* ---- loading ------------------------------------------------------------------------------ */

typedef struct rbuf {
    const unsigned char *p;
    size_t n, off;
    const char *path;
} rbuf;

static saga_status take(rbuf *r, void *dst, size_t n, const char *what) {
    if (n > r->n - r->off)
        return saga_error(SAGA_ERR_PARSE, "%s: truncated at byte %zu: expected %s", r->path, r->off,
                          what);
    if (dst)
        memcpy(dst, r->p + r->off, n);
    r->off += n;
    return SAGA_OK;
}

static saga_status read_file(const char *path, unsigned char **out, size_t *len) {
    saga_status st = SAGA_OK;
    unsigned char *p = NULL;
    FILE *f = fopen(path, "rb");
    SAGA_CHECK(f, SAGA_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    SAGA_CHECK(fseek(f, 0, SEEK_END) == 0, SAGA_ERR_IO, "%s: cannot seek: %s", path,
               strerror(errno));
    long size = ftell(f);
    SAGA_CHECK(size >= 0, SAGA_ERR_IO, "%s: cannot tell its size: %s", path, strerror(errno));
    rewind(f);
    SAGA_TRY(saga_alloc_array((void **)&p, (size_t)size + 1, 1, "checkpoint contents"));
    SAGA_CHECK(fread(p, 1, (size_t)size, f) == (size_t)size, SAGA_ERR_IO, "%s: read failed", path);
    fclose(f);
    *out = p;
    *len = (size_t)size;
    return SAGA_OK;
fail:
    if (f)
        fclose(f);
    saga_free(p);
    return st;
}

/* Where each parameter's bytes lie in the file, found before anything is written. */
typedef struct param_src {
    const unsigned char *data;
    const unsigned char *state[2];
} param_src;

saga_status saga_checkpoint_load(const char *path, saga_model *m, saga_optim *o, int64_t *user_step,
                                 uint64_t *rng_counter) {
    saga_status st = SAGA_OK;
    unsigned char *file = NULL;
    param_src *src = NULL;
    size_t len = 0;
    SAGA_CHECK(path && m, SAGA_ERR_INVALID_ARG, "saga_checkpoint_load: %s is NULL",
               path ? "model" : "path");
    SAGA_CHECK(!o || (o->m == m && o->n == m->n), SAGA_ERR_INVALID_ARG,
               "saga_checkpoint_load: the optimizer belongs to another model or misses "
               "parameters added after it");
    SAGA_TRY(read_file(path, &file, &len));
    rbuf r = {file, len, 0, path};

    /* ---- check the envelope */
    char magic[8];
    uint32_t version = 0, n_params = 0, crc_file = 0;
    SAGA_TRY(take(&r, magic, 8, "the magic"));
    SAGA_CHECK(memcmp(magic, CKPT_MAGIC, 8) == 0, SAGA_ERR_PARSE,
               "%s: not a saga checkpoint (bad magic)", path);
    SAGA_TRY(take(&r, &version, 4, "the version"));
    SAGA_CHECK(version == CKPT_VERSION, SAGA_ERR_PARSE,
               "%s: checkpoint version %u, this build reads version %u", path, version,
               CKPT_VERSION);
    SAGA_CHECK(len >= 4 + r.off, SAGA_ERR_PARSE, "%s: truncated: %zu bytes", path, len);
    memcpy(&crc_file, file + len - 4, 4);
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < len - 4;) {
        uInt chunk = (uInt)(len - 4 - off > (1u << 30) ? (1u << 30) : len - 4 - off);
        crc = crc32(crc, file + off, chunk);
        off += chunk;
    }
    SAGA_CHECK((uint32_t)crc == crc_file, SAGA_ERR_PARSE,
               "%s: checksum mismatch (stored %08x, computed %08x): the file is damaged or "
               "truncated",
               path, crc_file, (unsigned)crc);
    r.n = len - 4;

    /* ---- parameters: names and shapes must match the model */
    SAGA_TRY(take(&r, &n_params, 4, "the parameter count"));
    SAGA_CHECK(n_params == (uint32_t)m->n, SAGA_ERR_PARSE,
               "%s: %u parameters in the file, the model has %d", path, n_params, m->n);
    if (m->n)
        SAGA_TRY(saga_alloc_zeroed((void **)&src, (size_t)m->n, sizeof *src, "checkpoint index"));
    for (int i = 0; i < m->n; i++) {
        uint32_t nl = 0;
        int64_t rows = 0, cols = 0;
        SAGA_TRY(take(&r, &nl, 4, "a parameter name length"));
        SAGA_CHECK(nl <= r.n - r.off, SAGA_ERR_PARSE, "%s: parameter %d: name length %u too long",
                   path, i, nl);
        const char *name = (const char *)file + r.off;
        SAGA_TRY(take(&r, NULL, nl, "a parameter name"));
        SAGA_TRY(take(&r, &rows, 8, "a parameter's rows"));
        SAGA_TRY(take(&r, &cols, 8, "a parameter's columns"));
        int j = 0;
        while (j < m->n && !(strlen(m->names[j]) == nl && memcmp(m->names[j], name, nl) == 0))
            j++;
        SAGA_CHECK(j < m->n, SAGA_ERR_PARSE, "%s: parameter %.*s is not in the model", path,
                   (int)nl, name);
        SAGA_CHECK(!src[j].data, SAGA_ERR_PARSE, "%s: parameter %s appears twice", path,
                   m->names[j]);
        const saga_tensor *p = m->params[j];
        SAGA_CHECK(rows == p->rows && cols == p->cols, SAGA_ERR_PARSE,
                   "%s: parameter %s is %lld x %lld in the file, %lld x %lld in the model", path,
                   m->names[j], (long long)rows, (long long)cols, (long long)p->rows,
                   (long long)p->cols);
        src[j].data = file + r.off;
        SAGA_TRY(take(&r, NULL, p->nbytes, "parameter values"));
    }

    /* ---- optimizer state */
    uint32_t kind = 0, n_state = 0;
    int64_t steps = 0;
    SAGA_TRY(take(&r, &kind, 4, "the optimizer kind"));
    SAGA_TRY(take(&r, &steps, 8, "the optimizer step"));
    SAGA_TRY(take(&r, &n_state, 4, "the optimizer state count"));
    SAGA_CHECK(n_state <= 2 && (kind != CKPT_NO_OPTIM || n_state == 0), SAGA_ERR_PARSE,
               "%s: bad optimizer state count %u", path, n_state);
    if (o) {
        SAGA_CHECK(kind != CKPT_NO_OPTIM, SAGA_ERR_PARSE, "%s: the file holds no optimizer state",
                   path);
        SAGA_CHECK(kind == (uint32_t)o->o.kind && n_state == (uint32_t)saga_optim_n_state(&o->o),
                   SAGA_ERR_PARSE,
                   "%s: optimizer kind %u with %u state buffers in the file, the optimizer is "
                   "kind %d with %d",
                   path, kind, n_state, (int)o->o.kind, saga_optim_n_state(&o->o));
        SAGA_CHECK(steps >= 0, SAGA_ERR_PARSE, "%s: negative optimizer step count", path);
    }
    for (int i = 0; i < m->n; i++) {
        for (uint32_t s = 0; s < n_state; s++) {
            src[i].state[s] = file + r.off;
            SAGA_TRY(take(&r, NULL, m->params[i]->nbytes, "optimizer state"));
        }
    }
    int64_t ustep = 0;
    uint64_t rng = 0;
    SAGA_TRY(take(&r, &ustep, 8, "the user step"));
    SAGA_TRY(take(&r, &rng, 8, "the dropout counter"));
    SAGA_CHECK(r.off == r.n, SAGA_ERR_PARSE, "%s: %zu unexpected bytes before the checksum", path,
               r.n - r.off);

    /* ---- everything checks out: copy it in */
    saga_stream *s = saga_backend_default_stream(m->be);
    for (int i = 0; i < m->n; i++) {
        saga_tensor *p = m->params[i];
        if (!p->nbytes)
            continue;
        SAGA_TRY(saga_memcpy_h2d_async(s, p->data, src[i].data, p->nbytes));
        if (o && n_state >= 1)
            SAGA_TRY(saga_memcpy_h2d_async(s, o->buf1[i]->data, src[i].state[0], p->nbytes));
        if (o && n_state >= 2)
            SAGA_TRY(saga_memcpy_h2d_async(s, o->buf2[i]->data, src[i].state[1], p->nbytes));
    }
    SAGA_TRY(saga_stream_synchronize(s)); /* the file buffer goes next */
    if (o)
        o->step = steps;
    if (user_step)
        *user_step = ustep;
    if (rng_counter)
        *rng_counter = rng;
fail:
    saga_free(src);
    saga_free(file);
    return st;
}
