/* saga_log.h - leveled logging to stderr.
 *
 *   saga_log(SAGA_LOG_INFO, "loaded %s: %d vertices", path, n);
 *
 * The level comes from saga_log_set_level() or the SAGA_LOG environment variable
 * (error, warn, info, debug); the default is warn, so library code is quiet unless asked.
 */
#pragma once

#include "saga_api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum saga_log_level {
    SAGA_LOG_ERROR = 0,
    SAGA_LOG_WARN = 1,
    SAGA_LOG_INFO = 2,
    SAGA_LOG_DEBUG = 3,
    SAGA_LOG_COUNT
} saga_log_level;

SAGA_API void saga_log_set_level(saga_log_level level);
SAGA_API saga_log_level saga_log_get_level(void);
/* Parses "error", "warn", "info", "debug"; returns -1 for anything else. */
SAGA_API int saga_log_level_parse(const char *s);

SAGA_API void saga_log(saga_log_level level, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#ifdef __cplusplus
}
#endif
