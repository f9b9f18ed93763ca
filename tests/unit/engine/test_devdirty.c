/* SPDX-License-Identifier: MIT */
/*
 * Invariant: pages a device writes behind the dirty tracker's back reach
 * the destination when the device reports them with gw_session_mark_dirty,
 * and only then. A "device" thread rewrites its own pages while precopy
 * runs, and the source VM's pause hook completes its in-flight work (one
 * more write to each of them) after stopping the guest and the device,
 * before the final harvest: with the uffd-wp tracker and the device
 * writing through a second mapping of the memfd (which uffd-wp does not
 * see, as KVM's dirty log sees no I/O thread), the migration completes
 * with the RAM digest verified and destination RAM equal to the source's
 * at the pause, in precopy and across a postcopy switch (the switch's map
 * holds the reported pages). The same run with reporting off (the test's
 * knob) ends with the digest mismatched and the device's pages stale on
 * the destination: the API is what carries them. With the device writing
 * through the registered mapping by a syscall (read() from a pipe: a
 * kernel-mode write, as from a tap), uffd-wp catches it with reporting
 * off. The call itself: 0 inside a block (len 0 too, with no migration),
 * -EINVAL outside every block, across a block's end, on a destination.
 *
 * RAM: 8 MiB memfd each side, every page data (present in the registered
 * mapping, so uffd-wp's file scan cannot find the second mapping's writes).
 * Skipped without the uffd-wp tracker (and postcopy without userfaultfd).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "mem/uffd_post.h"
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (8u << 20)
#define RAM_PAGES (RAM_BYTES / TEST_PAGE_BYTES)
#define GPA_BASE 0x100000ull		/* the block's guest-physical base: not 0, so gpa is tested */
#define GUEST_PAGES 64u			/* the guest rewrites pages [0, 64) */
#define DEV_FIRST 1000u			/* the device writes pages DEV_FIRST + 3 * i */
#define DEV_PAGES 48u

enum dev_path {
	DEV_SECOND_MAPPING,		/* memcpy through another mapping of the memfd */
	DEV_SYSCALL,			/* read() from a pipe into the registered mapping */
};

struct device {
	struct gw_session *s;		/* set before start */
	uint8_t *via;			/* the mapping it writes through (DEV_SECOND_MAPPING) */
	uint8_t *host;			/* the registered mapping (DEV_SYSCALL) */
	enum dev_path path;
	bool report;			/* the knob: call gw_session_mark_dirty after each write */
	int pipe[2];			/* DEV_SYSCALL */
	uint64_t gen;			/* device thread, then the pause hook (after the park) */
	pthread_t thr;
	struct test_park park;
	int mark_err;			/* atomic: the first mark that failed */
};

struct guest {
	uint8_t *host;
	uint64_t gen;
	pthread_t thr;
	struct test_park park;
};

struct vm {
	struct guest g;
	struct device d;
};

static void fill_page(uint8_t *p, uint32_t page, uint64_t gen)
{
	for (unsigned i = 0; i < TEST_PAGE_BYTES; i += 8) {
		uint64_t v = gen << 32 | (uint64_t)page << 12 | i;

		memcpy(p + i, &v, 8);
	}
}

/* One device write of page @page (a frame into a receive buffer), then its report. */
static void dev_write(struct device *d, uint32_t page)
{
	uint64_t off = (uint64_t)page * TEST_PAGE_BYTES;
	uint8_t buf[TEST_PAGE_BYTES];
	int ret;

	d->gen++;
	if (d->path == DEV_SECOND_MAPPING) {
		fill_page(d->via + off, page, d->gen);
	} else {
		fill_page(buf, page, d->gen);
		TEST_ASSERT(write(d->pipe[1], buf, sizeof(buf)) == (ssize_t)sizeof(buf), "pipe write");
		TEST_ASSERT(read(d->pipe[0], d->host + off, sizeof(buf)) == (ssize_t)sizeof(buf), "pipe read");
	}
	if (!d->report)
		return;
	ret = gw_session_mark_dirty(d->s, GPA_BASE + off, TEST_PAGE_BYTES);
	if (ret)
		__atomic_compare_exchange_n(&d->mark_err, &(int){ 0 }, ret, false, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED);
}

static void *dev_main(void *arg)
{
	struct device *d = arg;
	unsigned i = 0;

	while (test_park_point(&d->park)) {
		dev_write(d, DEV_FIRST + 3 * (i++ % DEV_PAGES));
		usleep(200);
	}
	return NULL;
}

static void *guest_main(void *arg)
{
	struct guest *g = arg;
	unsigned i = 0;

	while (test_park_point(&g->park)) {
		fill_page(g->host + (uint64_t)(i % GUEST_PAGES) * TEST_PAGE_BYTES, i % GUEST_PAGES, ++g->gen);
		i++;
		if (i % 16 == 0)
			usleep(100);
	}
	return NULL;
}

/*
 * The VMM's pause: vCPUs, then the device, which completes what it had in
 * flight (every one of its pages once more) and reports it before the hook
 * returns: the contract of gw_session_mark_dirty.
 */
static void vm_pause(void *arg)
{
	struct vm *v = arg;

	test_park_pause(&v->g.park);
	test_park_pause(&v->d.park);
	for (unsigned i = 0; i < DEV_PAGES; i++)
		dev_write(&v->d, DEV_FIRST + 3 * i);
}

static void vm_resume(void *arg)
{
	struct vm *v = arg;

	test_park_resume(&v->d.park);
	test_park_resume(&v->g.park);
}

static void set_param(struct gw_session *s, enum gw_param p, int64_t val)
{
	int ret = gw_session_set(s, p, val);

	TEST_ASSERT(ret == 0, "set %s = %lld: %d", gw_param_info(p)->name, (long long)val, ret);
}

/* Pages of the device that differ between the two RAMs; other pages that differ in *@other. */
static unsigned count_diff(const uint8_t *a, const uint8_t *b, unsigned *other)
{
	unsigned dev = 0;

	*other = 0;
	for (uint32_t p = 0; p < RAM_PAGES; p++) {
		if (!memcmp(a + (uint64_t)p * TEST_PAGE_BYTES, b + (uint64_t)p * TEST_PAGE_BYTES, TEST_PAGE_BYTES))
			continue;
		if (p >= DEV_FIRST && (p - DEV_FIRST) % 3 == 0 && (p - DEV_FIRST) / 3 < DEV_PAGES)
			dev++;
		else
			(*other)++;
	}
	return dev;
}

struct config {
	const char *name;
	enum dev_path path;
	bool report;
	bool postcopy;			/* gw_session_start_postcopy once precopy runs */
	bool expect_match;
	int send_path;			/* enum gw_send_path (0: auto) */
};

static void run(const struct config *cf)
{
	struct test_ram sram, dram;
	struct test_vm svm = { 0 }, dvm = { 0 };
	struct vm *v = calloc(1, sizeof(*v));
	struct gw_vm_info si, di;
	struct gw_session *src, *dst;
	struct gw_stats ss = { .size = sizeof(ss) }, ds = { .size = sizeof(ds) };
	unsigned dev_diff, other_diff;
	char url[200];
	int sret, dret;

	TEST_ASSERT(v, "calloc");
	TEST_ASSERT(test_ram_create(&sram, "dd-src", RAM_BYTES, 0) == 0, "source RAM");
	TEST_ASSERT(test_ram_create(&dram, "dd-dst", RAM_BYTES, 0) == 0, "destination RAM");
	for (uint32_t p = 0; p < RAM_PAGES; p++)
		fill_page(sram.host + (uint64_t)p * TEST_PAGE_BYTES, p, 0);
	test_vm_info_one(&si, &sram, "ram0");
	test_vm_info_one(&di, &dram, "ram0");
	si.blocks[0].gpa = di.blocks[0].gpa = GPA_BASE;

	v->g.host = sram.host;
	v->d.host = sram.host;
	v->d.path = cf->path;
	v->d.report = cf->report;
	v->d.via = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, sram.fd, 0);
	TEST_ASSERT(v->d.via != MAP_FAILED, "second mapping of the memfd");
	TEST_ASSERT(pipe(v->d.pipe) == 0, "pipe");
	svm.on_pause = vm_pause;
	svm.on_resume = vm_resume;
	svm.hook_arg = v;

	dst = gw_session_new(GW_ROLE_DEST, &di, &test_vm_ops, &dvm);
	src = gw_session_new(GW_ROLE_SOURCE, &si, &test_vm_ops, &svm);
	TEST_ASSERT(src && dst, "sessions");
	v->d.s = src;
	snprintf(url, sizeof(url), "unix:/tmp/gw-devdirty-%d.sock", (int)getpid());
	TEST_ASSERT(gw_incoming_start(dst, url) == 0, "incoming %s", url);
	set_param(src, GW_PARAM_DIRTY_BACKEND, GW_DIRTY_UFFD_WP);
	set_param(src, GW_PARAM_VERIFY, 1);
	set_param(src, GW_PARAM_CHANNELS, 2);
	/* Rounds for about half a second while the device writes, then a forced switch. */
	set_param(src, GW_PARAM_MAX_BANDWIDTH_BPS, 32ll << 20);
	set_param(src, GW_PARAM_DOWNTIME_LIMIT_US, 1000);
	set_param(src, GW_PARAM_CONVERGE_TIMEOUT_MS, 500);
	set_param(src, GW_PARAM_CONVERGE_POLICY, GW_CONVERGE_FORCE);
	set_param(src, GW_PARAM_SEND_PATH, cf->send_path);
	if (cf->postcopy) {
		set_param(src, GW_PARAM_POSTCOPY, 1);
		set_param(src, GW_PARAM_POSTCOPY_AFTER_ROUNDS, 3);
	}

	TEST_ASSERT(pthread_create(&v->g.thr, NULL, guest_main, &v->g) == 0, "guest thread");
	TEST_ASSERT(pthread_create(&v->d.thr, NULL, dev_main, &v->d) == 0, "device thread");
	TEST_ASSERT(gw_migrate_start(src, gw_incoming_url(dst)) == 0, "migrate");
	sret = gw_session_wait(src);
	dret = gw_session_wait(dst);
	gw_session_stats(src, &ss);
	gw_session_stats(dst, &ds);
	dev_diff = count_diff(sram.host, dram.host, &other_diff);

	TEST_CHECK(__atomic_load_n(&v->d.mark_err, __ATOMIC_RELAXED) == 0, "%s: a mark failed: %d", cf->name,
		   v->d.mark_err);
	TEST_CHECK(test_vm_load(&svm.pause_calls) == 1 && test_vm_load(&svm.resume_calls) == 0,
		   "%s: source paused %u resumed %u", cf->name, test_vm_load(&svm.pause_calls),
		   test_vm_load(&svm.resume_calls));
	TEST_CHECK(ss.rounds >= 2, "%s: %u rounds: the device wrote during precopy", cf->name, ss.rounds);
	TEST_CHECK(!cf->postcopy || (ss.postcopy && ds.postcopy), "%s: switched to postcopy", cf->name);
	TEST_CHECK(other_diff == 0, "%s: %u pages the device never wrote differ", cf->name, other_diff);
	if (cf->expect_match) {
		TEST_CHECK(sret == 0 && dret == 0 && ss.status == GW_STATUS_COMPLETED,
			   "%s: completed (src %d %s, dst %d %s)", cf->name, sret, ss.error, dret, ds.error);
		TEST_CHECK(ss.verify == GW_VERIFY_OK && ds.verify == GW_VERIFY_OK, "%s: digest %s/%s", cf->name,
			   gw_verify_name(ss.verify), gw_verify_name(ds.verify));
		TEST_CHECK(dev_diff == 0, "%s: %u device pages differ", cf->name, dev_diff);
		/* Reporting devices and live sends do not mix: pages are copied first. */
		TEST_CHECK(!cf->report || ss.live_pages == 0, "%s: %llu pages sent live", cf->name,
			   (unsigned long long)ss.live_pages);
	} else {
		/* Without the reports the final writes stay behind: the digest says so. */
		TEST_CHECK(ss.verify == GW_VERIFY_MISMATCH || ds.verify == GW_VERIFY_MISMATCH,
			   "%s: digest %s/%s, want a mismatch", cf->name, gw_verify_name(ss.verify),
			   gw_verify_name(ds.verify));
		TEST_CHECK(dev_diff == DEV_PAGES, "%s: %u of %u device pages stale", cf->name, dev_diff, DEV_PAGES);
	}
	printf("%-40s %s/%s verify=%s/%s rounds=%u postcopy=%d device_writes=%llu stale_device_pages=%u\n",
	       cf->name, gw_status_name(ss.status), gw_status_name(ds.status), gw_verify_name(ss.verify),
	       gw_verify_name(ds.verify), ss.rounds, ss.postcopy, (unsigned long long)v->d.gen, dev_diff);

	test_park_quit(&v->g.park);
	test_park_quit(&v->d.park);
	pthread_join(v->g.thr, NULL);
	pthread_join(v->d.thr, NULL);
	gw_session_free(src);
	gw_session_free(dst);
	close(v->d.pipe[0]);
	close(v->d.pipe[1]);
	munmap(v->d.via, RAM_BYTES);
	test_ram_destroy(&sram);
	test_ram_destroy(&dram);
	free(v);
}

/* The call's answers, no migration running: cheap checks, no effect. */
static void api_checks(void)
{
	struct test_ram ram;
	struct test_vm tvm = { 0 };
	struct gw_vm_info vi;
	struct gw_session *src, *dst;
	const uint64_t end = GPA_BASE + RAM_BYTES;

	TEST_ASSERT(test_ram_create(&ram, "dd-api", RAM_BYTES, 0) == 0, "RAM");
	test_vm_info_one(&vi, &ram, "ram0");
	vi.blocks[0].gpa = GPA_BASE;
	src = gw_session_new(GW_ROLE_SOURCE, &vi, &test_vm_ops, &tvm);
	dst = gw_session_new(GW_ROLE_DEST, &vi, &test_vm_ops, &tvm);
	TEST_ASSERT(src && dst, "sessions");
	TEST_CHECK(gw_session_mark_dirty(src, GPA_BASE, TEST_PAGE_BYTES) == 0, "first page");
	TEST_CHECK(gw_session_mark_dirty(src, GPA_BASE + 10, 3 * TEST_PAGE_BYTES) == 0, "unaligned, 4 pages");
	TEST_CHECK(gw_session_mark_dirty(src, GPA_BASE, RAM_BYTES) == 0, "the whole block");
	TEST_CHECK(gw_session_mark_dirty(src, end - 1, 1) == 0, "last byte");
	TEST_CHECK(gw_session_mark_dirty(src, GPA_BASE + 4096, 0) == 0, "len 0 inside");
	TEST_CHECK(gw_session_mark_dirty(src, end, 1) == -EINVAL, "just past the end");
	TEST_CHECK(gw_session_mark_dirty(src, GPA_BASE - 1, 2) == -EINVAL, "just before the base");
	TEST_CHECK(gw_session_mark_dirty(src, 0, 1) == -EINVAL, "below the block");
	TEST_CHECK(gw_session_mark_dirty(src, end - 1, 2) == -EINVAL, "across the end");
	TEST_CHECK(gw_session_mark_dirty(src, GPA_BASE, UINT64_MAX) == -EINVAL, "a length that wraps");
	TEST_CHECK(gw_session_mark_dirty(src, UINT64_MAX, 2) == -EINVAL, "a range that wraps");
	TEST_CHECK(gw_session_mark_dirty(dst, GPA_BASE, 1) == -EINVAL, "destination");
	TEST_CHECK(gw_session_mark_dirty(NULL, GPA_BASE, 1) == -EINVAL, "NULL session");
	gw_session_free(src);
	gw_session_free(dst);
	test_ram_destroy(&ram);
}

int main(int argc, char **argv)
{
	static const struct config cfs[] = {
		{ "second mapping, reported", DEV_SECOND_MAPPING, true, false, true, 0 },
		{ "second mapping, not reported", DEV_SECOND_MAPPING, false, false, false, 0 },
		{ "syscall, not reported (uffd-wp sees it)", DEV_SYSCALL, false, false, true, 0 },
		{ "syscall, reported", DEV_SYSCALL, true, false, true, 0 },
		{ "postcopy second mapping, reported", DEV_SECOND_MAPPING, true, true, true, 0 },
		{ "postcopy second mapping, not reported", DEV_SECOND_MAPPING, false, true, false, 0 },
		{ "send-path live, second mapping, reported", DEV_SECOND_MAPPING, true, false, true, GW_SEND_LIVE },
	};
	char why[256];

	test_log_quiet();
	test_time_bound(120);
	api_checks();
	if (gw_dirty_probe(GW_DIRTY_UFFD_WP, NULL, why, sizeof(why)))
		test_skip("no uffd-wp tracking here: %s", why);
	for (unsigned i = 0; i < sizeof(cfs) / sizeof(cfs[0]); i++) {
		if (argc > 1 && !strstr(cfs[i].name, argv[1]))
			continue;
		if (cfs[i].postcopy && gw_uffd_post_probe(why, sizeof(why))) {
			printf("%-40s skipped: %s\n", cfs[i].name, why);
			continue;
		}
		run(&cfs[i]);
	}
	TEST_EXIT();
}
