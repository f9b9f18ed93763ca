/* SPDX-License-Identifier: MIT */
/*
 * madvise advice missing from older C library headers (glibc 2.36 of
 * Debian 12 has no MADV_POPULATE_*; the kernel has them since 5.14).
 * Values are the kernel's uapi ABI (include/uapi/asm-generic/mman-common.h).
 * A kernel without them refuses the call with EINVAL: callers fall back.
 */
#ifndef GW_COMPAT_MADV_H
#define GW_COMPAT_MADV_H

#include <sys/mman.h>

#ifndef MADV_POPULATE_READ
#define MADV_POPULATE_READ 22
#endif
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

#endif
