/* SPDX-License-Identifier: MIT */
/*
 * Whole-buffer positional I/O on RAM backing files (memfd, tmpfs, files):
 * kernel-side copies that never fault the mapping in (first touches of a
 * mapping cost microseconds per page on virtualised hosts) and leave the
 * source's userfaultfd write-protect state alone. Holes read as zeros.
 */
#ifndef GW_UTIL_FDIO_H
#define GW_UTIL_FDIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Read/write exactly @len bytes at @off. 0, or -errno (-EIO for a short file). */
int gw_pread_all(int fd, void *buf, size_t len, off_t off);
int gw_pwrite_all(int fd, const void *buf, size_t len, off_t off);

#endif
