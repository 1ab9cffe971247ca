/* memlimit.h — sizes refused before they are allocated (memlimit.c). */
#ifndef HARP_RT_MEMLIMIT_H
#define HARP_RT_MEMLIMIT_H

#include <stddef.h>
#include <stdint.h>

#include "harp/error.h"

struct fn_function;

#define RT_MAX_SOURCE ((size_t)256 << 20) /* generated C: bytes */
#define RT_MAX_KERNELS 100000             /* generated C: kernels */

/* The memory cap: `asked`, or 0 for this machine's physical memory. */
uint64_t rt_memory_cap(uint64_t asked);
/* LimitExceeded when one instance (arena plus weights) exceeds the cap,
 * naming --max-memory / harp_options.max_memory and the sizes. */
harp_status rt_check_memory(harp_error *e, const struct fn_function *f, uint64_t max_memory);
/* LimitExceeded for generated C beyond RT_MAX_SOURCE bytes or RT_MAX_KERNELS
 * kernels (checked with the kernel count before emitting, the size after). */
harp_status rt_check_source(harp_error *e, size_t bytes, int nkernels);

#endif
