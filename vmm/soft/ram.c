/* SPDX-License-Identifier: MIT */
/*
 * Soft RAM: blocks of shared memory backed by a memfd (or the --memory-file),
 * mapped MAP_SHARED so that the engine can read and write them with
 * pread/pwrite and a local migration can pass the fd itself.
 *
 * A destination created without --memory takes the source's layout in
 * setup_ram; one created with it must match the layout exactly, and with
 * local migration maps the source's fds instead of its own memory.
 *
 * Threads: every function here runs under the VM's ctl, before vCPU threads
 * exist or with them parked (see soft_internal.h); vmm_prealloc_ram()
 * borrows one helper thread for its duration.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <godwit/log.h>
#include "prealloc.h"
#include "soft/soft_internal.h"

unsigned soft_block_of(const struct soft_vm *vm, uint64_t page)
{
	unsigned bi = 0;

	while (bi + 1 < vm->base.info.nr_blocks && page >= vm->block_first_page[bi + 1])
		bi++;
	return bi;
}

uint8_t *soft_page_ptr(const struct soft_vm *vm, uint64_t page)
{
	unsigned bi = soft_block_of(vm, page);

	return (uint8_t *)vm->base.info.blocks[bi].host +
	       (page - vm->block_first_page[bi]) * SOFT_PAGE_BYTES;
}

/* The --memory-file, at least @size_bytes long. The fd, or -errno with a reason. */
static int open_memory_file(const char *path, uint64_t size_bytes, bool *fresh, char *err,
			    size_t err_len)
{
	struct stat stb;
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	int e;

	if (fd < 0 || fstat(fd, &stb) < 0) {
		e = errno;
		snprintf(err, err_len, "%s: %s", path, strerror(e));
		goto fail;
	}
	*fresh = stb.st_size == 0;
	if ((uint64_t)stb.st_size < size_bytes && ftruncate(fd, (off_t)size_bytes) < 0) {
		e = errno;
		snprintf(err, err_len, "%s: cannot size to %" PRIu64 " bytes: %s", path, size_bytes,
			 strerror(e));
		goto fail;
	}
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	return -e;
}

/* A new memfd of @size_bytes (reads as zeros). The fd, or -errno with a reason. */
static int open_memfd(uint64_t size_bytes, char *err, size_t err_len)
{
	int fd = memfd_create("godwit-ram", MFD_CLOEXEC);
	int e;

	if (fd >= 0 && ftruncate(fd, (off_t)size_bytes) == 0)
		return fd;
	e = errno;
	snprintf(err, err_len, "memfd of %" PRIu64 " bytes: %s", size_bytes, strerror(e));
	if (fd >= 0)
		close(fd);
	return -e;
}

/*
 * Map @fd (closed on failure); prealloc when asked. The mapping or NULL. A
 * --memory-file that holds data already keeps it: preallocating then maps
 * every page, as a guest that ran would have (the source sends mapped pages
 * straight from guest memory, docs/architecture.md).
 */
static void *map_block(const struct soft_vm *vm, int fd, uint64_t fd_offset_bytes,
		       uint64_t size_bytes, bool fresh, int *ret, char *err, size_t err_len)
{
	void *host = mmap(NULL, size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
			  (off_t)fd_offset_bytes);
	uint64_t t0;

	if (host == MAP_FAILED) {
		*ret = -errno;
		snprintf(err, err_len, "mmap of %" PRIu64 " bytes: %s", size_bytes, strerror(-*ret));
		close(fd);
		return NULL;
	}
	/* Best effort: shmem THP may be disabled system-wide. */
	(void)madvise(host, size_bytes, MADV_HUGEPAGE);
	if (!vm->prealloc)
		return host;
	t0 = gw_now_ns();
	*ret = vmm_prealloc_ram(host, size_bytes);
	if (*ret) {
		snprintf(err, err_len, "preallocating %" PRIu64 " bytes: %s", size_bytes,
			 strerror(-*ret));
		munmap(host, size_bytes);
		close(fd);
		return NULL;
	}
	gw_log(GW_LOG_INFO, "soft", "ram_prealloc", "bytes=%" PRIu64 " ms=%.1f fresh=%d", size_bytes,
	       (gw_now_ns() - t0) / 1e6, fresh);
	return host;
}

int soft_ram_add(struct soft_vm *vm, const char *name, uint64_t gpa, uint64_t size_bytes,
		 int fd, uint64_t fd_offset_bytes, bool *fresh, char *err, size_t err_len)
{
	void *host;
	int ret = 0;

	*fresh = fd < 0;
	if (vm->base.info.nr_blocks >= GW_MAX_RAM_BLOCKS) {
		if (fd >= 0)
			close(fd);
		snprintf(err, err_len, "too many RAM blocks");
		return -E2BIG;
	}
	if (fd < 0) {
		fd_offset_bytes = 0;
		if (vm->memory_file && vm->base.info.nr_blocks == 0)
			fd = open_memory_file(vm->memory_file, size_bytes, fresh, err, err_len);
		else
			fd = open_memfd(size_bytes, err, err_len);
		if (fd < 0)
			return fd;
	}
	host = map_block(vm, fd, fd_offset_bytes, size_bytes, *fresh, &ret, err, err_len);
	if (!host)
		return ret;

	vmm_vm_ram_block_add(&vm->base, name, gpa, host, size_bytes, fd, fd_offset_bytes);
	vm->block_first_page[vm->base.info.nr_blocks] =
		vm->block_first_page[vm->base.info.nr_blocks - 1] + size_bytes / SOFT_PAGE_BYTES;
	vm->base.ram_pages = vm->block_first_page[vm->base.info.nr_blocks];
	return 0;
}

/* ---- the destination's setup_ram ---- */

/* Received fds are ours: close every one no block took (@taken NULL: none did). */
static void close_untaken(const struct gw_vm_info *want, const bool *taken)
{
	for (unsigned i = 0; want && i < want->nr_blocks && i < GW_MAX_RAM_BLOCKS; i++)
		if (want->blocks[i].fd >= 0 && !(taken && taken[i]))
			close(want->blocks[i].fd);
}

/* The source's layout, before anything is created: 0 or -EINVAL with a reason. */
static int layout_check(const struct gw_vm_info *want, char *reason, size_t reason_len)
{
	unsigned n = want ? want->nr_blocks : 0;
	uint64_t total = 0;

	if (n < 1 || n > GW_MAX_RAM_BLOCKS) {
		snprintf(reason, reason_len, "bad RAM block count %u", n);
		return -EINVAL;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct gw_ram_block *b = &want->blocks[i];

		if (!memchr(b->name, '\0', sizeof(b->name)) || !b->name[0]) {
			snprintf(reason, reason_len, "RAM block %u has no valid name", i);
			return -EINVAL;
		}
		for (unsigned j = 0; j < i; j++) {
			if (!strcmp(b->name, want->blocks[j].name)) {
				snprintf(reason, reason_len, "RAM block name %s used twice", b->name);
				return -EINVAL;
			}
		}
		if (b->page_size_bytes != SOFT_PAGE_BYTES) {
			snprintf(reason, reason_len, "RAM block %s: page size %u unsupported (only %u)",
				 b->name, b->page_size_bytes, SOFT_PAGE_BYTES);
			return -EINVAL;
		}
		if (!b->size_bytes || b->size_bytes % SOFT_PAGE_BYTES ||
		    b->size_bytes > SOFT_MAX_RAM_BYTES - total) {
			snprintf(reason, reason_len, "RAM block %s: size %" PRIu64 " bytes refused",
				 b->name, b->size_bytes);
			return -EINVAL;
		}
		total += b->size_bytes;
	}
	return 0;
}

/* Memory given on the command line: the layout must be identical. */
static int layout_match(const struct soft_vm *vm, const struct gw_vm_info *want, char *reason,
			size_t reason_len)
{
	unsigned n = want->nr_blocks;
	uint64_t src_bytes = 0;
	bool same = n == vm->base.info.nr_blocks;

	for (unsigned i = 0; i < n; i++) {
		src_bytes += want->blocks[i].size_bytes;
		same = same && !strcmp(want->blocks[i].name, vm->base.info.blocks[i].name) &&
		       want->blocks[i].size_bytes == vm->base.info.blocks[i].size_bytes;
	}
	if (same)
		return 0;
	if (n == vm->base.info.nr_blocks && n == 1)	/* a soft source of another --memory */
		vmm_memory_mismatch(reason, reason_len, src_bytes, vm->base.ram_pages * SOFT_PAGE_BYTES);
	else
		snprintf(reason, reason_len, "the source's RAM is %u block%s, this destination's VM (made "
			 "with --memory) has %u: start it without --memory to take the source's layout%s",
			 n, n == 1 ? "" : "s", vm->base.info.nr_blocks,
			 n == 2 && !strcmp(want->blocks[0].name, "sys") ? ", or with --accel kvm (the source "
			 "is a KVM VM)" : "");
	return -EINVAL;
}

/*
 * Local migration into RAM of the same layout: map the source's fds
 * instead of ours. @taken[i]: fd i now belongs to block i.
 */
static int take_received(struct soft_vm *vm, const struct gw_vm_info *want, bool *taken,
			 char *reason, size_t reason_len)
{
	for (unsigned i = 0; i < want->nr_blocks; i++) {
		struct gw_ram_block *d = &vm->base.info.blocks[i];
		const struct gw_ram_block *s = &want->blocks[i];
		void *host;

		if (s->fd < 0)
			continue;
		host = mmap(NULL, s->size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd,
			    (off_t)s->fd_offset_bytes);
		if (host == MAP_FAILED) {
			int ret = -errno;

			snprintf(reason, reason_len, "mmap of received fd for %s: %s", s->name,
				 strerror(-ret));
			return ret;
		}
		munmap(d->host, d->size_bytes);
		if (d->fd >= 0)
			close(d->fd);
		d->host = host;
		d->fd = s->fd;
		d->fd_offset_bytes = s->fd_offset_bytes;
		taken[i] = true;
	}
	return 0;
}

/* No RAM yet: create the source's layout (on received fds when given). */
static int create_like(struct soft_vm *vm, const struct gw_vm_info *want, bool *taken,
		       char *reason, size_t reason_len)
{
	for (unsigned i = 0; i < want->nr_blocks; i++) {
		const struct gw_ram_block *s = &want->blocks[i];
		bool fresh;
		int ret;

		/* soft_ram_add owns the fd from here, closing it on failure. */
		taken[i] = true;
		ret = soft_ram_add(vm, s->name, s->gpa, s->size_bytes, s->fd, s->fd_offset_bytes,
				   &fresh, reason, reason_len);
		if (ret < 0) {
			vmm_vm_ram_release(&vm->base);
			return ret;
		}
	}
	return 0;
}

int soft_ram_setup(struct soft_vm *vm, const struct gw_vm_info *want, char *reason,
		   size_t reason_len)
{
	bool taken[GW_MAX_RAM_BLOCKS] = { false };	/* received fd now owned by a block */
	int ret = layout_check(want, reason, reason_len);

	if (ret == 0 && vm->base.info.nr_blocks) {
		ret = layout_match(vm, want, reason, reason_len);
		if (ret == 0)
			ret = take_received(vm, want, taken, reason, reason_len);
	} else if (ret == 0) {
		ret = create_like(vm, want, taken, reason, reason_len);
	}
	if (ret)
		close_untaken(want, taken);
	return ret;
}
