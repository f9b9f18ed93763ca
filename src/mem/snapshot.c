/* SPDX-License-Identifier: MIT */
/* RAM digest as at resume, taken while the VM runs (see snapshot.h). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include "mem/compat/uffd.h"
#include "mem/snapshot.h"
#include "util/thread_name.h"

#define CHUNK GW_DIGEST_CHUNK_BYTES
#define NR_LOCKS 64

/* Per chunk, atomic, changed under the chunk's lock. */
enum chunk_state {
	CHUNK_CLEAR = 0,		/* not protected (after arming: holds no page of the mask) */
	CHUNK_PROTECTED = 1,		/* protected, not hashed yet */
	CHUNK_DONE = 2,			/* hashed (res valid), unprotected */
};

struct gw_snapshot {
	/* Set at start, read-only after. */
	const struct gw_vm_info *vm;
	const struct gw_bitmap *mask;	/* set by arm, read-only after */
	int uffd;
	int stop_fd;			/* eventfd: the handler leaves */
	unsigned nr_registered;
	uint64_t chunk_base[GW_MAX_RAM_BLOCKS + 1];	/* first global chunk of block i */

	uint8_t *state;			/* enum chunk_state per chunk: atomic, changed under its lock */
	struct gw_chunk_hash *res;	/* per chunk, written under its lock */
	pthread_mutex_t locks[NR_LOCKS];	/* chunk c uses locks[c % NR_LOCKS] */
	uint8_t *buf;			/* handler thread: one chunk */
	pthread_t handler;
	bool handler_started;
	bool armed;			/* atomic: faults hash chunks (else they unprotect) */
	bool disabled;			/* protect_lock: gw_snapshot_disable was called */
	pthread_mutex_t protect_lock;	/* gw_snapshot_protect vs gw_snapshot_arm */
	uint64_t faults;		/* atomic */
	int err;			/* atomic: first handler error */
};

static pthread_mutex_t *chunk_lock(struct gw_snapshot *sn, uint64_t g)
{
	return &sn->locks[g % NR_LOCKS];
}

static int wp_range(struct gw_snapshot *sn, unsigned bi, uint64_t c, uint64_t nr, bool protect)
{
	const struct gw_ram_block *b = &sn->vm->blocks[bi];
	uint64_t off = c * CHUNK, len = nr * CHUNK;
	struct uffdio_writeprotect wp;

	if (off + len > b->size_bytes)
		len = b->size_bytes - off;
	wp = (struct uffdio_writeprotect){
		.range = { .start = (uintptr_t)b->host + off, .len = len },
		.mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0,	/* unprotect wakes waiters */
	};
	return ioctl(sn->uffd, UFFDIO_WRITEPROTECT, &wp) < 0 ? -errno : 0;
}

/*
 * Protect, in runs, the chunks [@c0, @c1) of block @bi that are not
 * protected yet and for which @want says yes. protect_lock held.
 */
static int protect_chunks(struct gw_snapshot *sn, unsigned bi, uint64_t c0, uint64_t c1,
			  bool (*want)(const struct gw_snapshot *sn, unsigned bi, uint64_t c))
{
	uint64_t run = 0;

	for (uint64_t c = c0; c <= c1; c++) {
		uint64_t g = sn->chunk_base[bi] + c;
		bool take = c < c1 && __atomic_load_n(&sn->state[g], __ATOMIC_ACQUIRE) == CHUNK_CLEAR &&
			    want(sn, bi, c);
		int ret;

		if (take) {
			run++;
			continue;
		}
		if (!run)
			continue;
		/* Marked first: a write that faults right after protection finds it so. */
		for (uint64_t k = c - run; k < c; k++)
			__atomic_store_n(&sn->state[sn->chunk_base[bi] + k], CHUNK_PROTECTED, __ATOMIC_RELEASE);
		ret = wp_range(sn, bi, c - run, run, true);
		if (ret)
			return ret;
		run = 0;
	}
	return 0;
}

static bool any_chunk(const struct gw_snapshot *sn, unsigned bi, uint64_t c)
{
	(void)sn, (void)bi, (void)c;
	return true;
}

static bool chunk_in_mask(const struct gw_snapshot *sn, unsigned bi, uint64_t c)
{
	const struct gw_ram_block *b = &sn->vm->blocks[bi];
	uint64_t ps = b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES;
	uint64_t per_chunk = CHUNK / ps;

	return gw_bitmap_any_in_range(&sn->mask[bi], c * per_chunk, per_chunk);
}

/* Block and chunk of a faulting address, or false. */
static bool locate(const struct gw_snapshot *sn, uint64_t addr, unsigned *bi, uint64_t *c)
{
	for (unsigned i = 0; i < sn->vm->nr_blocks; i++) {
		const struct gw_ram_block *b = &sn->vm->blocks[i];
		uint64_t base = (uintptr_t)b->host;

		if (addr >= base && addr < base + b->size_bytes) {
			*bi = i;
			*c = (addr - base) / CHUNK;
			return true;
		}
	}
	return false;
}

/* Hash chunk (bi, c) now unless done, then unprotect it (which wakes the writer). */
static void settle_chunk(struct gw_snapshot *sn, unsigned bi, uint64_t c)
{
	uint64_t g = sn->chunk_base[bi] + c;
	int ret = 0;

	pthread_mutex_lock(chunk_lock(sn, g));
	if (!__atomic_load_n(&sn->armed, __ATOMIC_ACQUIRE)) {
		/* Before resume: whoever writes is not the guest; arming protects again. */
		__atomic_store_n(&sn->state[g], CHUNK_CLEAR, __ATOMIC_RELEASE);
	} else if (__atomic_load_n(&sn->state[g], __ATOMIC_ACQUIRE) == CHUNK_PROTECTED) {
		ret = gw_digest_chunk(sn->vm, sn->mask, bi, c, sn->buf, &sn->res[g]);
		__atomic_store_n(&sn->state[g], CHUNK_DONE, __ATOMIC_RELEASE);
		__atomic_fetch_add(&sn->faults, 1, __ATOMIC_RELAXED);
	}
	if (!ret)
		ret = wp_range(sn, bi, c, 1, false);
	pthread_mutex_unlock(chunk_lock(sn, g));
	if (ret) {
		int zero = 0;

		__atomic_compare_exchange_n(&sn->err, &zero, ret, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
	}
}

static void *handler_main(void *arg)
{
	struct gw_snapshot *sn = arg;
	struct pollfd pfd[2] = { { sn->uffd, POLLIN, 0 }, { sn->stop_fd, POLLIN, 0 } };

	for (;;) {
		struct uffd_msg msg;
		unsigned bi;
		uint64_t c;
		ssize_t n;

		if (poll(pfd, 2, -1) < 0 && errno != EINTR)
			break;
		if (pfd[1].revents)
			break;
		n = read(sn->uffd, &msg, sizeof(msg));
		if (n != (ssize_t)sizeof(msg))
			continue;	/* EAGAIN: another wake-up took it */
		if (msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		if (locate(sn, msg.arg.pagefault.address, &bi, &c))
			settle_chunk(sn, bi, c);
	}
	return NULL;
}

/* ---- digest hooks: the workers hash a protected chunk under its lock ---- */

static bool hook_begin(void *ctx, unsigned bi, uint64_t c, struct gw_chunk_hash *res)
{
	struct gw_snapshot *sn = ctx;
	uint64_t g = sn->chunk_base[bi] + c;

	if (__atomic_load_n(&sn->state[g], __ATOMIC_ACQUIRE) == CHUNK_CLEAR)
		return false;	/* no data: never changes what the digest reads */
	pthread_mutex_lock(chunk_lock(sn, g));
	if (__atomic_load_n(&sn->state[g], __ATOMIC_ACQUIRE) == CHUNK_DONE) {
		*res = sn->res[g];
		pthread_mutex_unlock(chunk_lock(sn, g));
		return true;
	}
	return false;	/* still protected: hashed by the caller, lock held */
}

static void hook_end(void *ctx, unsigned bi, uint64_t c, const struct gw_chunk_hash *res)
{
	struct gw_snapshot *sn = ctx;
	uint64_t g = sn->chunk_base[bi] + c;

	if (__atomic_load_n(&sn->state[g], __ATOMIC_ACQUIRE) == CHUNK_CLEAR)
		return;
	if (res)
		sn->res[g] = *res;
	__atomic_store_n(&sn->state[g], CHUNK_DONE, __ATOMIC_RELEASE);
	(void)wp_range(sn, bi, c, 1, false);
	pthread_mutex_unlock(chunk_lock(sn, g));
}

/* ---- life cycle ---- */

static int uffd_open_sync_wp(void)
{
	struct uffdio_api api = { .api = UFFD_API, .features = UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	int fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK);

	if (fd < 0 && (errno == EPERM || errno == EACCES))
		fd = syscall(__NR_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
	if (fd < 0)
		return errno == ENOSYS ? -EOPNOTSUPP : -errno;
	if (ioctl(fd, UFFDIO_API, &api) < 0 || !(api.features & UFFD_FEATURE_WP_HUGETLBFS_SHMEM)) {
		close(fd);
		return -EOPNOTSUPP;
	}
	return fd;
}

static int register_blocks(struct gw_snapshot *sn)
{
	for (unsigned i = 0; i < sn->vm->nr_blocks; i++) {
		const struct gw_ram_block *b = &sn->vm->blocks[i];
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)b->host, .len = b->size_bytes },
			.mode = UFFDIO_REGISTER_MODE_WP,
		};

		if (ioctl(sn->uffd, UFFDIO_REGISTER, &reg) < 0)
			return errno == EINVAL ? -EOPNOTSUPP : -errno;
		sn->nr_registered = i + 1;
	}
	return 0;
}

int gw_snapshot_new(const struct gw_vm_info *vm, struct gw_snapshot **out)
{
	struct gw_snapshot *sn = calloc(1, sizeof(*sn));
	uint64_t nr_chunks;
	int ret;

	if (!sn)
		return -ENOMEM;
	sn->vm = vm;
	sn->uffd = sn->stop_fd = -1;
	pthread_mutex_init(&sn->protect_lock, NULL);
	for (unsigned i = 0; i < NR_LOCKS; i++)
		pthread_mutex_init(&sn->locks[i], NULL);
	for (unsigned i = 0; i < vm->nr_blocks; i++)
		sn->chunk_base[i + 1] = sn->chunk_base[i] + (vm->blocks[i].size_bytes + CHUNK - 1) / CHUNK;
	nr_chunks = sn->chunk_base[vm->nr_blocks];
	sn->state = calloc(nr_chunks ? nr_chunks : 1, 1);
	sn->res = calloc(nr_chunks ? nr_chunks : 1, sizeof(*sn->res));
	sn->buf = malloc(CHUNK);
	sn->stop_fd = eventfd(0, EFD_CLOEXEC);
	ret = !sn->state || !sn->res || !sn->buf ? -ENOMEM : sn->stop_fd < 0 ? -errno : uffd_open_sync_wp();
	if (ret >= 0) {
		sn->uffd = ret;
		ret = register_blocks(sn);
	}
	if (!ret)
		ret = -pthread_create(&sn->handler, NULL, handler_main, sn);
	if (ret) {
		gw_snapshot_free(sn);
		return ret;
	}
	gw_thread_name(sn->handler, "gw-snap-wp");
	sn->handler_started = true;
	*out = sn;
	return 0;
}

int gw_snapshot_protect(struct gw_snapshot *sn, unsigned block, uint64_t first, uint64_t nr)
{
	const struct gw_ram_block *b = &sn->vm->blocks[block];
	uint64_t ps = b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES;
	uint64_t c0 = first * ps / CHUNK, c1 = ((first + nr) * ps + CHUNK - 1) / CHUNK;
	int ret = 0;

	pthread_mutex_lock(&sn->protect_lock);
	if (!__atomic_load_n(&sn->armed, __ATOMIC_ACQUIRE) && !sn->disabled)
		ret = protect_chunks(sn, block, c0, c1, any_chunk);
	pthread_mutex_unlock(&sn->protect_lock);
	return ret;
}

/*
 * arm: the chunks of block @bi holding a page of the mask, found a word of
 * the mask at a time. Inside the downtime: a visit of every chunk cost
 * 2.9 ms for a 64 GiB guest that wrote nothing; this costs a scan of its
 * mask (a chunk is a whole number of mask words with 4 KiB pages, else
 * every chunk is visited). protect_lock held.
 */
static int protect_masked(struct gw_snapshot *sn, unsigned bi)
{
	const struct gw_ram_block *b = &sn->vm->blocks[bi];
	const struct gw_bitmap *m = &sn->mask[bi];
	uint64_t nr_chunks = sn->chunk_base[bi + 1] - sn->chunk_base[bi];
	uint64_t per_chunk = CHUNK / (b->page_size_bytes ? b->page_size_bytes : GW_PAGE_BYTES);
	uint64_t nw = gw_bitmap_words(m);

	if (!per_chunk || per_chunk % 64)
		return protect_chunks(sn, bi, 0, nr_chunks, chunk_in_mask);
	for (uint64_t w = 0; w < nw;) {
		uint64_t c0, c1;
		int ret;

		if (!m->words[w]) {
			w++;
			continue;
		}
		c0 = w * 64 / per_chunk;
		for (c1 = c0 + 1; c1 < nr_chunks && chunk_in_mask(sn, bi, c1); c1++)
			;
		ret = protect_chunks(sn, bi, c0, c1, chunk_in_mask);
		if (ret)
			return ret;
		w = c1 * per_chunk / 64;
	}
	return 0;
}

int gw_snapshot_arm(struct gw_snapshot *sn, const struct gw_bitmap *may_hold_data)
{
	int ret = 0;

	pthread_mutex_lock(&sn->protect_lock);
	sn->mask = may_hold_data;
	/* Armed first: from here a fault hashes, never drops, a protection. */
	__atomic_store_n(&sn->armed, true, __ATOMIC_RELEASE);
	for (unsigned i = 0; !ret && i < sn->vm->nr_blocks; i++)
		ret = protect_masked(sn, i);
	pthread_mutex_unlock(&sn->protect_lock);
	return ret;
}

int gw_snapshot_digest(struct gw_snapshot *sn, unsigned nr_threads, struct gw_digest *out)
{
	struct gw_digest_hooks hooks = { sn, hook_begin, hook_end };
	int ret = gw_ram_digest_hooked(sn->vm, nr_threads, sn->mask, &hooks, out);

	return ret ? ret : __atomic_load_n(&sn->err, __ATOMIC_RELAXED);
}

static void unregister_all(struct gw_snapshot *sn)
{
	for (unsigned i = 0; i < sn->nr_registered; i++) {
		const struct gw_ram_block *b = &sn->vm->blocks[i];
		struct uffdio_range r = { .start = (uintptr_t)b->host, .len = b->size_bytes };

		/* Unregistering drops the protection and wakes any writer. */
		(void)ioctl(sn->uffd, UFFDIO_UNREGISTER, &r);
	}
	sn->nr_registered = 0;
}

void gw_snapshot_disable(struct gw_snapshot *sn)
{
	if (!sn)
		return;
	pthread_mutex_lock(&sn->protect_lock);
	sn->disabled = true;
	unregister_all(sn);
	pthread_mutex_unlock(&sn->protect_lock);
}

uint64_t gw_snapshot_faults(const struct gw_snapshot *sn)
{
	return sn ? __atomic_load_n(&sn->faults, __ATOMIC_RELAXED) : 0;
}

void gw_snapshot_free(struct gw_snapshot *sn)
{
	uint64_t one = 1;

	if (!sn)
		return;
	if (sn->handler_started) {
		if (write(sn->stop_fd, &one, sizeof(one)) < 0)
			pthread_cancel(sn->handler);	/* cannot happen with an eventfd */
		pthread_join(sn->handler, NULL);
	}
	unregister_all(sn);
	if (sn->uffd >= 0)
		close(sn->uffd);
	if (sn->stop_fd >= 0)
		close(sn->stop_fd);
	for (unsigned i = 0; i < NR_LOCKS; i++)
		pthread_mutex_destroy(&sn->locks[i]);
	pthread_mutex_destroy(&sn->protect_lock);
	free(sn->state);
	free(sn->res);
	free(sn->buf);
	free(sn);
}
