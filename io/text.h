/* text.h - token scanning for the text parsers, on [p, end) ranges that need no NUL.
 *
 *   const char *p = line, *end = line + len;
 *   int64_t id;
 *   saga_text_skip_blank(&p, end);
 *   switch (saga_text_i64(&p, end, &id)) { case SAGA_TEXT_OK: ...; case SAGA_TEXT_OVERFLOW: ... }
 *
 * Blanks are space, tab, \r, \v, \f. A token ends at a blank or at end.
 */
#pragma once

#include "saga_status.h"

typedef enum saga_text_result {
    SAGA_TEXT_OK = 0,
    SAGA_TEXT_EMPTY,     /* no token before end */
    SAGA_TEXT_INVALID,   /* not a number of the wanted kind (the token is left unconsumed) */
    SAGA_TEXT_OVERFLOW,  /* an integer that does not fit */
    SAGA_TEXT_NEGATIVE,  /* a '-' where only non-negative values are allowed */
    SAGA_TEXT_NONFINITE, /* nan or inf where a finite number is needed */
    SAGA_TEXT_RESULT_COUNT
} saga_text_result;

/* Advances *p past blanks; returns true when a token follows. */
bool saga_text_skip_blank(const char **p, const char *end);
/* A non-negative decimal integer up to INT64_MAX ('+' allowed, '-' gives NEGATIVE). */
saga_text_result saga_text_u63(const char **p, const char *end, int64_t *out);
/* A signed decimal integer. */
saga_text_result saga_text_i64(const char **p, const char *end, int64_t *out);
/* A finite floating point number (strtod syntax, no hex); nan/inf give NONFINITE. */
saga_text_result saga_text_f64(const char **p, const char *end, double *out);
/* Copies the token at *p (up to the next blank, at most cap-1 bytes, printable-escaped) into buf
 * for error messages; does not advance. */
const char *saga_text_token(const char *p, const char *end, char *buf, size_t cap);
/* "expected an integer" style description of a result. */
const char *saga_text_result_str(saga_text_result r);
