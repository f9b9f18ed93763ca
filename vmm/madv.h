/* SPDX-License-Identifier: MIT */
/*
 * madvise advice missing from Debian 12's glibc headers (the kernel has
 * them since 5.14; values from include/uapi/asm-generic/mman-common.h). The
 * engine has its own copy (src/mem/compat/madv.h): vmm/ sees only the
 * public headers. A kernel without them refuses with EINVAL: callers fall back.
 */
#ifndef GW_VMM_MADV_H
#define GW_VMM_MADV_H

#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#endif
