/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a migration between a source and a destination session in one
 * process, while a guest thread keeps rewriting pages, completes with
 * destination RAM byte-equal to source RAM at pause (the migration oracle:
 * every page holds what the guest last wrote before pause), the digest
 * verified on both sides, the state section delivered intact, the source
 * paused once and never resumed, the destination resumed once. This holds
 * over unix: and tcp:, 1 and 4 channels, codecs none/zstd/lz4 and XBZRLE
 * on/off; and when the same 32 pages are rewritten continuously across many
 * rounds on 4 channels with 16-page batches (a page's copies must land in
 * order). A cancelled migration leaves the source cancelled with its guest
 * running (pause and resume balanced) and the destination failed, never
 * resumed. The same holds on every send path (pages sent straight from the
 * guest memory the guest keeps writing, with PAGES_VOID for those written
 * during their send; a stable copy first; MSG_ZEROCOPY with its
 * completions), into a destination whose RAM is mapped (received through
 * the mapping) or not (pwrite), and over 1, 2, 4 and 8 channels. With
 * "cancel-stress": cancels at seeded points from set-up to the handover,
 * each one leaving exactly one side running the VM. Over TLS (PSK) the
 * same holds with every connection through TLS, MSG_ZEROCOPY replaced by
 * copying sends (no zero-copy send) and live sends and receives into the
 * mapping working through the TLS records.
 *
 * RAM: 64 MiB memfd each side; source pages are a deterministic mix of data,
 * explicit zero pages and never-touched pages. Dirty tracking is whatever
 * gw_dirty_select picks (uffd-wp here): skipped when none is usable.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "mem/dirty.h"
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (64u << 20)
#define RAM_PAGES (RAM_BYTES / TEST_PAGE_BYTES)

/* The guest: one thread rewriting pages of the source RAM. */
struct guest {
	uint8_t *host;			/* set before start */
	const uint32_t *set;		/* pages to rewrite, set before start */
	unsigned set_len;
	unsigned spin;			/* busy iterations between writes */
	unsigned nap_every;		/* sleep 100 us every this many writes, 0 = never */
	pthread_t thr;
	struct test_park park;
	uint64_t writes;		/* atomic: completed page writes */
	/*
	 * Cancel runs: the switchover's pause waits in the hook until the
	 * test's cancel is in (atomics), so the migration cannot complete
	 * before it, however fast it runs.
	 */
	int hold_pause;			/* set before start */
	int pause_reached, cancelled;
};

static void *guest_main(void *arg)
{
	struct guest *g = arg;
	uint64_t gen = 0;
	unsigned i = 0;

	while (test_park_point(&g->park)) {
		uint32_t page = g->set[i++ % g->set_len];
		volatile uint64_t *p = (volatile uint64_t *)(g->host + (uint64_t)page * TEST_PAGE_BYTES);

		gen++;
		/* Generation number spread over the page, with the page index. */
		for (unsigned k = 0; k < TEST_PAGE_BYTES / 8; k += 61)
			p[k] = gen << 20 | page;
		p[TEST_PAGE_BYTES / 8 - 1] = gen;
		__atomic_fetch_add(&g->writes, 1, __ATOMIC_RELEASE);
		for (volatile unsigned s = 0; s < g->spin; s++)
			;
		/* Leave the engine some CPU on a 2-core machine. */
		if (g->nap_every && (i % g->nap_every) == 0)
			usleep(100);
	}
	return NULL;
}

/* Pause: returns once the guest is parked between two page writes. */
static void guest_pause(void *arg)
{
	struct guest *g = arg;

	if (__atomic_load_n(&g->hold_pause, __ATOMIC_ACQUIRE)) {
		__atomic_store_n(&g->pause_reached, 1, __ATOMIC_RELEASE);
		while (!__atomic_load_n(&g->cancelled, __ATOMIC_ACQUIRE))
			usleep(1000);
	}
	test_park_pause(&g->park);
}

static void guest_resume(void *arg)
{
	test_park_resume(&((struct guest *)arg)->park);
}

static void guest_start(struct guest *g)
{
	TEST_ASSERT(pthread_create(&g->thr, NULL, guest_main, g) == 0, "guest thread");
}

static void guest_stop(struct guest *g)
{
	test_park_quit(&g->park);
	pthread_join(g->thr, NULL);
}

static uint64_t guest_writes(struct guest *g)
{
	return __atomic_load_n(&g->writes, __ATOMIC_ACQUIRE);
}

/* Source content: data (compressible halves), explicit zeros, holes. */
static void fill_ram(uint8_t *host)
{
	for (uint32_t p = 0; p < RAM_PAGES; p++) {
		uint8_t *q = host + (uint64_t)p * TEST_PAGE_BYTES;

		if (p % 5 == 1)
			continue;		/* never touched */
		if (p % 7 == 0) {
			q[0] = 0;		/* touched, zero */
			continue;
		}
		for (unsigned i = 0; i < 1024; i += 4) {
			uint32_t v = p * 2654435761u + i * 40503u;

			memcpy(q + i, &v, 4);
		}
		memset(q + 1024, (int)(p & 0xff), TEST_PAGE_BYTES - 1024);
	}
}

struct config {
	const char *transport;		/* "unix" or "tcp" */
	int channels;
	enum gw_codec_id codec;
	int64_t xbzrle_bytes;
	int batch_pages;		/* 0 = default */
	int64_t downtime_limit_us;	/* 0 = default */
	int64_t converge_timeout_ms;	/* with policy force */
	int64_t max_bandwidth_bps;
	bool cancel;
	int send_path;			/* enum gw_send_path */
	bool dst_mapped;		/* destination RAM preallocated through its mapping */
	unsigned cancel_after_us;	/* cancel stress: cancel at this point, whatever the status */
	bool tls_psk;			/* every connection through TLS with a pre-shared key */
};

/* A keys.psk for this process (0600), its path in @path. */
static void write_psk(char *path, size_t len)
{
	FILE *f;

	snprintf(path, len, "/tmp/gw-loopback-%d.psk", (int)getpid());
	f = fopen(path, "w");
	TEST_ASSERT(f, "create %s", path);
	fchmod(fileno(f), 0600);
	fprintf(f, "lb:00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n");
	TEST_ASSERT(fclose(f) == 0, "write %s", path);
}

struct run {
	struct test_ram sram, dram;
	struct test_vm svm, dvm;
	struct guest g;
	struct gw_session *src, *dst;
	uint32_t set[256];
};

static void set_param(struct gw_session *s, enum gw_param p, int64_t v)
{
	int ret = gw_session_set(s, p, v);

	TEST_ASSERT(ret == 0, "set %s = %lld: %d", gw_param_info(p)->name, (long long)v, ret);
}

static void run_migration(const char *name, const struct config *cf, const uint32_t *set,
			  unsigned set_len, unsigned spin, unsigned nap_every)
{
	struct run *r = calloc(1, sizeof(*r));
	struct gw_vm_info svm_info, dvm_info;
	struct gw_stats ss = { .size = sizeof(ss) }, ds = { .size = sizeof(ds) };
	char url[200];
	int sret, dret;
	uint64_t t0 = gw_now_ns();

	TEST_ASSERT(r, "calloc");
	TEST_ASSERT(test_ram_create(&r->sram, "lb-src", RAM_BYTES, 0) == 0, "source RAM");
	TEST_ASSERT(test_ram_create(&r->dram, "lb-dst", RAM_BYTES, 0) == 0, "destination RAM");
	if (cf->dst_mapped)
		TEST_ASSERT(madvise(r->dram.host, RAM_BYTES, 23 /* MADV_POPULATE_WRITE */) == 0,
			    "prealloc destination");
	fill_ram(r->sram.host);
	test_vm_info_one(&svm_info, &r->sram, "ram0");
	test_vm_info_one(&dvm_info, &r->dram, "ram0");

	r->g.host = r->sram.host;
	r->g.set = set;
	r->g.set_len = set_len;
	r->g.spin = spin;
	r->g.nap_every = nap_every;
	r->svm.on_pause = guest_pause;
	r->svm.on_resume = guest_resume;
	r->svm.hook_arg = &r->g;
	snprintf(r->svm.sec_name, sizeof(r->svm.sec_name), "cpu0");
	for (unsigned i = 0; i < sizeof(r->svm.sec_data); i++)
		r->svm.sec_data[i] = (uint8_t)(i * 3 + 1);
	r->dvm = r->svm;
	r->dvm.on_pause = r->dvm.on_resume = NULL;
	r->dvm.load_checks_section = true;

	r->dst = gw_session_new(GW_ROLE_DEST, &dvm_info, &test_vm_ops, &r->dvm);
	r->src = gw_session_new(GW_ROLE_SOURCE, &svm_info, &test_vm_ops, &r->svm);
	TEST_ASSERT(r->dst && r->src, "sessions");
	if (cf->tls_psk) {
		char psk[64];

		write_psk(psk, sizeof(psk));
		TEST_ASSERT(gw_session_set_str(r->dst, GW_SPARAM_TLS_PSK, psk) == 0, "dst tls-psk");
		TEST_ASSERT(gw_session_set_str(r->src, GW_SPARAM_TLS_PSK, psk) == 0, "src tls-psk");
	}
	if (!strcmp(cf->transport, "unix"))
		snprintf(url, sizeof(url), "unix:/tmp/gw-loopback-%d.sock", (int)getpid());
	else
		snprintf(url, sizeof(url), "tcp:127.0.0.1:0");
	TEST_ASSERT(gw_incoming_start(r->dst, url) == 0, "incoming %s", url);
	snprintf(url, sizeof(url), "%s", gw_incoming_url(r->dst));
	TEST_ASSERT(strncmp(url, cf->transport, strlen(cf->transport)) == 0 && !strstr(url, ":0\0"),
		    "bound url %s", url);

	set_param(r->src, GW_PARAM_CHANNELS, cf->channels);
	set_param(r->src, GW_PARAM_COMPRESS, cf->codec);
	set_param(r->src, GW_PARAM_XBZRLE_CACHE_BYTES, cf->xbzrle_bytes);
	set_param(r->src, GW_PARAM_VERIFY, 1);
	if (cf->batch_pages)
		set_param(r->src, GW_PARAM_BATCH_PAGES, cf->batch_pages);
	if (cf->downtime_limit_us)
		set_param(r->src, GW_PARAM_DOWNTIME_LIMIT_US, cf->downtime_limit_us);
	if (cf->converge_timeout_ms) {
		set_param(r->src, GW_PARAM_CONVERGE_TIMEOUT_MS, cf->converge_timeout_ms);
		set_param(r->src, GW_PARAM_CONVERGE_POLICY, GW_CONVERGE_FORCE);
	}
	if (cf->max_bandwidth_bps)
		set_param(r->src, GW_PARAM_MAX_BANDWIDTH_BPS, cf->max_bandwidth_bps);
	set_param(r->src, GW_PARAM_SEND_PATH, cf->send_path);

	r->g.hold_pause = cf->cancel;
	guest_start(&r->g);
	TEST_ASSERT(gw_migrate_start(r->src, url) == 0, "migrate to %s", url);
	if (cf->tls_psk) {	/* both sides loaded their keys when they started */
		char psk[64];

		snprintf(psk, sizeof(psk), "/tmp/gw-loopback-%d.psk", (int)getpid());
		unlink(psk);
	}

	if (cf->cancel_after_us) {
		usleep(cf->cancel_after_us);
		gw_session_cancel(r->src);	/* -EALREADY past GO: then it completes */
		sret = gw_session_wait(r->src);
		dret = gw_session_wait(r->dst);
		gw_session_stats(r->src, &ss);
		gw_session_stats(r->dst, &ds);
		/* Exactly one side runs the VM: never both, never none. */
		if (ss.status == GW_STATUS_COMPLETED) {
			TEST_CHECK(dret == 0 && test_vm_load(&r->dvm.resume_calls) == 1 &&
				   test_vm_load(&r->svm.resume_calls) == 0,
				   "%s: completed but dst %d resumed %u, src resumed %u", name, dret,
				   test_vm_load(&r->dvm.resume_calls), test_vm_load(&r->svm.resume_calls));
		} else {
			TEST_CHECK(sret == -ECANCELED && ss.status == GW_STATUS_CANCELLED, "%s: source %d %s", name,
				   sret, gw_status_name(ss.status));
			TEST_CHECK(test_vm_load(&r->dvm.resume_calls) == 0, "%s: destination resumed", name);
			TEST_CHECK(test_vm_load(&r->svm.pause_calls) == test_vm_load(&r->svm.resume_calls),
				   "%s: source paused %u resumed %u", name, test_vm_load(&r->svm.pause_calls),
				   test_vm_load(&r->svm.resume_calls));
		}
		printf("%-34s cancel after %u us: %s/%s\n", name, cf->cancel_after_us, gw_status_name(ss.status),
		       gw_status_name(ds.status));
		goto out;
	}
	if (cf->cancel) {
		/*
		 * Cancel once pages flow (precopy at 8 MiB/s lasts seconds), or
		 * once the switchover waits for it in the pause hook: either way
		 * before GO, whatever this thread's or the engine's speed.
		 */
		for (;;) {
			gw_session_stats(r->src, &ss);
			if ((ss.status == GW_STATUS_ACTIVE && ss.normal_pages > 64) ||
			    __atomic_load_n(&r->g.pause_reached, __ATOMIC_ACQUIRE) || ss.status == GW_STATUS_FAILED)
				break;
			usleep(10000);
		}
		TEST_CHECK(ss.status == GW_STATUS_ACTIVE || ss.status == GW_STATUS_DEVICE,
			   "%s: source %s before cancel", name, gw_status_name(ss.status));
		TEST_CHECK(gw_session_cancel(r->src) == 0, "%s: cancel", name);
		__atomic_store_n(&r->g.cancelled, 1, __ATOMIC_RELEASE);
	}
	sret = gw_session_wait(r->src);
	dret = gw_session_wait(r->dst);
	gw_session_stats(r->src, &ss);
	gw_session_stats(r->dst, &ds);

	if (cf->cancel) {
		uint64_t w0 = guest_writes(&r->g);

		TEST_CHECK(sret == -ECANCELED, "%s: source ended %d", name, sret);
		TEST_CHECK(ss.status == GW_STATUS_CANCELLED, "%s: source %s", name, gw_status_name(ss.status));
		TEST_CHECK(dret < 0 && ds.status == GW_STATUS_FAILED, "%s: destination %d %s", name, dret,
			   gw_status_name(ds.status));
		TEST_CHECK(test_vm_load(&r->svm.pause_calls) == test_vm_load(&r->svm.resume_calls),
			   "%s: source paused %u resumed %u", name, test_vm_load(&r->svm.pause_calls),
			   test_vm_load(&r->svm.resume_calls));
		TEST_CHECK(test_vm_load(&r->dvm.resume_calls) == 0, "%s: destination resumed", name);
		/* The guest runs on the source: it keeps writing. */
		for (int i = 0; i < 400 && guest_writes(&r->g) == w0; i++)
			usleep(5000);
		TEST_CHECK(guest_writes(&r->g) > w0, "%s: guest stopped after cancel", name);
	} else {
		TEST_CHECK(sret == 0 && ss.status == GW_STATUS_COMPLETED, "%s: source %d %s: %s", name, sret,
			   gw_status_name(ss.status), ss.error);
		TEST_CHECK(dret == 0 && ds.status == GW_STATUS_COMPLETED, "%s: destination %d %s: %s", name,
			   dret, gw_status_name(ds.status), ds.error);
		TEST_CHECK(ss.verified && ds.verified, "%s: verified src %d dst %d", name, ss.verified, ds.verified);
		TEST_CHECK(test_vm_load(&r->svm.pause_calls) == 1 && test_vm_load(&r->svm.resume_calls) == 0,
			   "%s: source paused %u resumed %u", name, test_vm_load(&r->svm.pause_calls),
			   test_vm_load(&r->svm.resume_calls));
		TEST_CHECK(test_vm_load(&r->dvm.resume_calls) == 1, "%s: destination resumed %u times", name,
			   test_vm_load(&r->dvm.resume_calls));
		TEST_CHECK(r->dvm.load_saw_section, "%s: state section not delivered", name);
		/* The source RAM is mapped (filled through its mapping): sent from it when asked. */
		if (cf->send_path == GW_SEND_LIVE || cf->send_path == GW_SEND_ZEROCOPY)
			TEST_CHECK(ss.live_pages > 0, "%s: no page sent from guest memory", name);
		else
			TEST_CHECK(ss.live_pages == 0, "%s: live pages on a copy path", name);
		TEST_CHECK(!cf->dst_mapped || cf->codec != GW_CODEC_NONE || cf->xbzrle_bytes || ds.direct_pages > 0,
			   "%s: nothing received into the mapping", name);
		TEST_CHECK(cf->send_path != GW_SEND_ZEROCOPY || !strcmp(cf->transport, "unix") || cf->tls_psk ||
			   ss.zerocopy_sends > 0, "%s: no zero-copy send completed", name);
		/* TLS: every connection through it; MSG_ZEROCOPY falls back to copying sends. */
		TEST_CHECK(!cf->tls_psk || (!strcmp(ss.tls, "psk") && !strcmp(ds.tls, "psk")),
			   "%s: TLS not on both sides (src %s, dst %s)", name, ss.tls, ds.tls);
		TEST_CHECK(!cf->tls_psk || ss.zerocopy_sends == 0, "%s: %llu zero-copy sends through TLS", name,
			   (unsigned long long)ss.zerocopy_sends);
		/* The guest is parked since pause: source RAM is RAM at pause. */
		if (memcmp(r->sram.host, r->dram.host, RAM_BYTES)) {
			uint64_t bad = 0, first = UINT64_MAX;

			for (uint64_t p = 0; p < RAM_PAGES; p++)
				if (memcmp(r->sram.host + p * TEST_PAGE_BYTES, r->dram.host + p * TEST_PAGE_BYTES,
					   TEST_PAGE_BYTES)) {
					bad++;
					if (first == UINT64_MAX)
						first = p;
				}
			TEST_CHECK(0, "%s: %llu pages differ, first %llu", name, (unsigned long long)bad,
				   (unsigned long long)first);
		}
		if (cf->xbzrle_bytes && ss.rounds > 1)
			printf("  xbzrle pages %llu\n", (unsigned long long)ss.xbzrle_pages);
	}
	printf("%-34s %s/%s rounds=%u normal=%llu zero=%llu xbzrle=%llu skipped=%llu live=%llu void=%llu "
	       "direct=%llu zc=%llu/%llu wire=%llu guest_writes=%llu %.0f ms\n",
	       name, gw_status_name(ss.status), gw_status_name(ds.status), ss.rounds,
	       (unsigned long long)ss.normal_pages, (unsigned long long)ss.duplicate_pages,
	       (unsigned long long)ss.xbzrle_pages, (unsigned long long)ss.skipped_pages,
	       (unsigned long long)ss.live_pages, (unsigned long long)ss.void_pages,
	       (unsigned long long)ds.direct_pages, (unsigned long long)ss.zerocopy_copied,
	       (unsigned long long)ss.zerocopy_sends,
	       (unsigned long long)ss.transferred_bytes, (unsigned long long)guest_writes(&r->g),
	       (gw_now_ns() - t0) / 1e6);
out:
	guest_stop(&r->g);
	gw_session_free(r->src);
	gw_session_free(r->dst);
	test_ram_destroy(&r->sram);
	test_ram_destroy(&r->dram);
	free(r);
}

int main(int argc, char **argv)
{
	static const enum gw_codec_id codecs[] = { GW_CODEC_NONE, GW_CODEC_ZSTD, GW_CODEC_LZ4 };
	static uint32_t spread[256], same32[32];
	struct test_ram probe_ram;
	struct gw_vm_info vm;
	struct gw_dirty d;
	int ret;

	test_log_quiet();
	test_time_bound(240);	/* a hang guard, under meson's 300 s: a release run took 77 s beside a CPU hog */
	TEST_ASSERT(test_ram_create(&probe_ram, "probe", 1 << 20, 0) == 0, "probe RAM");
	test_vm_info_one(&vm, &probe_ram, "ram0");
	ret = gw_dirty_select(&d, &vm, GW_DIRTY_AUTO);
	test_ram_destroy(&probe_ram);
	if (ret)
		test_skip("no dirty-tracking backend usable here: %s", strerror(-ret));

	/* Pages the guest rewrites: spread over RAM, holes and zero pages included. */
	for (unsigned i = 0; i < 256; i++)
		spread[i] = (i * 61 + 3) % RAM_PAGES;
	/* The ordering set: one page in each of 32 consecutive 16-page regions. */
	for (unsigned i = 0; i < 32; i++)
		same32[i] = i * 16 + (i % 3) * 5;

	for (int t = 0; t < 2 && !(argc > 1 && !strcmp(argv[1], "cancel-stress")); t++) {
		const char *tr = t ? "tcp" : "unix";

		for (int ch = 1; ch <= 4; ch += 3)
			for (unsigned c = 0; c < 3; c++)
				for (int xb = 0; xb < 2; xb++) {
					struct config cf = { .transport = tr, .channels = ch, .codec = codecs[c],
							     .xbzrle_bytes = xb ? 16 << 20 : 0 };
					char name[80];

					/* tcp: a subset (the transport is what differs). */
					if (t && !((ch == 1 && c == 0 && !xb) || (ch == 4 && c == 1 && xb) ||
						   (ch == 4 && c == 2 && !xb)))
						continue;
					snprintf(name, sizeof(name), "%s ch=%d %s xbzrle=%s", tr, ch,
						 gw_codec_name(codecs[c]), xb ? "on" : "off");
					if (argc > 1 && !strstr(name, argv[1]))
						continue;
					run_migration(name, &cf, spread, 256, 2000, 16);
				}
	}
	if (argc <= 1 || strstr("paths", argv[1])) {
		/* Send and receive paths, and channel counts, with the guest writing hard. */
		static const struct { const char *name; struct config cf; } paths[] = {
			{ "paths tcp ch=1 live dst-mapped", { "tcp", 1, GW_CODEC_NONE, .send_path = GW_SEND_LIVE,
							      .dst_mapped = true } },
			{ "paths unix ch=1 pread", { "unix", 1, GW_CODEC_NONE, .send_path = GW_SEND_PREAD } },
			{ "paths tcp ch=2 copy dst-mapped", { "tcp", 2, GW_CODEC_NONE, .send_path = GW_SEND_COPY,
							      .dst_mapped = true } },
			{ "paths tcp ch=2 zerocopy", { "tcp", 2, GW_CODEC_NONE, .send_path = GW_SEND_ZEROCOPY } },
			{ "paths unix ch=2 zerocopy refused", { "unix", 2, GW_CODEC_NONE,
								 .send_path = GW_SEND_ZEROCOPY } },
			{ "paths tcp ch=8 live dst-mapped", { "tcp", 8, GW_CODEC_NONE, .send_path = GW_SEND_LIVE,
							      .dst_mapped = true } },
			{ "paths unix ch=2 lz4 dst-mapped", { "unix", 2, GW_CODEC_LZ4, .dst_mapped = true } },
			{ "paths tcp ch=2 zerocopy tls", { "tcp", 2, GW_CODEC_NONE, .send_path = GW_SEND_ZEROCOPY,
							   .tls_psk = true } },
			{ "paths tcp ch=2 live dst-mapped tls", { "tcp", 2, GW_CODEC_NONE, .send_path = GW_SEND_LIVE,
								  .dst_mapped = true, .tls_psk = true } },
		};

		for (unsigned i = 0; i < sizeof(paths) / sizeof(paths[0]); i++)
			run_migration(paths[i].name, &paths[i].cf, spread, 256, 200, 64);
	}
	if (argc <= 1 || (strcmp(argv[1], "cancel-stress") && strstr("ordering", argv[1]))) {
		/* Same 32 pages rewritten continuously; rounds until forced switchover. */
		struct config cf = { .transport = "unix", .channels = 4, .codec = GW_CODEC_NONE,
				     .batch_pages = 16, .downtime_limit_us = 1000,
				     .converge_timeout_ms = 1000 };

		run_migration("ordering 32 pages ch=4 batch=16", &cf, same32, 32, 200, 0);
		cf.codec = GW_CODEC_LZ4;
		cf.xbzrle_bytes = 1 << 20;
		run_migration("ordering 32 pages ch=4 lz4 xbzrle", &cf, same32, 32, 200, 0);
	}
	if (argc <= 1 || (strcmp(argv[1], "cancel-stress") && strstr("cancel", argv[1]))) {
		struct config cf = { .transport = "unix", .channels = 2, .codec = GW_CODEC_NONE,
				     .max_bandwidth_bps = 8 << 20, .cancel = true };

		run_migration("cancel at 8 MiB/s", &cf, spread, 256, 2000, 16);
	}
	if (argc > 1 && !strcmp(argv[1], "cancel-stress")) {
		/*
		 * Cancels at seeded points from set-up to the handover (the
		 * migration lasts about 0.5-1.5 s at 64 MiB/s): whichever window a
		 * cancel lands in, exactly one side runs the VM.
		 */
		unsigned seed = getenv("GW_TEST_SEED") ? (unsigned)atoi(getenv("GW_TEST_SEED")) : (unsigned)getpid();

		printf("cancel stress seed %u (GW_TEST_SEED replays it)\n", seed);
		srand(seed);
		for (int i = 0; i < 12; i++) {
			struct config cf = { .transport = i % 2 ? "tcp" : "unix", .channels = 2,
					     .codec = i % 3 ? GW_CODEC_NONE : GW_CODEC_LZ4,
					     .max_bandwidth_bps = 64 << 20,
					     .cancel_after_us = 1 + (unsigned)(rand() % 1500000) };
			char name[48];

			snprintf(name, sizeof(name), "cancel stress %d %s", i, cf.transport);
			run_migration(name, &cf, spread, 256, 2000, 16);
		}
	}
	TEST_EXIT();
}
