/* mem_impl.h - memory helpers shared inside saga. Internal. */
#pragma once

#include <stddef.h>

/* 1 when built with AddressSanitizer (GCC or clang), else 0: memory that saga would keep for
 * reuse is given back at once there, so that a use after free is still caught. */
#if defined(__SANITIZE_ADDRESS__)
#define SAGA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SAGA_ASAN 1
#endif
#endif
#ifndef SAGA_ASAN
#define SAGA_ASAN 0
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Asks for transparent huge pages on a block of 8 MiB or more (smaller ones are left alone):
 * first touches of fresh memory are costly on virtual machines, and one 2 MiB page takes one
 * fault where 4 KiB pages take 512. Advice only: nothing fails. */
void saga_advise_huge(void *p, size_t bytes);

#ifdef __cplusplus
}
#endif
