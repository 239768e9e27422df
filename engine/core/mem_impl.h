/* mem_impl.h - memory helpers shared inside saga. Internal. */
#pragma once

#include <stddef.h>

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
