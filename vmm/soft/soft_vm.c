/* SPDX-License-Identifier: MIT */
/*
 * The soft VM: memfd (or file) RAM and worker threads running a workload.
 *
 * Lifecycle (soft_vm_state):
 *   created --start/resume--> running <--pause/resume--> paused
 *   paused --set_postmigrate--> postmigrate (never runs again)
 *   incoming --setup_ram, load_state, resume--> running
 *   any --free--> shutdown
 *
 * Pause handshake: pause sets pause_req and waits until every vCPU thread
 * has parked in soft_vcpu_checkpoint() (so its last writes happen-before
 * the return of pause); resume clears it and wakes them.
 *
 * State section "soft-vcpus", version 1, little-endian, exactly
 *   u32 nr_vcpus (1..64)   u32 spec_len (1..127)   u32 fill (wire: 0 none,
 *   1 zero, 2 mix, 3 random, 4 text)   u32 flags (bit 0: initial content
 *   unknown)   u64 seed   u64 ram_pages
 *   spec_len bytes of canonical workload spec (no NUL)
 *   nr_vcpus x { u64 cursor, u64 gen, u64 progress }
 * The destination recomputes the slices from the spec, its RAM size and
 * nr_vcpus, and refuses anything that does not fit.
 *
 * Threads: the control operations (start, ops.*, check, set_postmigrate,
 * free) are serialized by ctl; the pause handshake uses lock + cond; the
 * state and progress counters are atomics readable from any thread.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <godwit/log.h>
#include "util/errbuf.h"
#include "mem/bitmap.h"
#include "mem/populated.h"
#include "soft/soft_internal.h"

#define STATE_SECTION "soft-vcpus"
#define STATE_VERSION 1u
#define STATE_HEADER_BYTES 32u
#define STATE_VCPU_BYTES 24u
#define STATE_FLAG_INIT_UNKNOWN 1u
#define FILL_THREADS 2
#define MAX_RAM_BYTES (1ull << 40)	/* refuse absurd layouts */

struct soft_vm {
	/* Configuration: set at creation, read-only. */
	uint64_t cfg_memory_bytes;
	enum vmm_fill fill;
	uint64_t seed;
	char *memory_file;		/* NULL: memfd */
	bool prealloc;			/* touch all fresh RAM at creation */

	/* RAM and layout: written by the control thread (under ctl) before vCPUs exist. */
	struct gw_vm_info info;
	uint64_t block_first_page[GW_MAX_RAM_BLOCKS + 1];
	uint64_t ram_pages;
	/* What never-rewritten pages hold (verify generation 0). */
	enum vmm_fill init_fill;
	uint64_t init_seed;
	bool init_known;

	/* Workload: set at creation, replaced by load_state (before vCPUs exist). */
	struct vmm_workload wl;
	uint64_t ws_pages;
	char spec[VMM_WORKLOAD_SPEC_MAX];
	unsigned nr_vcpus;
	struct soft_vcpu vcpus[SOFT_MAX_VCPUS];

	pthread_mutex_t ctl;		/* serializes control operations */
	bool loaded;			/* ctl: load_state applied */

	pthread_mutex_t lock;		/* pause handshake */
	pthread_cond_t cond;
	atomic_bool pause_req;		/* written under lock */
	atomic_bool stop_req;		/* written under lock */
	unsigned nr_threads;		/* lock: vCPU threads started */
	unsigned nr_parked;		/* lock: vCPU threads parked */
	int post_check;			/* lock: 1 ok, 0 not run, -1 failed */
	pthread_t post_thread;		/* ctl: runs the post-migration check, then the vCPUs */
	bool post_thread_started;	/* ctl */
	char post_msg[SOFT_MSG_MAX];	/* lock */

	atomic_uint throttle_pct;	/* 0..99 */
	atomic_int state;		/* enum soft_vm_state */
};


static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

const char *soft_vm_state_name(enum soft_vm_state st)
{
	switch (st) {
	case SOFT_VM_CREATED: return "created";
	case SOFT_VM_INCOMING: return "incoming";
	case SOFT_VM_RUNNING: return "running";
	case SOFT_VM_PAUSED: return "paused";
	case SOFT_VM_POSTMIGRATE: return "postmigrate";
	case SOFT_VM_SHUTDOWN: return "shutdown";
	}
	return "?";
}

/* ---- RAM ---- */

uint8_t *soft_page_ptr(const struct soft_vm *vm, uint64_t page)
{
	unsigned bi = 0;

	while (bi + 1 < vm->info.nr_blocks && page >= vm->block_first_page[bi + 1])
		bi++;
	return (uint8_t *)vm->info.blocks[bi].host +
	       (page - vm->block_first_page[bi]) * SOFT_PAGE_BYTES;
}

const struct vmm_workload *soft_vm_wl(const struct soft_vm *vm)
{
	return &vm->wl;
}

static void ram_free(struct soft_vm *vm)
{
	for (unsigned i = 0; i < vm->info.nr_blocks; i++) {
		struct gw_ram_block *b = &vm->info.blocks[i];

		if (b->host)
			munmap(b->host, b->size_bytes);
		if (b->fd >= 0)
			close(b->fd);
	}
	vm->info.nr_blocks = 0;
	vm->ram_pages = 0;
}

/*
 * Map one more block. @fd >= 0: map that fd (received, now ours, also on
 * failure). Otherwise the memory file (single block) or a new memfd.
 * *@fresh: the block reads as zeros. 0 or -errno with a reason.
 */
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

struct prealloc_part {
	uint8_t *host;
	uint64_t len;
	int err;
};

static void *prealloc_worker(void *arg)
{
	struct prealloc_part *p = arg;

	p->err = madvise(p->host, p->len, MADV_POPULATE_WRITE) ? -errno : 0;
	return NULL;
}

/*
 * --prealloc: allocate and zero every page now, with two threads, like
 * QEMU's -mem-prealloc. A destination created ahead of the migrate command
 * then writes into memory that is already backed: on virtualised hosts the
 * first touch of a page costs far more than the copy into it.
 */
static int prealloc_ram(uint8_t *host, uint64_t size)
{
	struct prealloc_part part[2];
	pthread_t t;
	uint64_t half = size / 2 / SOFT_PAGE_BYTES * SOFT_PAGE_BYTES;
	bool threaded;

	part[0] = (struct prealloc_part){ host, half, 0 };
	part[1] = (struct prealloc_part){ host + half, size - half, 0 };
	threaded = half && pthread_create(&t, NULL, prealloc_worker, &part[0]) == 0;
	if (!threaded)
		prealloc_worker(&part[0]);
	prealloc_worker(&part[1]);
	if (threaded)
		pthread_join(t, NULL);
	return part[0].err ? part[0].err : part[1].err;
}

static int ram_add_block(struct soft_vm *vm, const char *name, uint64_t gpa, uint64_t size,
			 int fd, uint64_t fd_offset, bool *fresh, char *err, size_t err_len)
{
	struct gw_ram_block *b;
	void *host;

	*fresh = true;
	if (vm->info.nr_blocks >= GW_MAX_RAM_BLOCKS) {
		if (fd >= 0)
			close(fd);
		gw_errbuf_set(err, err_len, "too many RAM blocks");
		return -E2BIG;
	}
	if (fd >= 0) {
		*fresh = false;
	} else if (vm->memory_file && vm->info.nr_blocks == 0) {
		struct stat stb;

		fd = open(vm->memory_file, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
		if (fd < 0 || fstat(fd, &stb) < 0) {
			int e = errno;

			gw_errbuf_set(err, err_len, "%s: %s", vm->memory_file, strerror(e));
			if (fd >= 0)
				close(fd);
			return -e;
		}
		*fresh = stb.st_size == 0;
		if ((uint64_t)stb.st_size < size && ftruncate(fd, (off_t)size) < 0) {
			int e = errno;

			gw_errbuf_set(err, err_len, "%s: cannot size to %" PRIu64 " bytes: %s",
				vm->memory_file, size, strerror(e));
			close(fd);
			return -e;
		}
		fd_offset = 0;
	} else {
		fd = memfd_create("godwit-ram", MFD_CLOEXEC);
		if (fd < 0 || ftruncate(fd, (off_t)size) < 0) {
			int e = errno;

			gw_errbuf_set(err, err_len, "memfd of %" PRIu64 " bytes: %s", size, strerror(e));
			if (fd >= 0)
				close(fd);
			return -e;
		}
		fd_offset = 0;
	}
	host = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)fd_offset);
	if (host == MAP_FAILED) {
		int e = errno;

		gw_errbuf_set(err, err_len, "mmap of %" PRIu64 " bytes: %s", size, strerror(e));
		close(fd);
		return -e;
	}
	/* Best effort: shmem THP may be disabled system-wide. */
	(void)madvise(host, size, MADV_HUGEPAGE);
	if (vm->prealloc && *fresh) {
		uint64_t t0 = mono_ns();
		int ret = prealloc_ram(host, size);

		if (ret) {
			gw_errbuf_set(err, err_len, "preallocating %" PRIu64 " bytes: %s", size, strerror(-ret));
			munmap(host, size);
			close(fd);
			return ret;
		}
		gw_log(GW_LOG_INFO, "soft", "ram_prealloc", "bytes=%" PRIu64 " ms=%.1f", size,
		       (mono_ns() - t0) / 1e6);
	}

	b = &vm->info.blocks[vm->info.nr_blocks++];
	memset(b, 0, sizeof(*b));
	snprintf(b->name, sizeof(b->name), "%s", name);
	b->gpa = gpa;
	b->host = host;
	b->size_bytes = size;
	b->page_size_bytes = SOFT_PAGE_BYTES;
	b->fd = fd;
	b->fd_offset_bytes = fd_offset;
	vm->block_first_page[vm->info.nr_blocks] =
		vm->block_first_page[vm->info.nr_blocks - 1] + size / SOFT_PAGE_BYTES;
	vm->ram_pages = vm->block_first_page[vm->info.nr_blocks];
	return 0;
}

/* ---- workload layout ---- */

/* Slices for the current workload, RAM and nr_vcpus; cursors reset. */
static void layout_workload(struct soft_vm *vm)
{
	vm->ws_pages = vmm_workload_ws_pages(&vm->wl, vm->ram_pages);
	vmm_workload_format(&vm->wl, vm->ws_pages, vm->spec, sizeof(vm->spec));
	vm->info.nr_vcpus = vm->nr_vcpus;
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		uint64_t first = vm->ws_pages * i / vm->nr_vcpus;
		uint64_t end = vm->ws_pages * (i + 1) / vm->nr_vcpus;

		v->first_page = first;
		v->nr_pages = end - first;
		v->cursor = 0;
		v->gen = 1;
	}
}

/* ---- vCPU threads ---- */

bool soft_vcpu_checkpoint(struct soft_vcpu *v, bool *was_parked)
{
	struct soft_vm *vm = v->vm;
	unsigned pct = atomic_load_explicit(&vm->throttle_pct, memory_order_relaxed);
	bool stop;

	*was_parked = false;
	if (atomic_load_explicit(&vm->stop_req, memory_order_acquire))
		return true;
	if (pct) {
		/* Sleep pct% of the time: work_ns * pct / (100 - pct) after each stretch. */
		uint64_t now = mono_ns();
		uint64_t work_ns = v->throttle_mark_ns && now > v->throttle_mark_ns ?
				   now - v->throttle_mark_ns : 0;
		uint64_t sleep_ns = work_ns * pct / (100 - pct);

		if (sleep_ns > 100000000ull)
			sleep_ns = 100000000ull;
		if (sleep_ns) {
			struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)sleep_ns };

			nanosleep(&ts, NULL);
		}
		v->throttle_mark_ns = mono_ns();
	}
	if (!atomic_load_explicit(&vm->pause_req, memory_order_acquire))
		return false;

	pthread_mutex_lock(&vm->lock);
	vm->nr_parked++;
	pthread_cond_broadcast(&vm->cond);
	while (atomic_load(&vm->pause_req) && !atomic_load(&vm->stop_req))
		pthread_cond_wait(&vm->cond, &vm->lock);
	vm->nr_parked--;
	stop = atomic_load(&vm->stop_req);
	pthread_mutex_unlock(&vm->lock);
	v->throttle_mark_ns = 0;
	*was_parked = true;
	return stop;
}

/* ctl held, no threads yet. */
static int vcpus_start(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->pause_req, false);
	atomic_store(&vm->stop_req, false);
	pthread_mutex_unlock(&vm->lock);
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		int ret = pthread_create(&v->thread, NULL, soft_vcpu_main, v);

		if (ret) {
			/* Undo: stop the ones started. */
			pthread_mutex_lock(&vm->lock);
			atomic_store(&vm->stop_req, true);
			pthread_cond_broadcast(&vm->cond);
			pthread_mutex_unlock(&vm->lock);
			for (unsigned j = 0; j < i; j++) {
				pthread_join(vm->vcpus[j].thread, NULL);
				vm->vcpus[j].thread_started = false;
			}
			pthread_mutex_lock(&vm->lock);
			vm->nr_threads = 0;
			pthread_mutex_unlock(&vm->lock);
			return -ret;
		}
		v->thread_started = true;
		pthread_mutex_lock(&vm->lock);
		vm->nr_threads++;
		pthread_mutex_unlock(&vm->lock);
	}
	return 0;
}

/* ctl held: returns once every vCPU thread is parked. */
static void vcpus_pause(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->pause_req, true);
	while (vm->nr_parked < vm->nr_threads)
		pthread_cond_wait(&vm->cond, &vm->lock);
	pthread_mutex_unlock(&vm->lock);
}

static void vcpus_resume(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->pause_req, false);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
}

static void vcpus_stop(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->lock);
	atomic_store(&vm->stop_req, true);
	pthread_cond_broadcast(&vm->cond);
	pthread_mutex_unlock(&vm->lock);
	for (unsigned i = 0; i < vm->nr_vcpus; i++) {
		if (vm->vcpus[i].thread_started)
			pthread_join(vm->vcpus[i].thread, NULL);
		vm->vcpus[i].thread_started = false;
	}
	pthread_mutex_lock(&vm->lock);
	vm->nr_threads = 0;
	vm->nr_parked = 0;
	pthread_mutex_unlock(&vm->lock);
}

/* ---- verify check ---- */

static void describe_mismatch(const struct soft_vm *vm, const struct soft_vcpu *v, uint64_t off,
			      uint64_t exp_gen, const uint8_t *found, const uint8_t *exp,
			      bool hole, char *msg, size_t len)
{
	uint64_t fw[2];
	unsigned at = 0;

	if (hole) {
		gw_errbuf_set(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			"): expected %s, found a never-populated page (zeros)",
			v->first_page + off, v->index, v->cursor, v->gen,
			exp_gen ? "generation data" : "initial fill content");
		return;
	}
	while (at < SOFT_PAGE_BYTES && found[at] == exp[at])
		at++;
	memcpy(fw, found, sizeof(fw));
	if (exp_gen)
		gw_errbuf_set(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			"): expected index=%" PRIu64 " gen=%" PRIu64 ", found index=%" PRIu64
			" gen=%" PRIu64 ", first difference at byte %u",
			v->first_page + off, v->index, v->cursor, v->gen, v->first_page + off,
			exp_gen, fw[0], fw[1], at);
	else
		gw_errbuf_set(msg, len, "page %" PRIu64 " (vcpu %u, cursor %" PRIu64 ", gen %" PRIu64
			"): expected the initial %s fill (generation 0), found index=%" PRIu64
			" gen=%" PRIu64 ", first difference at byte %u",
			v->first_page + off, v->index, v->cursor, v->gen,
			vmm_fill_name(vm->init_fill), fw[0], fw[1], at);
	(void)vm;
}

/*
 * Page reader for the check: fd-backed blocks are read with pread() in
 * 256 KiB windows. In this nested VM the first user-mode touch of a page
 * through a mapping costs microseconds (~4 s/GiB) while pread costs
 * ~0.25 s/GiB, and the destination check runs inside resume (downtime).
 * pread of a hole returns zeros without populating it.
 */
#define CHECK_WINDOW_PAGES 64u

struct page_reader {
	const struct soft_vm *vm;
	uint8_t *buf;			/* CHECK_WINDOW_PAGES pages */
	uint64_t first, count;		/* global pages held in buf */
};

static const uint8_t *page_read(struct page_reader *r, uint64_t page, uint64_t slice_end)
{
	const struct soft_vm *vm = r->vm;
	const struct gw_ram_block *b;
	unsigned bi = 0;
	uint64_t in_block, n;
	size_t done = 0, len;

	if (page >= r->first && page < r->first + r->count)
		return r->buf + (page - r->first) * SOFT_PAGE_BYTES;
	while (bi + 1 < vm->info.nr_blocks && page >= vm->block_first_page[bi + 1])
		bi++;
	b = &vm->info.blocks[bi];
	in_block = page - vm->block_first_page[bi];
	if (b->fd < 0)
		return soft_page_ptr(vm, page);
	n = vm->block_first_page[bi + 1] - page;
	if (n > slice_end - page)
		n = slice_end - page;
	if (n > CHECK_WINDOW_PAGES)
		n = CHECK_WINDOW_PAGES;
	len = n * SOFT_PAGE_BYTES;
	while (done < len) {
		ssize_t got = pread(b->fd, r->buf + done, len - done,
				    (off_t)(b->fd_offset_bytes + in_block * SOFT_PAGE_BYTES + done));

		if (got <= 0)
			break;
		done += (size_t)got;
	}
	if (done < len) {
		r->count = 0;
		return soft_page_ptr(vm, page);	/* odd file: use the mapping */
	}
	r->first = page;
	r->count = n;
	return r->buf;
}

/* vCPUs parked or absent. 0, -EIO with the first bad page in @msg, or -errno. */
static int check_verify(struct soft_vm *vm, char *msg, size_t len)
{
	struct gw_bitmap pop[GW_MAX_RAM_BLOCKS];
	uint8_t *exp = aligned_alloc(64, SOFT_PAGE_BYTES);
	struct page_reader rd = { .vm = vm };
	uint64_t checked = 0;
	int ret = 0;

	rd.buf = aligned_alloc(SOFT_PAGE_BYTES, CHECK_WINDOW_PAGES * SOFT_PAGE_BYTES);
	memset(pop, 0, sizeof(pop));
	if (!exp || !rd.buf) {
		ret = -ENOMEM;
		goto out;
	}
	/* Which pages were never populated: named as such in the report. */
	for (unsigned bi = 0; bi < vm->info.nr_blocks; bi++) {
		const struct gw_ram_block *b = &vm->info.blocks[bi];
		ssize_t n;

		ret = gw_bitmap_init(&pop[bi], b->size_bytes / SOFT_PAGE_BYTES);
		if (ret < 0)
			goto out;
		n = gw_populated_scan(b, &pop[bi], NULL);
		if (n < 0) {
			ret = (int)n;
			goto out;
		}
	}
	for (unsigned i = 0; i < vm->nr_vcpus && ret == 0; i++) {
		const struct soft_vcpu *v = &vm->vcpus[i];

		for (uint64_t off = 0; off < v->nr_pages; off++) {
			uint64_t page = v->first_page + off;
			uint64_t g = off < v->cursor ? v->gen : v->gen - 1;
			unsigned bi = 0;
			const uint8_t *found;

			if (g)
				vmm_verify_page(page, g, (uint64_t *)exp);
			else if (vm->init_known)
				vmm_fill_page(vm->init_fill, vm->init_seed, page, exp);
			else
				continue;	/* initial content unknown (pre-existing file) */
			checked++;
			found = page_read(&rd, page, v->first_page + v->nr_pages);
			if (memcmp(found, exp, SOFT_PAGE_BYTES) == 0)
				continue;
			while (bi + 1 < vm->info.nr_blocks && page >= vm->block_first_page[bi + 1])
				bi++;
			describe_mismatch(vm, v, off, g, found, exp,
					  !gw_bitmap_test(&pop[bi], page - vm->block_first_page[bi]),
					  msg, len);
			ret = -EIO;
			break;
		}
	}
	if (ret == 0)
		gw_errbuf_set(msg, len, "%" PRIu64 " pages checked", checked);
out:
	for (unsigned bi = 0; bi < vm->info.nr_blocks; bi++)
		gw_bitmap_free(&pop[bi]);
	free(rd.buf);
	free(exp);
	return ret;
}

/* ---- creation ---- */

struct soft_vm *soft_vm_new(const struct soft_vm_config *cfg, char *err, size_t err_len)
{
	struct soft_vm *vm;
	char reason[SOFT_MSG_MAX] = "";
	uint64_t t0;
	int ret;

	if (!cfg) {
		errno = EINVAL;
		return NULL;
	}
	if (cfg->nr_vcpus < 1 || cfg->nr_vcpus > SOFT_MAX_VCPUS) {
		gw_errbuf_set(err, err_len, "vcpus must be 1..%d, not %u", SOFT_MAX_VCPUS, cfg->nr_vcpus);
		errno = EINVAL;
		return NULL;
	}
	if (cfg->memory_bytes % SOFT_PAGE_BYTES || cfg->memory_bytes > MAX_RAM_BYTES ||
	    (!cfg->memory_bytes && !cfg->incoming)) {
		gw_errbuf_set(err, err_len, "memory must be a non-zero multiple of %u bytes, at most %llu",
			SOFT_PAGE_BYTES, MAX_RAM_BYTES);
		errno = EINVAL;
		return NULL;
	}
	if ((unsigned)cfg->fill > VMM_FILL_TEXT) {
		gw_errbuf_set(err, err_len, "unknown fill");
		errno = EINVAL;
		return NULL;
	}
	vm = calloc(1, sizeof(*vm));
	if (!vm) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&vm->ctl, NULL);
	pthread_mutex_init(&vm->lock, NULL);
	pthread_cond_init(&vm->cond, NULL);
	vm->info.kvm_vm_fd = -1;
	vm->cfg_memory_bytes = cfg->memory_bytes;
	vm->fill = cfg->incoming ? VMM_FILL_NONE : cfg->fill;
	vm->seed = cfg->seed;
	vm->nr_vcpus = cfg->nr_vcpus;
	for (unsigned i = 0; i < SOFT_MAX_VCPUS; i++) {
		vm->vcpus[i].vm = vm;
		vm->vcpus[i].index = i;
	}
	vm->prealloc = cfg->prealloc;
	if (cfg->memory_file) {
		vm->memory_file = strdup(cfg->memory_file);
		if (!vm->memory_file) {
			ret = -ENOMEM;
			goto fail;
		}
	}
	ret = vmm_workload_parse(cfg->workload, &vm->wl, reason, sizeof(reason));
	if (ret < 0)
		goto fail;

	if (cfg->memory_bytes) {
		bool fresh;

		ret = ram_add_block(vm, "ram0", 0, cfg->memory_bytes, -1, 0, &fresh,
				    reason, sizeof(reason));
		if (ret < 0)
			goto fail;
		t0 = mono_ns();
		ret = vmm_fill_ram(&vm->info, vm->fill, vm->seed, fresh, FILL_THREADS);
		if (ret < 0) {
			gw_errbuf_set(reason, sizeof(reason), "fill: %s", strerror(-ret));
			goto fail;
		}
		vm->init_fill = vm->fill;
		vm->init_seed = vm->seed;
		vm->init_known = fresh || vm->fill != VMM_FILL_NONE;
		if (vm->fill != VMM_FILL_NONE) {
			uint64_t ns = mono_ns() - t0;

			gw_log(GW_LOG_INFO, "soft", "ram_filled",
			       "fill=%s bytes=%" PRIu64 " ms=%.1f rate_bps=%.0f",
			       vmm_fill_name(vm->fill), cfg->memory_bytes, ns / 1e6,
			       ns ? cfg->memory_bytes * 1e9 / ns : 0.0);
		}
	}
	layout_workload(vm);
	atomic_store(&vm->state, cfg->incoming ? SOFT_VM_INCOMING : SOFT_VM_CREATED);
	gw_log(GW_LOG_INFO, "soft", "vm_created",
	       "memory_bytes=%" PRIu64 " vcpus=%u fill=%s workload=%s incoming=%d",
	       cfg->memory_bytes, vm->nr_vcpus, vmm_fill_name(vm->fill), vm->spec,
	       cfg->incoming);
	return vm;

fail:
	gw_errbuf_set(err, err_len, "%s", reason[0] ? reason : strerror(-ret));
	ram_free(vm);
	free(vm->memory_file);
	pthread_mutex_destroy(&vm->ctl);
	pthread_mutex_destroy(&vm->lock);
	pthread_cond_destroy(&vm->cond);
	free(vm);
	errno = -ret;
	return NULL;
}

static void join_post_check(struct soft_vm *vm);

void soft_vm_free(struct soft_vm *vm)
{
	if (!vm)
		return;
	pthread_mutex_lock(&vm->ctl);
	join_post_check(vm);
	vcpus_stop(vm);
	atomic_store(&vm->state, SOFT_VM_SHUTDOWN);
	ram_free(vm);
	pthread_mutex_unlock(&vm->ctl);
	free(vm->memory_file);
	pthread_mutex_destroy(&vm->ctl);
	pthread_mutex_destroy(&vm->lock);
	pthread_cond_destroy(&vm->cond);
	free(vm);
}

const struct gw_vm_info *soft_vm_info(const struct soft_vm *vm)
{
	return &vm->info;
}

enum soft_vm_state soft_vm_state(const struct soft_vm *vm)
{
	return (enum soft_vm_state)atomic_load(&((struct soft_vm *)vm)->state);
}

uint64_t soft_vm_progress(const struct soft_vm *vm)
{
	uint64_t sum = 0;

	for (unsigned i = 0; i < vm->nr_vcpus; i++)
		sum += atomic_load_explicit(&((struct soft_vm *)vm)->vcpus[i].progress,
					    memory_order_relaxed);
	return sum;
}

const char *soft_vm_workload(const struct soft_vm *vm)
{
	return vm->spec;
}

/* The verify workload's first act after a migration: check every page. */
static void post_migration_check(struct soft_vm *vm)
{
	char msg[SOFT_MSG_MAX] = "";
	uint64_t t0 = mono_ns();
	int ret = check_verify(vm, msg, sizeof(msg));

	if (ret < 0 && ret != -EIO)
		gw_errbuf_set(msg, sizeof(msg), "check could not run: %s", strerror(-ret));
	gw_log(ret == 0 ? GW_LOG_INFO : GW_LOG_ERROR, "soft", "post_migration_check",
	       "result=%s ms=%.1f msg=\"%s\"", ret == 0 ? "ok" : "failed",
	       (mono_ns() - t0) / 1e6, msg);
	pthread_mutex_lock(&vm->lock);
	vm->post_check = ret == 0 ? 1 : -1;
	snprintf(vm->post_msg, sizeof(vm->post_msg), "%s", msg);
	pthread_mutex_unlock(&vm->lock);
}

/*
 * Started by the first resume after a migration: the check is guest work
 * done after resume (like a real guest re-reading its memory), so it runs
 * here and not inside the engine's resume callback, i.e. not in downtime.
 * The vCPUs start when it is done. Holders of ctl join this thread before
 * touching the vCPUs; it never takes ctl itself.
 */
static void *post_check_main(void *arg)
{
	struct soft_vm *vm = arg;
	int ret;

	gw_log_set_side("dst");
	post_migration_check(vm);
	ret = vcpus_start(vm);
	if (ret)
		gw_log(GW_LOG_ERROR, "soft", "vcpus_start_failed", "err=%d", ret);
	return NULL;
}

/* ctl held: wait for a pending post-migration check and vCPU start. */
static void join_post_check(struct soft_vm *vm)
{
	if (vm->post_thread_started) {
		pthread_join(vm->post_thread, NULL);
		vm->post_thread_started = false;
	}
}

/* ctl held, state incoming, state loaded: run (verify: check first, in a thread). */
static int first_resume_after_migration(struct soft_vm *vm)
{
	int ret;

	if (vm->wl.kind == VMM_WL_VERIFY) {
		atomic_store(&vm->state, SOFT_VM_RUNNING);
		if (pthread_create(&vm->post_thread, NULL, post_check_main, vm) == 0) {
			vm->post_thread_started = true;
			return 0;
		}
		post_migration_check(vm);	/* no thread: check inline */
	}
	ret = vcpus_start(vm);
	atomic_store(&vm->state, ret == 0 ? SOFT_VM_RUNNING : SOFT_VM_INCOMING);
	return ret;
}

/*
 * ctl held, state created or incoming: the first start of the vCPUs, of a
 * new VM or of one whose state a migration loaded.
 */
static int start_first_locked(struct soft_vm *vm)
{
	int ret;

	if (soft_vm_state(vm) == SOFT_VM_INCOMING)
		return vm->loaded ? first_resume_after_migration(vm) : -EINVAL;
	if (!vm->info.nr_blocks)
		return -EINVAL;
	ret = vcpus_start(vm);
	if (ret == 0)
		atomic_store(&vm->state, SOFT_VM_RUNNING);
	return ret;
}

int soft_vm_start(struct soft_vm *vm)
{
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	switch (soft_vm_state(vm)) {
	case SOFT_VM_CREATED:
	case SOFT_VM_INCOMING:
		ret = start_first_locked(vm);
		break;
	case SOFT_VM_RUNNING:
		break;
	default:
		ret = -EINVAL;
		break;
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

void soft_vm_set_postmigrate(struct soft_vm *vm)
{
	pthread_mutex_lock(&vm->ctl);
	join_post_check(vm);
	if (soft_vm_state(vm) == SOFT_VM_RUNNING)
		vcpus_pause(vm);
	atomic_store(&vm->state, SOFT_VM_POSTMIGRATE);
	pthread_mutex_unlock(&vm->ctl);
}

int soft_vm_check(struct soft_vm *vm, char *msg, size_t msg_len)
{
	bool was_running;
	int ret;

	if (msg && msg_len)
		msg[0] = '\0';
	pthread_mutex_lock(&vm->ctl);
	join_post_check(vm);
	if (vm->wl.kind != VMM_WL_VERIFY) {
		gw_errbuf_set(msg, msg_len, "the %s workload has no exact check", vm->spec);
		ret = -EOPNOTSUPP;
		goto out;
	}
	if (!vm->info.nr_blocks || (soft_vm_state(vm) == SOFT_VM_INCOMING && !vm->loaded)) {
		gw_errbuf_set(msg, msg_len, "no RAM or workload state yet");
		ret = -EINVAL;
		goto out;
	}
	was_running = soft_vm_state(vm) == SOFT_VM_RUNNING;
	if (was_running)
		vcpus_pause(vm);
	ret = check_verify(vm, msg, msg_len);
	if (was_running)
		vcpus_resume(vm);
out:
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

int soft_vm_post_migration_check(const struct soft_vm *vm, char *msg, size_t msg_len)
{
	struct soft_vm *m = (struct soft_vm *)vm;
	int r;

	pthread_mutex_lock(&m->lock);
	r = m->post_check;
	gw_errbuf_set(msg, msg_len, "%s", m->post_msg);
	pthread_mutex_unlock(&m->lock);
	return r;
}

/* ---- engine callbacks ---- */

static int ops_pause(void *opaque)
{
	struct soft_vm *vm = opaque;

	pthread_mutex_lock(&vm->ctl);
	join_post_check(vm);
	if (soft_vm_state(vm) == SOFT_VM_RUNNING) {
		vcpus_pause(vm);
		atomic_store(&vm->state, SOFT_VM_PAUSED);
	}
	pthread_mutex_unlock(&vm->ctl);
	return 0;
}

static int ops_resume(void *opaque)
{
	struct soft_vm *vm = opaque;
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	switch (soft_vm_state(vm)) {
	case SOFT_VM_PAUSED:
		vcpus_resume(vm);
		atomic_store(&vm->state, SOFT_VM_RUNNING);
		break;
	case SOFT_VM_CREATED:
	case SOFT_VM_INCOMING:
		ret = start_first_locked(vm);
		break;
	case SOFT_VM_RUNNING:
		break;
	case SOFT_VM_POSTMIGRATE:
		ret = -EPERM;		/* the VM lives on the destination now */
		break;
	default:
		ret = -ESHUTDOWN;
		break;
	}
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Fill wire numbers are fixed; the enum may change. */
static uint32_t fill_to_wire(enum vmm_fill f)
{
	switch (f) {
	case VMM_FILL_ZERO: return 1;
	case VMM_FILL_MIX: return 2;
	case VMM_FILL_RANDOM: return 3;
	case VMM_FILL_TEXT: return 4;
	default: return 0;
	}
}

static int fill_from_wire(uint32_t w, enum vmm_fill *f)
{
	static const enum vmm_fill map[] = {
		VMM_FILL_NONE, VMM_FILL_ZERO, VMM_FILL_MIX, VMM_FILL_RANDOM, VMM_FILL_TEXT,
	};

	if (w >= sizeof(map) / sizeof(map[0]))
		return -EINVAL;
	*f = map[w];
	return 0;
}

static int ops_save_state(void *opaque, struct gw_state *st)
{
	struct soft_vm *vm = opaque;
	size_t spec_len = strlen(vm->spec);
	size_t len;
	uint8_t *buf, *p;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	if (soft_vm_state(vm) == SOFT_VM_RUNNING) {
		ret = -EBUSY;		/* the engine pauses first */
		goto out;
	}
	len = STATE_HEADER_BYTES + spec_len + (size_t)STATE_VCPU_BYTES * vm->nr_vcpus;
	buf = calloc(1, len);
	if (!buf) {
		ret = -ENOMEM;
		goto out;
	}
	put_u32(buf, vm->nr_vcpus);
	put_u32(buf + 4, (uint32_t)spec_len);
	put_u32(buf + 8, fill_to_wire(vm->init_fill));
	put_u32(buf + 12, vm->init_known ? 0 : STATE_FLAG_INIT_UNKNOWN);
	put_u64(buf + 16, vm->init_seed);
	put_u64(buf + 24, vm->ram_pages);
	memcpy(buf + STATE_HEADER_BYTES, vm->spec, spec_len);
	p = buf + STATE_HEADER_BYTES + spec_len;
	for (unsigned i = 0; i < vm->nr_vcpus; i++, p += STATE_VCPU_BYTES) {
		put_u64(p, vm->vcpus[i].cursor);
		put_u64(p + 8, vm->vcpus[i].gen);
		put_u64(p + 16, atomic_load(&vm->vcpus[i].progress));
	}
	ret = gw_state_add(st, STATE_SECTION, STATE_VERSION, buf, len);
	free(buf);
out:
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

/* Hostile input: every field is checked before anything is applied. */
static int ops_load_state(void *opaque, struct gw_state *st)
{
	struct soft_vm *vm = opaque;
	struct vmm_workload wl;
	char spec[VMM_WORKLOAD_SPEC_MAX], why[SOFT_MSG_MAX] = "";
	const uint8_t *data, *p;
	uint32_t version, nr, spec_len, flags;
	enum vmm_fill fill;
	uint64_t ram_pages, ws_pages, total = 0;
	size_t len;
	int ret;

	pthread_mutex_lock(&vm->ctl);
	if (soft_vm_state(vm) != SOFT_VM_INCOMING) {
		ret = gw_state_reject(st, -EBUSY, "soft VM is %s, not waiting for a migration",
				      soft_vm_state_name(soft_vm_state(vm)));
		goto out;
	}
	if (!vm->info.nr_blocks) {
		ret = gw_state_reject(st, -EINVAL, "soft VM has no RAM yet");
		goto out;
	}
	data = gw_state_find(st, STATE_SECTION, &version, &len);
	if (!data) {
		ret = gw_state_reject(st, -EINVAL, "section %s missing", STATE_SECTION);
		goto out;
	}
	if (version != STATE_VERSION) {
		ret = gw_state_reject(st, -EINVAL, "section %s version %u unsupported (want %u)",
				      STATE_SECTION, version, STATE_VERSION);
		goto out;
	}
	if (len < STATE_HEADER_BYTES) {
		ret = gw_state_reject(st, -EINVAL, "section %s too short: %zu bytes",
				      STATE_SECTION, len);
		goto out;
	}
	nr = get_u32(data);
	spec_len = get_u32(data + 4);
	flags = get_u32(data + 12);
	ram_pages = get_u64(data + 24);
	if (nr < 1 || nr > SOFT_MAX_VCPUS) {
		ret = gw_state_reject(st, -EINVAL, "bad vCPU count %u", nr);
		goto out;
	}
	if (spec_len < 1 || spec_len >= VMM_WORKLOAD_SPEC_MAX) {
		ret = gw_state_reject(st, -EINVAL, "bad workload spec length %u", spec_len);
		goto out;
	}
	if (len != STATE_HEADER_BYTES + spec_len + (size_t)STATE_VCPU_BYTES * nr) {
		ret = gw_state_reject(st, -EINVAL, "section %s is %zu bytes, expected %zu",
				      STATE_SECTION, len,
				      STATE_HEADER_BYTES + spec_len + (size_t)STATE_VCPU_BYTES * nr);
		goto out;
	}
	if (fill_from_wire(get_u32(data + 8), &fill) < 0 || (flags & ~STATE_FLAG_INIT_UNKNOWN)) {
		ret = gw_state_reject(st, -EINVAL, "bad fill %u or flags %#x",
				      get_u32(data + 8), flags);
		goto out;
	}
	if (ram_pages != vm->ram_pages) {
		ret = gw_state_reject(st, -EINVAL, "source has %" PRIu64 " pages of RAM, here %" PRIu64,
				      ram_pages, vm->ram_pages);
		goto out;
	}
	memcpy(spec, data + STATE_HEADER_BYTES, spec_len);
	spec[spec_len] = '\0';
	if (strlen(spec) != spec_len) {
		ret = gw_state_reject(st, -EINVAL, "NUL inside the workload spec");
		goto out;
	}
	if (vmm_workload_parse(spec, &wl, why, sizeof(why)) < 0) {
		ret = gw_state_reject(st, -EINVAL, "workload '%s': %s", spec, why);
		goto out;
	}
	ws_pages = vmm_workload_ws_pages(&wl, vm->ram_pages);
	if (wl.kind != VMM_WL_IDLE && ws_pages * SOFT_PAGE_BYTES != wl.ws_bytes && wl.ws_given) {
		ret = gw_state_reject(st, -EINVAL, "workload '%s' does not fit %" PRIu64 " pages",
				      spec, vm->ram_pages);
		goto out;
	}
	p = data + STATE_HEADER_BYTES + spec_len;
	for (unsigned i = 0; i < nr; i++, p += STATE_VCPU_BYTES) {
		uint64_t first = ws_pages * i / nr, n = ws_pages * (i + 1) / nr - first;
		uint64_t cursor = get_u64(p), gen = get_u64(p + 8), prog = get_u64(p + 16);

		if ((n && cursor >= n) || (!n && cursor) || gen < 1 || gen > (1ull << 62)) {
			ret = gw_state_reject(st, -EINVAL, "vCPU %u: cursor %" PRIu64 " gen %" PRIu64
					      " outside its slice of %" PRIu64 " pages",
					      i, cursor, gen, n);
			goto out;
		}
		if (prog > UINT64_MAX - total) {
			ret = gw_state_reject(st, -EINVAL, "vCPU %u: progress overflows", i);
			goto out;
		}
		total += prog;
	}

	/* Apply. */
	vm->wl = wl;
	vm->nr_vcpus = nr;
	layout_workload(vm);
	p = data + STATE_HEADER_BYTES + spec_len;
	for (unsigned i = 0; i < nr; i++, p += STATE_VCPU_BYTES) {
		vm->vcpus[i].cursor = get_u64(p);
		vm->vcpus[i].gen = get_u64(p + 8);
		atomic_store(&vm->vcpus[i].progress, get_u64(p + 16));
	}
	vm->init_fill = fill;
	vm->init_seed = get_u64(data + 16);
	vm->init_known = !(flags & STATE_FLAG_INIT_UNKNOWN);
	vm->loaded = true;
	gw_log(GW_LOG_INFO, "soft", "state_loaded", "workload=%s vcpus=%u progress=%" PRIu64,
	       vm->spec, nr, total);
	ret = 0;
out:
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

static int ops_setup_ram(void *opaque, const struct gw_vm_info *want, struct gw_vm_info *out,
			 char *reason, size_t reason_len)
{
	struct soft_vm *vm = opaque;
	bool taken[GW_MAX_RAM_BLOCKS] = { false };	/* received fd now owned by a block */
	uint64_t total = 0;
	unsigned n;
	int ret = 0;

	pthread_mutex_lock(&vm->ctl);
	n = want ? want->nr_blocks : 0;
	if (soft_vm_state(vm) != SOFT_VM_INCOMING) {
		gw_errbuf_set(reason, reason_len, "soft VM is %s, not waiting for a migration",
			soft_vm_state_name(soft_vm_state(vm)));
		ret = -EBUSY;
		goto fail;
	}
	if (n < 1 || n > GW_MAX_RAM_BLOCKS) {
		gw_errbuf_set(reason, reason_len, "bad RAM block count %u", n);
		ret = -EINVAL;
		goto fail;
	}
	for (unsigned i = 0; i < n; i++) {
		const struct gw_ram_block *b = &want->blocks[i];

		if (!memchr(b->name, '\0', sizeof(b->name)) || !b->name[0]) {
			gw_errbuf_set(reason, reason_len, "RAM block %u has no valid name", i);
			ret = -EINVAL;
			goto fail;
		}
		for (unsigned j = 0; j < i; j++)
			if (!strcmp(b->name, want->blocks[j].name)) {
				gw_errbuf_set(reason, reason_len, "RAM block name %s used twice", b->name);
				ret = -EINVAL;
				goto fail;
			}
		if (b->page_size_bytes != SOFT_PAGE_BYTES) {
			gw_errbuf_set(reason, reason_len, "RAM block %s: page size %u unsupported (only %u)",
				b->name, b->page_size_bytes, SOFT_PAGE_BYTES);
			ret = -EINVAL;
			goto fail;
		}
		if (!b->size_bytes || b->size_bytes % SOFT_PAGE_BYTES ||
		    b->size_bytes > MAX_RAM_BYTES - total) {
			gw_errbuf_set(reason, reason_len, "RAM block %s: size %" PRIu64 " bytes refused",
				b->name, b->size_bytes);
			ret = -EINVAL;
			goto fail;
		}
		total += b->size_bytes;
	}

	if (vm->info.nr_blocks) {
		/* Memory given on the command line: the layout must be identical. */
		for (unsigned i = 0; i < n || i < vm->info.nr_blocks; i++) {
			const struct gw_ram_block *s = i < n ? &want->blocks[i] : NULL;
			const struct gw_ram_block *d = i < vm->info.nr_blocks ? &vm->info.blocks[i] : NULL;

			if (!s || !d) {
				gw_errbuf_set(reason, reason_len, "layout mismatch: source has %u RAM blocks, "
					"destination %u", n, vm->info.nr_blocks);
				ret = -EINVAL;
				goto fail;
			}
			if (strcmp(s->name, d->name) || s->size_bytes != d->size_bytes) {
				gw_errbuf_set(reason, reason_len, "layout mismatch: source %s is %" PRIu64
					" bytes, destination %s %" PRIu64, s->name, s->size_bytes,
					d->name, d->size_bytes);
				ret = -EINVAL;
				goto fail;
			}
		}
		/* Local migration: take the source's memory instead of ours. */
		for (unsigned i = 0; i < n; i++) {
			struct gw_ram_block *d = &vm->info.blocks[i];
			const struct gw_ram_block *s = &want->blocks[i];
			void *host;

			if (s->fd < 0)
				continue;
			host = mmap(NULL, s->size_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, s->fd,
				    (off_t)s->fd_offset_bytes);
			if (host == MAP_FAILED) {
				ret = -errno;
				gw_errbuf_set(reason, reason_len, "mmap of received fd for %s: %s", s->name,
					strerror(-ret));
				goto fail;
			}
			munmap(d->host, d->size_bytes);
			if (d->fd >= 0)
				close(d->fd);
			d->host = host;
			d->fd = s->fd;
			d->fd_offset_bytes = s->fd_offset_bytes;
			taken[i] = true;
		}
	} else {
		for (unsigned i = 0; i < n; i++) {
			const struct gw_ram_block *s = &want->blocks[i];
			bool fresh;

			/* ram_add_block owns the fd from here, closing it on failure. */
			taken[i] = true;
			ret = ram_add_block(vm, s->name, s->gpa, s->size_bytes, s->fd,
					    s->fd_offset_bytes, &fresh, reason, reason_len);
			if (ret < 0) {
				ram_free(vm);
				goto fail;
			}
		}
	}
	layout_workload(vm);
	*out = vm->info;
	gw_log(GW_LOG_INFO, "soft", "ram_setup", "blocks=%u bytes=%" PRIu64 " local=%d",
	       vm->info.nr_blocks, vm->ram_pages * SOFT_PAGE_BYTES,
	       n && want->blocks[0].fd >= 0);
	pthread_mutex_unlock(&vm->ctl);
	return 0;

fail:
	/* Received fds are ours: never leak them. */
	for (unsigned i = 0; want && i < n && i < GW_MAX_RAM_BLOCKS; i++)
		if (want->blocks[i].fd >= 0 && !taken[i])
			close(want->blocks[i].fd);
	pthread_mutex_unlock(&vm->ctl);
	return ret;
}

static int ops_throttle(void *opaque, unsigned pct)
{
	struct soft_vm *vm = opaque;

	if (pct > 99)
		return -EINVAL;
	atomic_store(&vm->throttle_pct, pct);
	return 0;
}

const struct gw_vm_ops soft_vm_ops = {
	.pause = ops_pause,
	.resume = ops_resume,
	.save_state = ops_save_state,
	.load_state = ops_load_state,
	.setup_ram = ops_setup_ram,
	.throttle = ops_throttle,
};
