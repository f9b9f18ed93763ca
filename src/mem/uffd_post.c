/* SPDX-License-Identifier: MIT */
/* The destination's guest RAM under postcopy: userfaultfd (see uffd_post.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "mem/compat/madv.h"
#include <unistd.h>
#include "mem/compat/uffd.h"
#include "mem/uffd_post.h"

#define PAGE GW_PAGE_BYTES
#define FEATURES (UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_MISSING_SHMEM | UFFD_FEATURE_MINOR_SHMEM)
#define READ_BATCH 64
#define MAX_RETRIES 1000		/* -EAGAIN from a mapping that changes under us */


struct gw_uffd_post {
	const struct gw_vm_info *vm;	/* set at open, read-only */
	int uffd;
	unsigned nr_registered;		/* blocks 0..n-1; owner only */
	/*
	 * fd-backed blocks: a second shared mapping of the same file range,
	 * not registered, through which placed pages are written into the
	 * page cache (set at open, read-only; NULL for anonymous blocks).
	 */
	uint8_t *alias[GW_MAX_RAM_BLOCKS];
};

/* A userfaultfd with the postcopy features: the fd, or -errno. */
static int uffd_open(bool *user_only)
{
	struct uffdio_api api = { .api = UFFD_API, .features = FEATURES };
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	*user_only = false;
	if (fd < 0 && (errno == EPERM || errno == EACCES)) {
		fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
		*user_only = fd >= 0;
	}
	if (fd < 0)
		return errno == ENOSYS ? -EOPNOTSUPP : -errno;
	if (ioctl(fd, UFFDIO_API, &api) < 0 || (api.features & FEATURES) != FEATURES) {
		close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

int gw_uffd_post_probe(char *why, size_t why_len)
{
	bool user_only;
	int fd = uffd_open(&user_only);

	if (fd < 0) {
		snprintf(why, why_len, "postcopy needs userfaultfd with missing and minor faults on shared "
			 "memory (Linux >= 5.13): %s", strerror(-fd));
		return fd;
	}
	close(fd);
	return 0;
}

int gw_uffd_post_open(const struct gw_vm_info *vm, struct gw_uffd_post **out, bool *user_only)
{
	struct gw_uffd_post *u = calloc(1, sizeof(*u));
	int ret;

	if (!u)
		return -ENOMEM;
	u->vm = vm;
	u->uffd = ret = uffd_open(user_only);
	for (unsigned i = 0; ret >= 0 && i < vm->nr_blocks; i++) {
		const struct gw_ram_block *b = &vm->blocks[i];
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)b->host, .len = b->size_bytes },
			.mode = UFFDIO_REGISTER_MODE_MISSING | (b->fd >= 0 ? UFFDIO_REGISTER_MODE_MINOR : 0),
		};

		if (ioctl(u->uffd, UFFDIO_REGISTER, &reg) < 0) {
			ret = errno == EINVAL ? -EOPNOTSUPP : -errno;
			break;
		}
		u->nr_registered = i + 1;
		if (b->fd < 0)
			continue;
		/* Precopy never mapped these pages, but a VMM may have (prealloc): unmap them all. */
		if (madvise(b->host, b->size_bytes, MADV_DONTNEED) < 0) {
			ret = -errno;
			break;
		}
		u->alias[i] = mmap(NULL, b->size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE,
				   b->fd, (off_t)b->fd_offset_bytes);
		if (u->alias[i] == MAP_FAILED) {
			u->alias[i] = NULL;
			ret = -errno;
		}
	}
	if (ret < 0) {
		gw_uffd_post_close(u);
		return ret;
	}
	*out = u;
	return 0;
}

int gw_uffd_post_fd(const struct gw_uffd_post *u)
{
	return u->uffd;
}

/* Block and page of an address inside a registered block, or false. */
static bool locate(const struct gw_uffd_post *u, uint64_t addr, unsigned *bi, uint64_t *page)
{
	for (unsigned i = 0; i < u->nr_registered; i++) {
		const struct gw_ram_block *b = &u->vm->blocks[i];
		uint64_t base = (uintptr_t)b->host;

		if (addr >= base && addr - base < b->size_bytes) {
			*bi = i;
			*page = (addr - base) / PAGE;
			return true;
		}
	}
	return false;
}

int gw_uffd_post_read(struct gw_uffd_post *u, struct gw_uffd_fault *out, int max)
{
	struct uffd_msg msg[READ_BATCH];
	int n = 0;

	while (n < max) {
		int want = max - n < READ_BATCH ? max - n : READ_BATCH;
		ssize_t got = read(u->uffd, msg, sizeof(msg[0]) * (size_t)want);

		if (got < 0)
			return errno == EAGAIN || errno == EINTR ? n : (n ? n : -errno);
		for (ssize_t k = 0; k < got / (ssize_t)sizeof(msg[0]); k++) {
			const struct uffd_msg *m = &msg[k];
			struct gw_uffd_fault *f = &out[n];

			if (m->event != UFFD_EVENT_PAGEFAULT ||
			    !locate(u, m->arg.pagefault.address, &f->block, &f->page))
				continue;
			f->tid = (pid_t)m->arg.pagefault.feat.ptid;
			f->minor = (m->arg.pagefault.flags & UFFD_PAGEFAULT_FLAG_MINOR) != 0;
			n++;
		}
		if (got < (ssize_t)sizeof(msg[0]) * want)
			break;
	}
	return n;
}

int gw_uffd_post_zap(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr)
{
	const struct gw_ram_block *b = &u->vm->blocks[block];

	return madvise((uint8_t *)b->host + page * PAGE, nr * PAGE, MADV_DONTNEED) ? -errno : 0;
}

/* Map [page, page + nr) of a fd-backed block from the page cache; 0, -EEXIST or -errno. */
static int do_continue(struct gw_uffd_post *u, const struct gw_ram_block *b, uint64_t page, uint64_t nr)
{
	uint64_t done = 0;

	for (unsigned tries = 0; done < nr * PAGE && tries < MAX_RETRIES; tries++) {
		struct uffdio_continue c = {
			.range = { .start = (uintptr_t)b->host + page * PAGE + done, .len = nr * PAGE - done },
		};

		if (ioctl(u->uffd, UFFDIO_CONTINUE, &c) == 0)
			return 0;
		if (errno != EAGAIN)
			return -errno;
		if (c.mapped > 0)
			done += (uint64_t)c.mapped;	/* partly done: go on after it */
	}
	return done == nr * PAGE ? 0 : -EAGAIN;
}

/* Copy (or zero: @src NULL) [page, page + nr) of an anonymous block; 0, -EEXIST or -errno. */
static int do_copy(struct gw_uffd_post *u, const struct gw_ram_block *b, uint64_t page, uint64_t nr,
		   const uint8_t *src)
{
	uint64_t done = 0;

	for (unsigned tries = 0; done < nr * PAGE && tries < MAX_RETRIES; tries++) {
		uint64_t dst = (uintptr_t)b->host + page * PAGE + done, len = nr * PAGE - done;
		int64_t got;
		int ret;

		if (src) {
			struct uffdio_copy c = { .dst = dst, .src = (uintptr_t)src + done, .len = len };

			ret = ioctl(u->uffd, UFFDIO_COPY, &c);
			got = c.copy;
		} else {
			struct uffdio_zeropage z = { .range = { .start = dst, .len = len } };

			ret = ioctl(u->uffd, UFFDIO_ZEROPAGE, &z);
			got = z.zeropage;
		}
		if (ret == 0)
			return 0;
		if (errno != EAGAIN)
			return -errno;
		if (got > 0)
			done += (uint64_t)got;
	}
	return done == nr * PAGE ? 0 : -EAGAIN;
}

/*
 * fd-backed: write [page, page + nr) into the page cache through the alias
 * (@src, or zeros when NULL), then map it in the registered mapping. Not
 * pwrite: a write to the file takes its inode lock, so a page answering a
 * fault waited for a background run's write, whose thread (niced, or just
 * preempted) could hold the lock for milliseconds. The pages are faulted in
 * first (MADV_POPULATE_WRITE), so that a failure to allocate one is an
 * error here instead of a SIGBUS in the memcpy. Nothing maps these pages in
 * the guest's mapping until CONTINUE: the guest never sees half a page.
 */
static int write_and_continue(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr,
			      const void *src)
{
	uint8_t *dst = u->alias[block] + page * PAGE;

	if (madvise(dst, nr * PAGE, MADV_POPULATE_WRITE) < 0)
		return -errno;
	if (src)
		memcpy(dst, src, nr * PAGE);
	else
		memset(dst, 0, nr * PAGE);
	return do_continue(u, &u->vm->blocks[block], page, nr);
}

int gw_uffd_post_place(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr,
		       const void *src)
{
	const struct gw_ram_block *b = &u->vm->blocks[block];

	return b->fd < 0 ? do_copy(u, b, page, nr, src) : write_and_continue(u, block, page, nr, src);
}

int gw_uffd_post_zero(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr)
{
	const struct gw_ram_block *b = &u->vm->blocks[block];

	return b->fd < 0 ? do_copy(u, b, page, nr, NULL) : write_and_continue(u, block, page, nr, NULL);
}

int gw_uffd_post_resolve(struct gw_uffd_post *u, unsigned block, uint64_t page, bool minor)
{
	const struct gw_ram_block *b = &u->vm->blocks[block];
	int ret = b->fd >= 0 && minor ? do_continue(u, b, page, 1) : do_copy(u, b, page, 1, NULL);

	/* Mapped meanwhile by another fault's resolution: only wake whoever still waits. */
	return ret == -EEXIST ? gw_uffd_post_wake(u, block, page) : ret;
}

int gw_uffd_post_map_cached(struct gw_uffd_post *u, unsigned block, uint64_t page, uint64_t nr)
{
	const struct gw_ram_block *b = &u->vm->blocks[block];
	uint64_t end = page + nr;

	for (unsigned tries = 0; page < end && tries < MAX_RETRIES + nr; tries++) {
		struct uffdio_continue c = {
			.range = { .start = (uintptr_t)b->host + page * PAGE, .len = (end - page) * PAGE },
		};

		if (b->fd < 0)
			return -EINVAL;
		if (ioctl(u->uffd, UFFDIO_CONTINUE, &c) == 0)
			return 0;
		if (errno != EAGAIN && errno != EEXIST)
			return -errno;
		if (c.mapped > 0)
			page += (uint64_t)c.mapped / PAGE;	/* stopped at a mapped page, or the mapping changed */
		else if (errno == EEXIST)
			page++;				/* this one is mapped: the next */
	}
	return page < end ? -EAGAIN : 0;
}

int gw_uffd_post_wake(struct gw_uffd_post *u, unsigned block, uint64_t page)
{
	const struct gw_ram_block *b = &u->vm->blocks[block];
	struct uffdio_range r = { .start = (uintptr_t)b->host + page * PAGE, .len = PAGE };

	return ioctl(u->uffd, UFFDIO_WAKE, &r) ? -errno : 0;
}

const uint8_t *gw_uffd_post_host(const struct gw_uffd_post *u, unsigned block, uint64_t page)
{
	return (const uint8_t *)u->vm->blocks[block].host + page * PAGE;
}

void gw_uffd_post_unregister(struct gw_uffd_post *u)
{
	for (unsigned i = 0; u && i < u->nr_registered; i++) {
		const struct gw_ram_block *b = &u->vm->blocks[i];
		struct uffdio_range r = { .start = (uintptr_t)b->host, .len = b->size_bytes };

		(void)ioctl(u->uffd, UFFDIO_UNREGISTER, &r);	/* wakes every waiter */
	}
	if (u)
		u->nr_registered = 0;
}

void gw_uffd_post_close(struct gw_uffd_post *u)
{
	if (!u)
		return;
	gw_uffd_post_unregister(u);
	for (unsigned i = 0; i < u->vm->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++)
		if (u->alias[i])
			munmap(u->alias[i], u->vm->blocks[i].size_bytes);
	if (u->uffd >= 0)
		close(u->uffd);
	free(u);
}
