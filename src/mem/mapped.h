/* SPDX-License-Identifier: MIT */
/*
 * Which pages of a range are mapped in this process right now (a present
 * PTE): those can be read or written through the mapping without a fault.
 * One PAGEMAP_SCAN ioctl per call (kernel >= 6.7), never per page. On this
 * nested host a first touch through the mapping costs ~1-4 s per GiB, so
 * the page pipeline goes through the mapping only where it is mapped
 * already, and through the file (pread/pwrite) elsewhere.
 *
 * Threads: any; the pagemap fd may be shared (ioctls do not share state).
 */
#ifndef GW_MEM_MAPPED_H
#define GW_MEM_MAPPED_H

#include <stdint.h>

/* /proc/self/pagemap opened for PAGEMAP_SCAN, or -errno. */
int gw_pagemap_open(void);
/*
 * Bit i of @mask (nr_pages bits, cleared first) set when page i of the
 * range at @addr (page aligned) is present. 0, or -errno (-EOPNOTSUPP: no
 * PAGEMAP_SCAN here; then nothing is known to be mapped).
 */
int gw_mapped_mask(int pagemap_fd, const void *addr, uint32_t nr_pages, uint64_t *mask);
/* How many pages of the range at @addr are present, or -errno. */
int64_t gw_mapped_count(int pagemap_fd, const void *addr, uint64_t nr_pages);

#endif
