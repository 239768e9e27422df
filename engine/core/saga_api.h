/* saga_api.h - SAGA_API marks the functions of saga's public headers: libsaga.so exports them
 * and nothing else (the library is built with hidden visibility). */
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define SAGA_API __attribute__((visibility("default")))
#else
#define SAGA_API
#endif
