/* SPDX-License-Identifier: MIT */
/*
 * userfaultfd write-protect and PAGEMAP_SCAN definitions missing from older
 * kernel headers (Debian 12 ships 6.1 uapi headers; WP_ASYNC,
 * WP_UNPOPULATED and PAGEMAP_SCAN came with 6.7). Values are the kernel's
 * uapi ABI (include/uapi/linux/userfaultfd.h and fs.h) and never change;
 * whether the running kernel has them is decided at run time by the probes.
 */
#ifndef GW_COMPAT_UFFD_H
#define GW_COMPAT_UFFD_H

#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <linux/fs.h>
#include <linux/userfaultfd.h>

#ifndef __NR_userfaultfd
#define __NR_userfaultfd 323		/* x86-64 */
#endif

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef UFFD_FEATURE_WP_HUGETLBFS_SHMEM
#define UFFD_FEATURE_WP_HUGETLBFS_SHMEM (1 << 12)
#endif
#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED (1 << 13)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC (1 << 15)
#endif

#ifndef PAGEMAP_SCAN
/* Categories: bits in pm_scan_arg masks and page_region.categories. */
#define PAGE_IS_WPALLOWED	(1 << 0)
#define PAGE_IS_WRITTEN		(1 << 1)
#define PAGE_IS_FILE		(1 << 2)
#define PAGE_IS_PRESENT		(1 << 3)
#define PAGE_IS_SWAPPED		(1 << 4)
#define PAGE_IS_PFNZERO		(1 << 5)
#define PAGE_IS_HUGE		(1 << 6)
#define PAGE_IS_SOFT_DIRTY	(1 << 7)

/* One output run: [start, end) with the same (returned) categories. */
struct page_region {
	uint64_t start;
	uint64_t end;
	uint64_t categories;
};

/* Flags */
#define PM_SCAN_WP_MATCHING	(1 << 0)	/* write-protect the pages matched */
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)	/* fail (-EPERM) on a non-WP_ASYNC range */

struct pm_scan_arg {
	uint64_t size;			/* sizeof(struct pm_scan_arg) */
	uint64_t flags;
	uint64_t start;			/* page aligned */
	uint64_t end;			/* exclusive */
	uint64_t walk_end;		/* out: where the walk stopped (== end when done) */
	uint64_t vec;			/* struct page_region array */
	uint64_t vec_len;		/* entries in vec */
	uint64_t max_pages;		/* 0 = no limit */
	uint64_t category_inverted;
	uint64_t category_mask;		/* all of these must match */
	uint64_t category_anyof_mask;	/* at least one of these must match */
	uint64_t return_mask;		/* categories reported in page_region */
};

#define PAGEMAP_SCAN _IOWR('f', 16, struct pm_scan_arg)
#endif /* PAGEMAP_SCAN */

#ifndef PAGE_IS_GUARD
#define PAGE_IS_GUARD		(1 << 8)
#endif

#endif
