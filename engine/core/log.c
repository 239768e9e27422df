/* log.c - leveled logging to stderr; the level starts from $SAGA_LOG. */
#include "saga_log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int log_level = -1; /* -1: not read from the environment yet */

int saga_log_level_parse(const char *s) {
    static const char *const names[SAGA_LOG_COUNT] = {"error", "warn", "info", "debug"};
    if (!s)
        return -1;
    for (int i = 0; i < SAGA_LOG_COUNT; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

saga_log_level saga_log_get_level(void) {
    if (log_level < 0) {
        int l = saga_log_level_parse(getenv("SAGA_LOG"));
        log_level = l >= 0 ? l : SAGA_LOG_WARN;
    }
    return (saga_log_level)log_level;
}

void saga_log_set_level(saga_log_level level) {
    log_level = (int)level;
}

void saga_log(saga_log_level level, const char *fmt, ...) {
    static const char *const tags[SAGA_LOG_COUNT] = {"error", "warning", "info", "debug"};
    if ((int)level > (int)saga_log_get_level() || (int)level < 0)
        return;
    char line[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    /* one fprintf so lines from several threads do not interleave */
    fprintf(stderr, "saga: %s: %s\n", tags[level], line);
}
