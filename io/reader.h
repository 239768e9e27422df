/* reader.h - byte streams from files (plain or gzip, told apart by the magic bytes) or memory,
 * handed out in large chunks; and a line iterator on top. Internal to saga's parsers.
 *
 *   saga_reader *r = NULL;
 *   SAGA_TRY(saga_reader_open(&r, path));
 *   const char *buf; size_t len;
 *   while ((st = saga_reader_next(r, &buf, &len)) == SAGA_OK && len > 0)
 *       consume(buf, len);
 *   saga_reader_close(&r);
 *
 * Gzip input is inflated by a background thread into a ring of buffers so that inflating and
 * parsing overlap. A truncated or corrupt gzip stream is SAGA_ERR_CORRUPT naming the file.
 * Concatenated gzip members are read as one stream.
 */
#pragma once

#include "saga_status.h"

typedef struct saga_reader saga_reader;

/* Opens path. SAGA_ERR_IO (with strerror) for a missing file, a directory, no permission. */
saga_status saga_reader_open(saga_reader **out, const char *path);
/* Reads from memory (not copied; must outlive the reader). name is used in messages. Gzip is
 * detected here too. */
saga_status saga_reader_open_mem(saga_reader **out, const char *name, const void *data,
                                 size_t len);
/* The next chunk: *data valid until the next call. *len == 0 means end of input. */
saga_status saga_reader_next(saga_reader *r, const char **data, size_t *len);
/* The name given at open (the path). */
const char *saga_reader_name(const saga_reader *r);
bool saga_reader_is_gzip(const saga_reader *r);
/* Size of the underlying file or buffer in bytes (compressed size for gzip); 0 if unknown. */
uint64_t saga_reader_source_size(const saga_reader *r);
/* Frees the reader (joins its thread); accepts NULL; sets *r to NULL. */
void saga_reader_close(saga_reader **r);

/* ---- lines ---------------------------------------------------------------------------------- */

typedef struct saga_lines saga_lines;

/* Iterates over the lines of r, taking ownership of r (closed with the iterator, also when this
 * call fails). */
saga_status saga_lines_open(saga_lines **out, saga_reader *r);
/* The next line without its "\n" or "\r\n": *line == NULL at end of input. A line holding a NUL
 * byte is SAGA_ERR_PARSE ("file:LINE: NUL byte ..."). The line stays valid until the next call. */
saga_status saga_lines_next(saga_lines *l, const char **line, size_t *len);
/* 1-based number of the line last returned. */
int64_t saga_lines_number(const saga_lines *l);
const char *saga_lines_name(const saga_lines *l);
void saga_lines_close(saga_lines **l);
