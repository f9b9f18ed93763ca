/* SPDX-License-Identifier: MIT */
/*
 * Initial RAM content, a pure function of (fill, seed, global page index):
 * reproducible, independent of thread count, and checkable page by page
 * (the verify workload compares never-rewritten pages with it).
 *
 *   zero:   zeros, but populated (exercises zero-page detection).
 *   random: wyrand output, incompressible.
 *   text:   words from a fixed list, separated by spaces and newlines
 *           (zstd -1 compresses it about 3-4x).
 *   mix:    per page, by a hash of (seed, page): 25% zero (populated),
 *           25% random, 50% text.
 *   none:   nothing written; RAM stays a hole.
 *
 * Threads: vmm_fill_ram() workers take 2 MiB runs of pages from an atomic
 * counter; each page is written by exactly one worker.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include "content.h"
#include "madv.h"
#include "fill.h"
#include "thread.h"

_Static_assert(VMM_PAGE_BYTES == GW_PAGE_BYTES, "content.h and the engine disagree on the page size");


#define FILL_RUN_PAGES 512u		/* 2 MiB per work item */
#define FILL_MAX_THREADS 16

static const char *const fill_names[] = {
	[VMM_FILL_NONE] = "none", [VMM_FILL_ZERO] = "zero", [VMM_FILL_MIX] = "mix",
	[VMM_FILL_RANDOM] = "random", [VMM_FILL_TEXT] = "text",
};

int vmm_fill_parse(const char *name, enum vmm_fill *out)
{
	if (!name || !out)
		return -EINVAL;
	for (unsigned i = 0; i < sizeof(fill_names) / sizeof(fill_names[0]); i++) {
		if (strcmp(name, fill_names[i]) == 0) {
			*out = (enum vmm_fill)i;
			return 0;
		}
	}
	return -EINVAL;
}

const char *vmm_fill_name(enum vmm_fill f)
{
	if ((unsigned)f < sizeof(fill_names) / sizeof(fill_names[0]))
		return fill_names[f];
	return "?";
}

uint32_t vmm_fill_to_wire(enum vmm_fill f)
{
	switch (f) {
	case VMM_FILL_ZERO: return 1;
	case VMM_FILL_MIX: return 2;
	case VMM_FILL_RANDOM: return 3;
	case VMM_FILL_TEXT: return 4;
	default: return 0;
	}
}

int vmm_fill_from_wire(uint32_t w, enum vmm_fill *out)
{
	static const enum vmm_fill map[] = {
		VMM_FILL_NONE, VMM_FILL_ZERO, VMM_FILL_MIX, VMM_FILL_RANDOM, VMM_FILL_TEXT,
	};

	if (w >= sizeof(map) / sizeof(map[0]))
		return -EINVAL;
	*out = map[w];
	return 0;
}

/*
 * 128 common words; each stored in a 16-byte slot whose last byte is the
 * length, so a word is copied with one unconditional 16-byte store.
 */
#define NR_WORDS 128
static const char *const words[NR_WORDS] = {
	"the", "of", "and", "to", "in", "is", "was", "that", "for", "on", "as", "with", "by",
	"it", "from", "at", "his", "an", "were", "are", "which", "this", "be", "or", "has",
	"had", "not", "first", "their", "its", "new", "after", "but", "who", "they", "have",
	"her", "she", "two", "been", "other", "when", "there", "all", "during", "into",
	"school", "time", "may", "years", "more", "most", "only", "over", "city", "some",
	"world", "would", "where", "later", "up", "such", "used", "many", "can", "state",
	"about", "national", "out", "known", "university", "united", "then", "made", "also",
	"between", "under", "three", "season", "team", "film", "played", "while", "system",
	"number", "part", "migration", "memory", "page", "dirty", "round", "channel",
	"kernel", "guest", "host", "socket", "buffer", "thread", "vcpu", "device", "source",
	"destination", "network", "bandwidth", "downtime", "compress", "transfer", "against",
	"around", "before", "because", "several", "through", "including", "although",
	"however", "people", "family", "history", "music", "general", "series", "group",
	"album", "water", "river", "north", "south",
};

struct word_slot {
	char bytes[15];
	uint8_t len;
};

static struct word_slot word_slots[NR_WORDS];
static pthread_once_t word_slots_once = PTHREAD_ONCE_INIT;

static void word_slots_init(void)
{
	for (unsigned i = 0; i < NR_WORDS; i++) {
		size_t n = strlen(words[i]);

		if (n > 14)
			n = 14;
		memcpy(word_slots[i].bytes, words[i], n);
		word_slots[i].len = (uint8_t)n;
	}
}

static void fill_random(uint64_t s, uint8_t *out)
{
	uint64_t w[VMM_PAGE_BYTES / 8];

	for (unsigned i = 0; i < VMM_PAGE_BYTES / 8; i++)
		w[i] = vmm_wyrand(&s);
	memcpy(out, w, sizeof(w));
}

static void fill_text(uint64_t s, uint8_t *out)
{
	/* Slack for the unconditional 16-byte stores past the page end. */
	uint8_t buf[VMM_PAGE_BYTES + 32];
	unsigned pos = 0;

	while (pos < VMM_PAGE_BYTES) {
		uint64_t r = vmm_wyrand(&s);

		for (unsigned k = 0; k < 8 && pos < VMM_PAGE_BYTES; k++, r >>= 8) {
			const struct word_slot *w = &word_slots[r & (NR_WORDS - 1)];

			memcpy(buf + pos, w, 16);
			pos += w->len;
			/* One separator in 16 is a newline. */
			buf[pos++] = (r & 0x80) && (r & 0x7800) == 0 ? '\n' : ' ';
		}
	}
	memcpy(out, buf, VMM_PAGE_BYTES);
}

enum page_kind { KIND_ZERO, KIND_RANDOM, KIND_TEXT };

static enum page_kind page_kind(enum vmm_fill fill, uint64_t seed, uint64_t page)
{
	switch (fill) {
	case VMM_FILL_RANDOM:
		return KIND_RANDOM;
	case VMM_FILL_TEXT:
		return KIND_TEXT;
	case VMM_FILL_MIX:
		switch (vmm_mix64(seed ^ vmm_mix64(page + 0x51ed270b)) & 3) {
		case 0:
			return KIND_ZERO;
		case 1:
			return KIND_RANDOM;
		default:
			return KIND_TEXT;
		}
	default:
		return KIND_ZERO;
	}
}

void vmm_fill_page(enum vmm_fill fill, uint64_t seed, uint64_t page, uint8_t *out)
{
	uint64_t s = vmm_mix64(seed * 0x9e3779b97f4a7c15ull + page);

	pthread_once(&word_slots_once, word_slots_init);
	switch (page_kind(fill, seed, page)) {
	case KIND_RANDOM:
		fill_random(s, out);
		break;
	case KIND_TEXT:
		fill_text(s, out);
		break;
	default:
		memset(out, 0, VMM_PAGE_BYTES);
		break;
	}
}

struct fill_job {
	const struct gw_vm_info *info;	/* set at creation */
	enum vmm_fill fill;
	uint64_t seed;
	bool fresh;
	uint64_t nr_runs;		/* over all blocks */
	uint64_t run_base[GW_MAX_RAM_BLOCKS + 1];	/* first run of block i */
	atomic_uint_fast64_t next_run;	/* work counter */
	atomic_int err;			/* first error */
};

/*
 * One 2 MiB run. Blocks with a backing fd are written with pwrite() from a
 * buffer the worker reuses: the kernel copies through its direct map, while
 * the first user-mode touch of each 4 KiB page of a mapping costs several
 * microseconds in a nested VM (measured here: ~3 s/GiB per thread against
 * ~0.2 s/GiB for pwrite). It also models a KVM guest better: a guest fills
 * its RAM without going through the VMM's own mapping. @buf may be NULL
 * (allocation failed): then the run is written through the mapping.
 */
static void fill_run(struct fill_job *job, unsigned bi, uint64_t run, uint8_t *buf)
{
	const struct gw_ram_block *b = &job->info->blocks[bi];
	uint64_t block_pages = b->size_bytes / VMM_PAGE_BYTES;
	uint64_t first = run * FILL_RUN_PAGES;
	uint64_t n = block_pages - first < FILL_RUN_PAGES ? block_pages - first : FILL_RUN_PAGES;
	uint64_t global_first = 0;
	uint8_t *p = (uint8_t *)b->host + first * VMM_PAGE_BYTES;

	for (unsigned i = 0; i < bi; i++)
		global_first += job->info->blocks[i].size_bytes / VMM_PAGE_BYTES;
	global_first += first;

	if (job->fill == VMM_FILL_ZERO && job->fresh) {
		/* Populated zero pages without writing them: the kernel clears them. */
		if (madvise(p, n * VMM_PAGE_BYTES, MADV_POPULATE_WRITE) == 0)
			return;
	}
	if (b->fd >= 0 && buf) {
		size_t len = n * VMM_PAGE_BYTES, done = 0;
		off_t off = (off_t)(b->fd_offset_bytes + first * VMM_PAGE_BYTES);

		for (uint64_t i = 0; i < n; i++)
			vmm_fill_page(job->fill, job->seed, global_first + i, buf + i * VMM_PAGE_BYTES);
		while (done < len) {
			ssize_t w = pwrite(b->fd, buf + done, len - done, off + (off_t)done);

			if (w <= 0)
				break;
			done += (size_t)w;
		}
		if (done == len) {
			/*
			 * Mapped, as a running guest's RAM is (a KVM guest's
			 * writes fault it into the VMM's page tables, the soft
			 * VM's vCPUs write through them): about 0.1 s/GiB here,
			 * paid before a migration rather than by the source's
			 * read stage (docs/architecture.md, "A source in the
			 * page cache").
			 */
			(void)madvise(p, len, MADV_POPULATE_READ);
			return;
		}
		/* A file that refuses pwrite: fall through to the mapping. */
	}
	/* One call maps the whole run: cheaper than 512 separate faults. */
	(void)madvise(p, n * VMM_PAGE_BYTES, MADV_POPULATE_WRITE);
	for (uint64_t i = 0; i < n; i++) {
		uint8_t *page = p + i * VMM_PAGE_BYTES;

		if (page_kind(job->fill, job->seed, global_first + i) == KIND_ZERO && job->fresh)
			continue;
		vmm_fill_page(job->fill, job->seed, global_first + i, page);
	}
}

static void *fill_worker(void *arg)
{
	struct fill_job *job = arg;
	uint8_t *buf = aligned_alloc(VMM_PAGE_BYTES, FILL_RUN_PAGES * VMM_PAGE_BYTES);
	unsigned bi = 0;

	for (;;) {
		uint64_t r = atomic_fetch_add(&job->next_run, 1);

		if (r >= job->nr_runs)
			break;
		while (r >= job->run_base[bi + 1])
			bi++;
		fill_run(job, bi, r - job->run_base[bi], buf);
	}
	free(buf);
	return NULL;
}

int vmm_fill_ram(const struct gw_vm_info *info, enum vmm_fill fill, uint64_t seed,
		  bool fresh, unsigned nr_threads)
{
	pthread_t threads[FILL_MAX_THREADS];
	unsigned nr_started = 0;
	struct fill_job job;

	if (fill == VMM_FILL_NONE)
		return 0;
	pthread_once(&word_slots_once, word_slots_init);
	memset(&job, 0, sizeof(job));
	job.info = info;
	job.fill = fill;
	job.seed = seed;
	job.fresh = fresh;
	for (unsigned bi = 0; bi < info->nr_blocks; bi++) {
		uint64_t pages = info->blocks[bi].size_bytes / VMM_PAGE_BYTES;

		job.run_base[bi + 1] = job.run_base[bi] + (pages + FILL_RUN_PAGES - 1) / FILL_RUN_PAGES;
	}
	job.nr_runs = job.run_base[info->nr_blocks];
	if (nr_threads > FILL_MAX_THREADS)
		nr_threads = FILL_MAX_THREADS;
	for (unsigned i = 1; i < nr_threads; i++) {
		if (pthread_create(&threads[nr_started], NULL, fill_worker, &job) != 0)
			break;
		vmm_thread_name(threads[nr_started], "vm-fill%u", i);
		nr_started++;
	}
	fill_worker(&job);
	for (unsigned i = 0; i < nr_started; i++)
		pthread_join(threads[i], NULL);
	return atomic_load(&job.err);
}
