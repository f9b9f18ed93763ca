/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a migration that switches to postcopy (after a precopy round,
 * or at once on gw_session_start_postcopy) while the source guest rewrites a
 * hot set completes; the destination guest, started at resume, reads every
 * page through the mapping and writes a marker into some: each read returns
 * exactly the source's page at the pause (a page missing at resume makes the
 * reader wait for it; a stale one is never seen), and at the end
 * destination RAM equals the source's frozen RAM plus the markers (a late
 * copy never overwrote a page the destination guest wrote). The source is
 * paused once and never resumed; the destination resumed once, told
 * postcopy_ram(false) before and postcopy_ram(true) after; the postcopy
 * digests match (memfd RAM) or are reported unavailable (anonymous RAM);
 * guard pages stay intact. Over unix: with 1 channel and tcp: with 3
 * channels and lz4. With certificates made at test time (argv[1] is
 * tests/tls/gen-certs.sh), the same over mutual TLS (x509 over tcp, PSK
 * over unix): every connection of postcopy (control, data, preempt) goes
 * through TLS and both sides report the session.
 *
 * A cancel before the switch (postcopy enabled) leaves the source running:
 * failed/cancelled, resumed, the destination never resumed.
 */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "mem/uffd_post.h"
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (32u << 20)
#define RAM_PAGES (RAM_BYTES / TEST_PAGE_BYTES)
#define GUARD_BYTES (1u << 20)
#define HOT_FIRST 1000u			/* the source guest rewrites pages [HOT_FIRST, HOT_END) */
#define HOT_END 3000u
#define MARK_EVERY 7u			/* the destination guest marks every 7th page */

/* ---- the source guest: rewrites the hot set until paused ---- */

struct src_guest {
	uint8_t *host;
	pthread_t thr;
	int want_pause, parked, quit;	/* atomics */
	uint64_t gen;
	/*
	 * The cancel case: a pause (a switchover) waits in the hook until the
	 * test's cancel is in (atomics), so the migration cannot get past GO
	 * before it, however fast it runs.
	 */
	int hold_pause;			/* set before start */
	int pause_reached, cancelled;
};

static void *src_guest_main(void *arg)
{
	struct src_guest *g = arg;

	while (!__atomic_load_n(&g->quit, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(&g->want_pause, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&g->parked, 1, __ATOMIC_RELEASE);
			while (__atomic_load_n(&g->want_pause, __ATOMIC_ACQUIRE) &&
			       !__atomic_load_n(&g->quit, __ATOMIC_ACQUIRE))
				usleep(50);
			__atomic_store_n(&g->parked, 0, __ATOMIC_RELEASE);
			continue;
		}
		g->gen++;
		for (uint32_t p = HOT_FIRST; p < HOT_END && !__atomic_load_n(&g->want_pause, __ATOMIC_ACQUIRE); p++) {
			uint64_t *q = (uint64_t *)(g->host + (uint64_t)p * TEST_PAGE_BYTES);

			q[p % 500] = g->gen << 32 | p;
		}
		usleep(200);	/* leave the engine some CPU on 2 cores */
	}
	return NULL;
}

static void src_guest_pause(void *arg)
{
	struct src_guest *g = arg;

	if (__atomic_load_n(&g->hold_pause, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&g->pause_reached, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&g->cancelled, __ATOMIC_ACQUIRE))
			usleep(1000);
	}
	__atomic_store_n(&g->want_pause, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&g->parked, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void src_guest_resume(void *arg)
{
	__atomic_store_n(&((struct src_guest *)arg)->want_pause, 0, __ATOMIC_RELEASE);
}

/* ---- the destination guest: started by resume, reads every page, marks some ---- */

struct dst_guest {
	uint8_t *host;
	const uint8_t *expect;		/* the source's RAM, frozen once the source paused */
	pthread_t thr;
	bool started;
	pid_t tid;			/* atomic */
	uint64_t bad_pages;		/* pages that read differently from the source */
	uint64_t first_bad;
	int expect_ready;		/* atomic: the test copied the frozen source RAM */
	int done;			/* atomic */
	int nice;			/* postcopy-background-nice of both sides, 0 = off */
	unsigned niced_threads;		/* threads of this process at that nice, at the resume */
};

static void *dst_guest_main(void *arg)
{
	struct dst_guest *g = arg;

	__atomic_store_n(&g->tid, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	while (!__atomic_load_n(&g->expect_ready, __ATOMIC_ACQUIRE))
		usleep(100);
	/* The hot set first (missing pages: requests), then everything. */
	for (uint32_t k = 0; k < RAM_PAGES + (HOT_END - HOT_FIRST); k++) {
		uint32_t p = k < HOT_END - HOT_FIRST ? HOT_FIRST + k : k - (HOT_END - HOT_FIRST);
		uint8_t *q = g->host + (uint64_t)p * TEST_PAGE_BYTES;
		const uint8_t *e = g->expect + (uint64_t)p * TEST_PAGE_BYTES;

		if (k >= HOT_END - HOT_FIRST && p >= HOT_FIRST && p < HOT_END)
			continue;	/* done in the first pass */
		if (memcmp(q, e, TEST_PAGE_BYTES - 8) || (p % MARK_EVERY && memcmp(q + TEST_PAGE_BYTES - 8,
								  e + TEST_PAGE_BYTES - 8, 8))) {
			if (!g->bad_pages++)
				g->first_bad = p;
		}
		if (p % MARK_EVERY == 0)
			memcpy(q + TEST_PAGE_BYTES - 8, "MARKMARK", 8);
	}
	__atomic_store_n(&g->done, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* Threads of this process whose nice value is @nice (/proc/self/task/TID/stat, field 19). */
static unsigned threads_at_nice(int nice)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	unsigned n = 0;

	while (d && (e = readdir(d))) {
		char path[300], buf[512], *p;
		FILE *f;
		int field = 0, v;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/stat", e->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		p = fgets(buf, sizeof(buf), f) ? strrchr(buf, ')') : NULL;	/* after the name */
		fclose(f);
		for (field = 2; p && *p && field < 19; p++)
			if (*p == ' ')
				field++;
		if (p && sscanf(p, "%d", &v) == 1 && v == nice)
			n++;
	}
	if (d)
		closedir(d);
	return n;
}

static void dst_guest_resume(void *arg)
{
	struct dst_guest *g = arg;

	/* The destination's postcopy receivers run from PC_PREPARE, before this resume. */
	if (g->nice)
		g->niced_threads = threads_at_nice(g->nice);
	if (!g->started)
		g->started = pthread_create(&g->thr, NULL, dst_guest_main, g) == 0;
}

static int dst_vcpu_of(void *arg, pid_t tid)
{
	struct dst_guest *g = arg;

	return tid && tid == __atomic_load_n(&g->tid, __ATOMIC_ACQUIRE) ? 0 : -1;
}

/* ---- RAM ---- */

/* Data in most pages, some explicit zeros, some holes. */
static void fill(uint8_t *host)
{
	for (uint32_t p = 0; p < RAM_PAGES; p++) {
		uint8_t *q = host + (uint64_t)p * TEST_PAGE_BYTES;

		if (p % 11 == 3)
			continue;
		if (p % 13 == 0) {
			q[0] = 0;
			continue;
		}
		for (unsigned i = 0; i < TEST_PAGE_BYTES; i += 8) {
			uint64_t v = (uint64_t)p * 0x9e3779b97f4a7c15ull + i;

			memcpy(q + i, &v, 8);
		}
	}
}

struct config {
	const char *name;
	const char *transport;
	int channels;
	enum gw_codec_id codec;
	bool anon_dst;			/* destination RAM anonymous (no digest under postcopy) */
	bool start_now;			/* gw_session_start_postcopy as round 0 starts */
	const char *tls;		/* NULL plain; "x509" or "psk" (certificates in certs) */
	int background_nice;		/* postcopy-background-nice on both sides */
};

static char certs[256];			/* made by gen-certs.sh when TLS cases run */

/* Both sessions use the test credentials of @cf (the names gen-certs.sh makes). */
static void set_tls(const struct config *cf, struct gw_session *src, struct gw_session *dst)
{
	char path[512];

	if (!cf->tls)
		return;
	if (!strcmp(cf->tls, "psk")) {
		snprintf(path, sizeof(path), "%s/keys.psk", certs);
		TEST_ASSERT(gw_session_set_str(dst, GW_SPARAM_TLS_PSK, path) == 0, "dst tls-psk");
		TEST_ASSERT(gw_session_set_str(src, GW_SPARAM_TLS_PSK, path) == 0, "src tls-psk");
		return;
	}
	snprintf(path, sizeof(path), "%s/dst-ok", certs);
	TEST_ASSERT(gw_session_set_str(dst, GW_SPARAM_TLS_CREDS, path) == 0, "dst tls-creds");
	snprintf(path, sizeof(path), "%s/src-ok", certs);
	TEST_ASSERT(gw_session_set_str(src, GW_SPARAM_TLS_CREDS, path) == 0, "src tls-creds");
	if (!strcmp(cf->transport, "unix"))
		TEST_ASSERT(gw_session_set_str(src, GW_SPARAM_TLS_HOSTNAME, "dst.test") == 0, "tls-hostname");
}

static void set_param(struct gw_session *s, enum gw_param p, int64_t v)
{
	TEST_ASSERT(gw_session_set(s, p, v) == 0, "set %s", gw_param_info(p)->name);
}

static enum gw_status status_of(struct gw_session *s)
{
	struct gw_stats st = { .size = sizeof(st) };

	gw_session_stats(s, &st);
	return st.status;
}

/*
 * start_now: asked from the source's event callback as round 0 starts, on
 * the migration thread, so the request is in before precopy could end,
 * whatever the speed (asked once the test saw "active", a fast precopy
 * could converge first).
 */
struct start_now {
	struct gw_session *src;
	bool asked;
	int first, second;		/* what the two requests returned */
};

static void start_now_event(void *opaque, const struct gw_event *ev)
{
	struct start_now *sn = opaque;

	if (ev->type != GW_EVENT_ROUND || ev->round != 0 || sn->asked)
		return;
	sn->asked = true;
	sn->first = gw_session_start_postcopy(sn->src);
	sn->second = gw_session_start_postcopy(sn->src);
}

static void run(const struct config *cf)
{
	struct test_ram sram, dram;
	struct test_vm svm = { 0 }, dvm = { 0 };
	struct src_guest sg = { 0 };
	struct dst_guest dg = { 0 };
	struct gw_vm_info si, di;
	struct gw_session *src, *dst;
	struct gw_stats ss = { .size = sizeof(ss) }, ds = { .size = sizeof(ds) };
	uint8_t *anon = NULL, *frozen;
	struct start_now sn = { 0 };
	char url[200];
	int sret, dret;

	TEST_ASSERT(test_ram_create(&sram, "pc-src", RAM_BYTES, GUARD_BYTES) == 0, "source RAM");
	TEST_ASSERT(test_ram_create(&dram, "pc-dst", RAM_BYTES, GUARD_BYTES) == 0, "destination RAM");
	fill(sram.host);
	test_vm_info_one(&si, &sram, "ram0");
	test_vm_info_one(&di, &dram, "ram0");
	if (cf->anon_dst) {
		anon = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		TEST_ASSERT(anon != MAP_FAILED, "anonymous RAM");
		di.blocks[0].host = anon;
		di.blocks[0].fd = -1;
	}
	frozen = malloc(RAM_BYTES);
	TEST_ASSERT(frozen, "malloc");

	sg.host = sram.host;
	svm.on_pause = src_guest_pause;
	svm.on_resume = src_guest_resume;
	svm.hook_arg = &sg;
	dg.host = di.blocks[0].host;
	dg.nice = cf->background_nice;
	dg.expect = frozen;
	dvm.on_resume = dst_guest_resume;
	dvm.on_vcpu_of_thread = dst_vcpu_of;
	dvm.hook_arg = &dg;

	dst = gw_session_new(GW_ROLE_DEST, &di, &test_vm_ops, &dvm);
	src = gw_session_new(GW_ROLE_SOURCE, &si, &test_vm_ops, &svm);
	TEST_ASSERT(src && dst, "sessions");
	if (!strcmp(cf->transport, "unix"))
		snprintf(url, sizeof(url), "unix:/tmp/gw-postcopy-%d.sock", (int)getpid());
	else
		snprintf(url, sizeof(url), "tcp:127.0.0.1:0");
	set_tls(cf, src, dst);
	set_param(dst, GW_PARAM_POSTCOPY_BACKGROUND_NICE, cf->background_nice);	/* setup: before incoming */
	TEST_ASSERT(gw_incoming_start(dst, url) == 0, "incoming");
	set_param(src, GW_PARAM_POSTCOPY, 1);
	set_param(src, GW_PARAM_CHANNELS, cf->channels);
	set_param(src, GW_PARAM_COMPRESS, cf->codec);
	set_param(src, GW_PARAM_DOWNTIME_LIMIT_US, 1000);
	set_param(src, GW_PARAM_BATCH_PAGES, 64);
	set_param(src, GW_PARAM_MAX_BANDWIDTH_BPS, 64ll << 20);	/* postcopy lasts a while */
	set_param(src, GW_PARAM_POSTCOPY_BACKGROUND_NICE, cf->background_nice);
	if (!cf->start_now)
		set_param(src, GW_PARAM_POSTCOPY_AFTER_ROUNDS, 1);
	sn.src = src;
	if (cf->start_now)
		TEST_ASSERT(gw_session_set_event_fn(src, start_now_event, &sn) == 0, "event callback");
	TEST_ASSERT(pthread_create(&sg.thr, NULL, src_guest_main, &sg) == 0, "source guest");
	TEST_ASSERT(gw_migrate_start(src, gw_incoming_url(dst)) == 0, "migrate");
	/* Once the source paused its RAM is frozen: the destination guest checks against it. */
	while (!__atomic_load_n(&sg.parked, __ATOMIC_ACQUIRE)) {
		gw_session_stats(src, &ss);
		if (ss.status == GW_STATUS_FAILED)
			break;
		usleep(100);
	}
	memcpy(frozen, sram.host, RAM_BYTES);
	__atomic_store_n(&dg.expect_ready, 1, __ATOMIC_RELEASE);
	sret = gw_session_wait(src);
	dret = gw_session_wait(dst);
	gw_session_stats(src, &ss);
	gw_session_stats(dst, &ds);
	if (cf->start_now) {
		TEST_CHECK(sn.asked && sn.first == 0, "%s: start postcopy (%d)", cf->name, sn.first);
		TEST_CHECK(sn.second == -EALREADY, "%s: asked twice (%d)", cf->name, sn.second);
	}
	TEST_CHECK(sret == 0 && dret == 0, "%s: completed (src %d %s, dst %d %s)", cf->name, sret, ss.error, dret,
		   ds.error);
	TEST_CHECK(ss.postcopy && ds.postcopy, "%s: switched to postcopy", cf->name);
	if (cf->tls)
		TEST_CHECK(!strcmp(ss.tls, cf->tls) && !strcmp(ds.tls, cf->tls), "%s: TLS on both sides (src '%s' dst '%s')",
			   cf->name, ss.tls, ds.tls);
	TEST_CHECK(ss.postcopy_pages > 0 && ss.postcopy_pages == ds.postcopy_pages, "%s: %llu pages after the switch",
		   cf->name, (unsigned long long)ss.postcopy_pages);
	TEST_CHECK(ds.postcopy_remaining_pages == 0, "%s: nothing missing", cf->name);
	TEST_CHECK(ds.postcopy_placed_pushed + ds.postcopy_placed_requested == ds.postcopy_pages,
		   "%s: every page placed once (%llu pushed + %llu requested of %llu)", cf->name,
		   (unsigned long long)ds.postcopy_placed_pushed, (unsigned long long)ds.postcopy_placed_requested,
		   (unsigned long long)ds.postcopy_pages);
	TEST_CHECK(test_vm_load(&svm.pause_calls) == 1 && test_vm_load(&svm.resume_calls) == 0,
		   "%s: source paused once, never resumed", cf->name);
	TEST_CHECK(test_vm_load(&dvm.resume_calls) == 1, "%s: destination resumed once", cf->name);
	TEST_CHECK(test_vm_load(&dvm.postcopy_ram_calls[0]) == 1 && test_vm_load(&dvm.postcopy_ram_calls[1]) == 1,
		   "%s: postcopy_ram(false) then (true)", cf->name);
	if (cf->background_nice)
		TEST_CHECK(dg.niced_threads >= (unsigned)cf->channels, "%s: %u threads at nice %d at the resume, "
			   "want the %d data receivers", cf->name, dg.niced_threads, cf->background_nice, cf->channels);
	if (cf->anon_dst)
		TEST_CHECK(ss.verify == GW_VERIFY_UNKNOWN, "%s: anonymous RAM: digest unavailable, got %s", cf->name,
			   gw_verify_name(ss.verify));
	else
		TEST_CHECK(ss.verify == GW_VERIFY_OK && ds.verify == GW_VERIFY_OK, "%s: digests equal (src %s dst %s)",
			   cf->name, gw_verify_name(ss.verify), gw_verify_name(ds.verify));
	if (dg.started)
		pthread_join(dg.thr, NULL);
	TEST_CHECK(dg.started && dg.done, "%s: destination guest ran", cf->name);
	TEST_CHECK(!dg.bad_pages, "%s: %llu pages read wrong by the destination guest, first %llu", cf->name,
		   (unsigned long long)dg.bad_pages, (unsigned long long)dg.first_bad);
	for (uint32_t p = 0; p < RAM_PAGES; p++) {
		const uint8_t *d = dg.host + (uint64_t)p * TEST_PAGE_BYTES, *e = frozen + (uint64_t)p * TEST_PAGE_BYTES;
		bool ok = !memcmp(d, e, TEST_PAGE_BYTES - 8) &&
			  !memcmp(d + TEST_PAGE_BYTES - 8, p % MARK_EVERY ? e + TEST_PAGE_BYTES - 8 : (const uint8_t *)"MARKMARK", 8);

		if (!ok) {
			TEST_CHECK(ok, "%s: page %u differs at the end", cf->name, p);
			break;
		}
	}
	TEST_CHECK(test_ram_guards_intact(&sram) && test_ram_guards_intact(&dram), "%s: guards intact", cf->name);
	__atomic_store_n(&sg.quit, 1, __ATOMIC_RELEASE);
	pthread_join(sg.thr, NULL);
	gw_session_free(src);
	gw_session_free(dst);
	test_ram_destroy(&sram);
	test_ram_destroy(&dram);
	if (anon)
		munmap(anon, RAM_BYTES);
	free(frozen);
}

/* Cancel before the switch: the source keeps running its VM. */
static void cancel_before_switch(void)
{
	struct test_ram sram, dram;
	struct test_vm svm = { 0 }, dvm = { 0 };
	struct src_guest sg = { 0 };
	struct gw_vm_info si, di;
	struct gw_session *src, *dst;
	struct gw_stats ss = { .size = sizeof(ss) }, ds = { .size = sizeof(ds) };

	TEST_ASSERT(test_ram_create(&sram, "pc-src", RAM_BYTES, 0) == 0, "source RAM");
	TEST_ASSERT(test_ram_create(&dram, "pc-dst", RAM_BYTES, 0) == 0, "destination RAM");
	fill(sram.host);
	test_vm_info_one(&si, &sram, "ram0");
	test_vm_info_one(&di, &dram, "ram0");
	sg.host = sram.host;
	svm.on_pause = src_guest_pause;
	svm.on_resume = src_guest_resume;
	svm.hook_arg = &sg;
	dst = gw_session_new(GW_ROLE_DEST, &di, &test_vm_ops, &dvm);
	src = gw_session_new(GW_ROLE_SOURCE, &si, &test_vm_ops, &svm);
	TEST_ASSERT(src && dst, "sessions");
	TEST_ASSERT(gw_incoming_start(dst, "tcp:127.0.0.1:0") == 0, "incoming");
	set_param(src, GW_PARAM_POSTCOPY, 1);
	set_param(src, GW_PARAM_DOWNTIME_LIMIT_US, 1000);
	set_param(src, GW_PARAM_MAX_BANDWIDTH_BPS, 8ll << 20);	/* round 0 takes seconds */
	sg.hold_pause = 1;	/* no switchover gets past its pause before the cancel */
	TEST_ASSERT(pthread_create(&sg.thr, NULL, src_guest_main, &sg) == 0, "source guest");
	TEST_ASSERT(gw_migrate_start(src, gw_incoming_url(dst)) == 0, "migrate");
	/* Active, or a switchover waiting in the pause hook for the cancel: both before GO. */
	for (;;) {
		enum gw_status st = status_of(src);

		if (st == GW_STATUS_ACTIVE || st == GW_STATUS_FAILED || __atomic_load_n(&sg.pause_reached, __ATOMIC_ACQUIRE))
			break;
		usleep(10000);
	}
	TEST_CHECK(gw_session_cancel(src) == 0, "cancel before the switch accepted");
	__atomic_store_n(&sg.cancelled, 1, __ATOMIC_RELEASE);
	gw_session_wait(src);
	gw_session_wait(dst);
	gw_session_stats(src, &ss);
	gw_session_stats(dst, &ds);
	TEST_CHECK(ss.status == GW_STATUS_CANCELLED && !ss.postcopy, "source cancelled, no switch (%s)",
		   gw_status_name(ss.status));
	TEST_CHECK(ds.status == GW_STATUS_FAILED, "destination failed");
	TEST_CHECK(test_vm_load(&dvm.resume_calls) == 0, "destination never resumed");
	TEST_CHECK(test_vm_load(&svm.pause_calls) == test_vm_load(&svm.resume_calls), "source runs");
	__atomic_store_n(&sg.quit, 1, __ATOMIC_RELEASE);
	pthread_join(sg.thr, NULL);
	gw_session_free(src);
	gw_session_free(dst);
	test_ram_destroy(&sram);
	test_ram_destroy(&dram);
}

int main(int argc, char **argv)
{
	static const struct config cfs[] = {
		{ "unix 1 channel", "unix", 1, GW_CODEC_NONE, false, false, NULL, 0 },
		{ "tcp 3 channels lz4", "tcp", 3, GW_CODEC_LZ4, false, false, NULL, 0 },
		{ "tcp start-postcopy", "tcp", 2, GW_CODEC_NONE, false, true, NULL, 0 },
		{ "tcp anonymous destination", "tcp", 2, GW_CODEC_NONE, true, false, NULL, 0 },
		{ "tcp 2 channels x509", "tcp", 2, GW_CODEC_NONE, false, false, "x509", 0 },
		{ "unix 1 channel psk", "unix", 1, GW_CODEC_NONE, false, true, "psk", 0 },
		{ "tcp 2 channels background nice 10", "tcp", 2, GW_CODEC_NONE, false, false, NULL, 10 },
	};
	bool tls = argc > 1 && !system("openssl version >/dev/null 2>&1");
	char why[256], cmd[600];

	test_log_quiet();
	test_time_bound(240);
	if (gw_dirty_probe(GW_DIRTY_AUTO, NULL, why, sizeof(why)))
		test_skip("no dirty tracking here: %s", why);
	if (gw_uffd_post_probe(why, sizeof(why)))
		test_skip("%s", why);
	if (tls) {
		snprintf(certs, sizeof(certs), "/tmp/gw-pc-tls.%d", (int)getpid());
		snprintf(cmd, sizeof(cmd), "%s %s >/dev/null", argv[1], certs);
		TEST_ASSERT(system(cmd) == 0, "making certificates: %s", cmd);
	} else {
		fprintf(stderr, "TLS cases skipped: %s\n", argc > 1 ? "no openssl command" : "no gen-certs.sh argument");
	}
	for (unsigned i = 0; i < sizeof(cfs) / sizeof(cfs[0]); i++)
		if (!cfs[i].tls || tls)
			run(&cfs[i]);
	cancel_before_switch();
	if (tls) {
		snprintf(cmd, sizeof(cmd), "rm -rf %s", certs);
		if (system(cmd))
			fprintf(stderr, "cannot remove %s\n", certs);
	}
	TEST_EXIT();
}
