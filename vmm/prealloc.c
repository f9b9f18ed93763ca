/* SPDX-License-Identifier: MIT */
/* --prealloc for every backend (see prealloc.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include "thread.h"
#include "prealloc.h"
#include "content.h"
#include "madv.h"


struct prealloc_part {
	uint8_t *host;
	uint64_t len_bytes;
	int err;			/* 0 or -errno */
};

static void *prealloc_worker(void *arg)
{
	struct prealloc_part *p = arg;

	p->err = madvise(p->host, p->len_bytes, MADV_POPULATE_WRITE) ? -errno : 0;
	return NULL;
}

int vmm_prealloc_ram(uint8_t *host, uint64_t size_bytes)
{
	struct prealloc_part part[2];
	pthread_t t;
	uint64_t half = size_bytes / 2 / VMM_PAGE_BYTES * VMM_PAGE_BYTES;
	bool threaded;

	part[0] = (struct prealloc_part){ host, half, 0 };
	part[1] = (struct prealloc_part){ host + half, size_bytes - half, 0 };
	threaded = half && pthread_create(&t, NULL, prealloc_worker, &part[0]) == 0;
	if (threaded)
		vmm_thread_name(t, "vm-prealloc");
	else
		prealloc_worker(&part[0]);
	prealloc_worker(&part[1]);
	if (threaded)
		pthread_join(t, NULL);
	return part[0].err ? part[0].err : part[1].err;
}
