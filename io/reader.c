/* reader.c - byte streams from files or memory (plain or gzip) in large chunks, and lines. */
#include "reader.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

/* Chunk size handed to parsers; large enough that per-chunk costs vanish, small enough to stay
 * in L2/L3-friendly territory for the parser. */
enum { READER_CHUNK = 4 << 20, READER_RING = 3, READER_MSG = 512 };

struct saga_reader {
    char *name;
    int fd;                   /* -1 for a memory reader */
    const unsigned char *mem; /* memory reader source */
    size_t mem_len, mem_pos;
    uint64_t source_size;
    bool gzip;

    /* Plain input: buf holds the current chunk; the first head_len bytes were read at open to
     * look for the gzip magic and have not been handed out yet. For gzip input, buf holds
     * compressed bytes (the first head_len of them read at open). */
    char *buf;
    size_t head_len;
    bool head_pending;
    bool in_eof;

    /* gzip state, touched only by the inflating thread (or by next() when inline) */
    z_stream zs;
    bool zs_init;
    bool member_done;
    bool out_eof;
    saga_status deferred; /* an error met after some output was produced */

    /* ring of inflated chunks; the counters and flags below are guarded by mu */
    char *slot[READER_RING];
    size_t slot_len[READER_RING];
    unsigned r_idx, w_idx, n_full;
    bool held; /* the consumer holds slot r_idx */
    bool done; /* the producer has stopped (end of input or error) */
    bool stop; /* the consumer asked the producer to stop */
    saga_status err;
    char err_msg[READER_MSG];
    bool threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv_data, cv_space;
};

static char *dup_name(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = saga_malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

/* Reads up to cap bytes of raw (compressed or plain) input; 0 at end. Called from one thread at
 * a time. Writes an error message into r->err_msg (not the thread-local one, since this may run
 * on the inflating thread). */
static saga_status raw_read(saga_reader *r, char *dst, size_t cap, size_t *got) {
    if (r->fd < 0) {
        size_t n = r->mem_len - r->mem_pos;
        if (n > cap)
            n = cap;
        memcpy(dst, r->mem + r->mem_pos, n);
        r->mem_pos += n;
        *got = n;
        return SAGA_OK;
    }
    for (;;) {
        ssize_t n = read(r->fd, dst, cap);
        if (n >= 0) {
            *got = (size_t)n;
            return SAGA_OK;
        }
        if (errno == EINTR)
            continue;
        snprintf(r->err_msg, sizeof r->err_msg, "%s: read failed: %s", r->name, strerror(errno));
        return SAGA_ERR_IO;
    }
}

/* Fills out with up to cap inflated bytes. *len == 0 with SAGA_OK means end of input. */
static saga_status gz_fill_raw(saga_reader *r, char *out, size_t cap, size_t *len) {
    z_stream *zs = &r->zs;
    zs->next_out = (Bytef *)out;
    zs->avail_out = (uInt)cap;
    while (zs->avail_out > 0 && !r->out_eof) {
        if (zs->avail_in == 0 && !r->in_eof) {
            if (r->fd < 0) {
                /* memory: inflate straight from the caller's buffer */
                size_t n = r->mem_len - r->mem_pos;
                if (n > UINT_MAX)
                    n = UINT_MAX;
                zs->next_in = (Bytef *)(r->mem + r->mem_pos);
                zs->avail_in = (uInt)n;
                r->mem_pos += n;
                if (n == 0)
                    r->in_eof = true;
            } else {
                size_t got = 0;
                if (r->head_pending) {
                    got = r->head_len;
                    r->head_pending = false;
                } else {
                    saga_status st = raw_read(r, r->buf, READER_CHUNK, &got);
                    if (st < 0)
                        return st;
                }
                zs->next_in = (Bytef *)r->buf;
                zs->avail_in = (uInt)got;
                if (got == 0)
                    r->in_eof = true;
            }
        }
        if (r->member_done) {
            /* A gzip file may hold several members back to back; they form one stream. */
            if (zs->avail_in == 0) {
                if (r->in_eof)
                    r->out_eof = true;
                continue;
            }
            if (inflateReset(zs) != Z_OK) {
                snprintf(r->err_msg, sizeof r->err_msg, "%s: corrupt gzip data (zlib: reset)",
                         r->name);
                return SAGA_ERR_CORRUPT;
            }
            r->member_done = false;
        }
        int ret = inflate(zs, Z_NO_FLUSH);
        switch (ret) {
        case Z_OK:
            break;
        case Z_STREAM_END:
            r->member_done = true;
            break;
        case Z_BUF_ERROR:
            /* No progress: either more input is needed or the stream ends early. */
            if (zs->avail_in == 0 && r->in_eof) {
                snprintf(r->err_msg, sizeof r->err_msg, "%s: truncated gzip stream", r->name);
                return SAGA_ERR_CORRUPT;
            }
            if (zs->avail_in != 0) {
                snprintf(r->err_msg, sizeof r->err_msg, "%s: corrupt gzip data (zlib: no progress)",
                         r->name);
                return SAGA_ERR_CORRUPT;
            }
            break;
        case Z_MEM_ERROR:
            snprintf(r->err_msg, sizeof r->err_msg, "%s: out of memory inflating gzip data",
                     r->name);
            return SAGA_ERR_OUT_OF_MEMORY;
        default:
            snprintf(r->err_msg, sizeof r->err_msg, "%s: corrupt gzip data (zlib: %s)", r->name,
                     zs->msg ? zs->msg : "error");
            return SAGA_ERR_CORRUPT;
        }
    }
    *len = cap - zs->avail_out;
    return SAGA_OK;
}

/* gz_fill_raw, but what was inflated before an error is handed out first and the error on the
 * next call, so that a parser reports the lines before a damaged spot. */
static saga_status gz_fill(saga_reader *r, char *out, size_t cap, size_t *len) {
    if (r->deferred < 0)
        return r->deferred;
    saga_status st = gz_fill_raw(r, out, cap, len);
    if (st < 0) {
        size_t got = cap - r->zs.avail_out;
        if (got > 0) {
            r->deferred = st;
            *len = got;
            return SAGA_OK;
        }
    }
    return st;
}

/* The inflating thread: fills free ring slots until end of input, an error, or stop. */
static void *gz_thread(void *arg) {
    saga_reader *r = arg;
    for (;;) {
        pthread_mutex_lock(&r->mu);
        while (r->n_full == READER_RING && !r->stop)
            pthread_cond_wait(&r->cv_space, &r->mu);
        bool stop = r->stop;
        unsigned w = r->w_idx;
        pthread_mutex_unlock(&r->mu);
        if (stop)
            break;

        size_t len = 0;
        saga_status st = gz_fill(r, r->slot[w], READER_CHUNK, &len);

        pthread_mutex_lock(&r->mu);
        if (st < 0) {
            r->err = st;
            r->done = true;
        } else {
            if (len > 0) {
                r->slot_len[w] = len;
                r->w_idx = (w + 1) % READER_RING;
                r->n_full++;
            }
            if (len == 0 || r->out_eof)
                r->done = true;
        }
        bool finished = r->done;
        pthread_cond_signal(&r->cv_data);
        pthread_mutex_unlock(&r->mu);
        if (finished)
            break;
    }
    return NULL;
}

static void reader_free(saga_reader *r) {
    if (!r)
        return;
    if (r->threaded) {
        pthread_mutex_lock(&r->mu);
        r->stop = true;
        pthread_cond_signal(&r->cv_space);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->thread, NULL);
        pthread_mutex_destroy(&r->mu);
        pthread_cond_destroy(&r->cv_data);
        pthread_cond_destroy(&r->cv_space);
    }
    if (r->zs_init)
        inflateEnd(&r->zs);
    for (int i = 0; i < READER_RING; i++)
        saga_free(r->slot[i]);
    saga_free(r->buf);
    if (r->fd >= 0)
        close(r->fd);
    saga_free(r->name);
    saga_free(r);
}

static bool has_gzip_magic(const void *p, size_t len) {
    const unsigned char *b = p;
    return len >= 2 && b[0] == 0x1f && b[1] == 0x8b;
}

/* Sets up inflating; for a file, also the ring and its thread. */
static saga_status gz_setup(saga_reader *r, bool threaded) {
    saga_status st = SAGA_OK;
    memset(&r->zs, 0, sizeof r->zs);
    int zret = inflateInit2(&r->zs, 16 + MAX_WBITS);
    SAGA_CHECK(zret == Z_OK, zret == Z_MEM_ERROR ? SAGA_ERR_OUT_OF_MEMORY : SAGA_ERR_INTERNAL,
               "%s: cannot start inflating (zlib error %d)", r->name, zret);
    r->zs_init = true;
    int n_slots = threaded ? READER_RING : 1;
    for (int i = 0; i < n_slots; i++)
        SAGA_TRY(saga_alloc_array((void **)&r->slot[i], READER_CHUNK, 1, "inflate buffer"));
    if (threaded) {
        SAGA_CHECK(pthread_mutex_init(&r->mu, NULL) == 0, SAGA_ERR_INTERNAL,
                   "%s: cannot create a mutex", r->name);
        if (pthread_cond_init(&r->cv_data, NULL) != 0) {
            pthread_mutex_destroy(&r->mu);
            SAGA_CHECK(false, SAGA_ERR_INTERNAL, "%s: cannot create a condition", r->name);
        }
        if (pthread_cond_init(&r->cv_space, NULL) != 0) {
            pthread_cond_destroy(&r->cv_data);
            pthread_mutex_destroy(&r->mu);
            SAGA_CHECK(false, SAGA_ERR_INTERNAL, "%s: cannot create a condition", r->name);
        }
        int perr = pthread_create(&r->thread, NULL, gz_thread, r);
        if (perr != 0) {
            pthread_cond_destroy(&r->cv_space);
            pthread_cond_destroy(&r->cv_data);
            pthread_mutex_destroy(&r->mu);
            SAGA_CHECK(false, SAGA_ERR_INTERNAL, "%s: cannot start the inflating thread: %s",
                       r->name, strerror(perr));
        }
        r->threaded = true;
    }
fail:
    return st;
}

/* Opens path for reading; see reader.h. */
saga_status saga_reader_open(saga_reader **out, const char *path) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_CHECK(out && path, SAGA_ERR_INVALID_ARG, "saga_reader_open: NULL argument");
    SAGA_TRY(saga_alloc_zeroed((void **)&r, 1, sizeof *r, "reader"));
    r->fd = -1;
    r->name = dup_name(path);
    SAGA_CHECK(r->name, SAGA_ERR_OUT_OF_MEMORY, "out of memory opening %s", path);

    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    SAGA_CHECK(r->fd >= 0, SAGA_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    SAGA_CHECK(fstat(r->fd, &sb) == 0, SAGA_ERR_IO, "cannot stat %s: %s", path, strerror(errno));
    SAGA_CHECK(!S_ISDIR(sb.st_mode), SAGA_ERR_IO, "cannot read %s: %s", path, strerror(EISDIR));
    if (S_ISREG(sb.st_mode)) {
        r->source_size = (uint64_t)sb.st_size;
        posix_fadvise(r->fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    }

    SAGA_TRY(saga_alloc_array((void **)&r->buf, READER_CHUNK, 1, "read buffer"));
    /* Read the first chunk now to look for the gzip magic; a pipe may deliver it in pieces. */
    size_t have = 0;
    while (have < 2) {
        size_t got = 0;
        st = raw_read(r, r->buf + have, READER_CHUNK - have, &got);
        if (st < 0) {
            st = saga_error(st, "%s", r->err_msg);
            goto fail;
        }
        if (got == 0) {
            r->in_eof = true;
            break;
        }
        have += got;
    }
    r->head_len = have;
    r->head_pending = have > 0;
    r->gzip = has_gzip_magic(r->buf, have);
    if (r->gzip) {
        r->in_eof = false; /* the first bytes are still to be inflated */
        SAGA_TRY(gz_setup(r, true));
    }
    *out = r;
    return SAGA_OK;
fail:
    reader_free(r);
    return st;
}

/* Reads from memory; see reader.h. Gzip is inflated inline (no thread), which suits fuzzing. */
saga_status saga_reader_open_mem(saga_reader **out, const char *name, const void *data,
                                 size_t len) {
    saga_status st = SAGA_OK;
    saga_reader *r = NULL;
    SAGA_CHECK(out && (data || len == 0), SAGA_ERR_INVALID_ARG,
               "saga_reader_open_mem: NULL argument");
    SAGA_TRY(saga_alloc_zeroed((void **)&r, 1, sizeof *r, "reader"));
    r->fd = -1;
    r->name = dup_name(name ? name : "<memory>");
    SAGA_CHECK(r->name, SAGA_ERR_OUT_OF_MEMORY, "out of memory opening %s",
               name ? name : "<memory>");
    r->mem = data;
    r->mem_len = len;
    r->source_size = len;
    r->gzip = has_gzip_magic(data, len);
    if (r->gzip)
        SAGA_TRY(gz_setup(r, false));
    *out = r;
    return SAGA_OK;
fail:
    reader_free(r);
    return st;
}

/* Hands out the next chunk; see reader.h. */
saga_status saga_reader_next(saga_reader *r, const char **data, size_t *len) {
    saga_status st = SAGA_OK;
    if (!r->gzip) {
        if (r->fd < 0) {
            /* memory: the whole rest at once, no copy */
            *data = (const char *)r->mem + r->mem_pos;
            *len = r->mem_len - r->mem_pos;
            r->mem_pos = r->mem_len;
            return SAGA_OK;
        }
        if (r->head_pending) {
            r->head_pending = false;
            *data = r->buf;
            *len = r->head_len;
            return SAGA_OK;
        }
        size_t got = 0;
        if (!r->in_eof) {
            st = raw_read(r, r->buf, READER_CHUNK, &got);
            if (st < 0)
                return saga_error(st, "%s", r->err_msg);
            if (got == 0)
                r->in_eof = true;
        }
        *data = r->buf;
        *len = got;
        return SAGA_OK;
    }

    if (!r->threaded) {
        size_t got = 0;
        if (r->err < 0)
            return saga_error(r->err, "%s", r->err_msg);
        st = gz_fill(r, r->slot[0], READER_CHUNK, &got);
        if (st < 0) {
            r->err = st;
            return saga_error(st, "%s", r->err_msg);
        }
        *data = r->slot[0];
        *len = got;
        return SAGA_OK;
    }

    pthread_mutex_lock(&r->mu);
    if (r->held) {
        r->held = false;
        r->r_idx = (r->r_idx + 1) % READER_RING;
        r->n_full--;
        pthread_cond_signal(&r->cv_space);
    }
    while (r->n_full == 0 && !r->done)
        pthread_cond_wait(&r->cv_data, &r->mu);
    if (r->n_full > 0) {
        r->held = true;
        *data = r->slot[r->r_idx];
        *len = r->slot_len[r->r_idx];
    } else if (r->err < 0) {
        st = r->err;
    } else {
        *data = r->slot[0];
        *len = 0;
    }
    pthread_mutex_unlock(&r->mu);
    if (st < 0)
        return saga_error(st, "%s", r->err_msg);
    return SAGA_OK;
}

const char *saga_reader_name(const saga_reader *r) {
    return r->name;
}

bool saga_reader_is_gzip(const saga_reader *r) {
    return r->gzip;
}

uint64_t saga_reader_source_size(const saga_reader *r) {
    return r->source_size;
}

/* Closes the reader, stopping and joining its thread even when input remains. */
void saga_reader_close(saga_reader **r) {
    if (!r || !*r)
        return;
    reader_free(*r);
    *r = NULL;
}

/* ---- lines ---------------------------------------------------------------------------------- */

struct saga_lines {
    saga_reader *r;
    const char *chunk;
    size_t chunk_len, pos;
    char *carry; /* a line that spans chunks is assembled here */
    size_t carry_len, carry_cap;
    bool carry_returned; /* the last line handed out lives in carry */
    bool eof;
    int64_t number;
};

/* Iterates over the lines of r (owned from now on); see reader.h. */
saga_status saga_lines_open(saga_lines **out, saga_reader *r) {
    saga_status st = SAGA_OK;
    saga_lines *l = NULL;
    SAGA_CHECK(out && r, SAGA_ERR_INVALID_ARG, "saga_lines_open: NULL argument");
    SAGA_TRY(saga_alloc_zeroed((void **)&l, 1, sizeof *l, "line iterator"));
    l->r = r;
    *out = l;
    return SAGA_OK;
fail:
    saga_reader_close(&r);
    return st;
}

static saga_status carry_append(saga_lines *l, const char *s, size_t n) {
    if (l->carry_len + n > l->carry_cap) {
        size_t cap = l->carry_cap ? l->carry_cap : 256;
        while (cap < l->carry_len + n)
            cap *= 2;
        saga_status st = saga_realloc_array((void **)&l->carry, cap, 1, "long line");
        if (st < 0)
            return st;
        l->carry_cap = cap;
    }
    memcpy(l->carry + l->carry_len, s, n);
    l->carry_len += n;
    return SAGA_OK;
}

/* The next line; see reader.h. */
saga_status saga_lines_next(saga_lines *l, const char **line, size_t *len) {
    saga_status st = SAGA_OK;
    const char *s = NULL;
    size_t n = 0;
    if (l->carry_returned) {
        l->carry_returned = false;
        l->carry_len = 0;
    }
    for (;;) {
        if (l->pos < l->chunk_len) {
            const char *p = l->chunk + l->pos;
            size_t avail = l->chunk_len - l->pos;
            const char *nl = memchr(p, '\n', avail);
            if (nl) {
                size_t k = (size_t)(nl - p);
                l->pos += k + 1;
                if (l->carry_len == 0) {
                    s = p;
                    n = k;
                } else {
                    SAGA_TRY(carry_append(l, p, k));
                    s = l->carry;
                    n = l->carry_len;
                    l->carry_returned = true;
                }
                break;
            }
            SAGA_TRY(carry_append(l, p, avail));
            l->pos = l->chunk_len;
        }
        if (l->eof) {
            if (l->carry_len == 0) {
                *line = NULL;
                *len = 0;
                return SAGA_OK;
            }
            /* a last line without a newline */
            s = l->carry;
            n = l->carry_len;
            l->carry_returned = true;
            break;
        }
        SAGA_TRY(saga_reader_next(l->r, &l->chunk, &l->chunk_len));
        l->pos = 0;
        if (l->chunk_len == 0)
            l->eof = true;
    }
    l->number++;
    if (n > 0 && s[n - 1] == '\r')
        n--;
    SAGA_CHECK(!memchr(s, '\0', n), SAGA_ERR_PARSE, "%s:%lld: NUL byte (binary data?)",
               saga_reader_name(l->r), (long long)l->number);
    *line = s;
    *len = n;
    return SAGA_OK;
fail:
    return st;
}

int64_t saga_lines_number(const saga_lines *l) {
    return l->number;
}

const char *saga_lines_name(const saga_lines *l) {
    return saga_reader_name(l->r);
}

/* Closes the iterator and its reader; accepts NULL. */
void saga_lines_close(saga_lines **l) {
    if (!l || !*l)
        return;
    saga_reader_close(&(*l)->r);
    saga_free((*l)->carry);
    saga_free(*l);
    *l = NULL;
}
