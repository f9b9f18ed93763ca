/* SPDX-License-Identifier: MIT */
/*
 * Invariant: during postcopy, a link cut at any point (every connection at
 * once, or only one of them; seeded, the seed printed) pauses both sides
 * (postcopy-paused; the destination guest keeps running where it does not
 * fault), and a recovery (the destination listens again, the source
 * reconnects with the migration id) completes the migration with no page
 * lost or placed twice: destination RAM equals the source's frozen RAM plus
 * what the destination guest wrote, the postcopy digests match, every
 * untrusted page was placed exactly once (pushed + requested = pages).
 * A stranger presenting another migration id to the recovery listener is
 * refused (ERROR DENIED) and the destination keeps waiting for the source.
 *
 * The cut goes through a TCP relay between the two sessions (relay.h): both
 * ends see a reset, as with a broken link. The relay places it itself, in
 * the postcopy stream: inside the PAGES frame that would bring the pages
 * gone through to the seeded share of the postcopy set (relay_cut_at). So
 * the cut always comes after the switch and before postcopy can complete,
 * whatever the speed of the machine or of this thread (a cut placed by
 * polling the destination's progress missed a fast finish). The bandwidth
 * cap only spreads postcopy out, so that the destination guest's requests
 * and the pushes are both in flight at the cut.
 * GW_TEST_SEED=N runs one seed; GW_TEST_RUNS=N sets the number of runs.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "mem/uffd_post.h"
#include "net/io.h"
#include "relay.h"
#include "test_util.h"
#include "test_vm.h"
#include "wire/msg.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (16u << 20)
#define RAM_PAGES (RAM_BYTES / TEST_PAGE_BYTES)
#define HOT_PAGES 2048u			/* 8 MiB rewritten: at least that much after the switch */
#define DATA_PAGES 3072u		/* 12 MiB of data, the rest holes */
#define CAP_BPS (8ll << 20)		/* 8 MiB/s: postcopy of the hot set lasts about 1 s */
#define MAX_DELAY_MS 700u		/* seeds the cut's share (kept: a seed names the same run as before) */
/*
 * Only bounds a broken run: every cut is a reset both ends see at once, so
 * no step waits for it. At 3 s, runs under TSan on a loaded 2-core host
 * failed in precopy ("the destination sent nothing within io-timeout-ms" on a data channel).
 */
#define IO_TIMEOUT_MS 30000

static uint64_t rng;
static uint32_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(z ^ (z >> 31));
}

/* The source guest rewrites the hot set until paused. */
struct src_guest {
	uint8_t *host;
	pthread_t thr;
	int want_pause, parked, quit;	/* atomics */
};

static void *src_guest_main(void *arg)
{
	struct src_guest *g = arg;
	uint64_t gen = 0;

	while (!__atomic_load_n(&g->quit, __ATOMIC_ACQUIRE)) {
		if (__atomic_load_n(&g->want_pause, __ATOMIC_ACQUIRE)) {
			__atomic_store_n(&g->parked, 1, __ATOMIC_RELEASE);
			while (__atomic_load_n(&g->want_pause, __ATOMIC_ACQUIRE) &&
			       !__atomic_load_n(&g->quit, __ATOMIC_ACQUIRE))
				usleep(50);
			__atomic_store_n(&g->parked, 0, __ATOMIC_RELEASE);
			continue;
		}
		gen++;
		for (uint32_t p = 0; p < HOT_PAGES && !__atomic_load_n(&g->want_pause, __ATOMIC_ACQUIRE); p++)
			((uint64_t *)(g->host + (uint64_t)p * TEST_PAGE_BYTES))[p % 512] = gen << 32 | p;
		usleep(500);
	}
	return NULL;
}

static void src_guest_pause(void *arg)
{
	struct src_guest *g = arg;

	__atomic_store_n(&g->want_pause, 1, __ATOMIC_RELEASE);
	while (!__atomic_load_n(&g->parked, __ATOMIC_ACQUIRE))
		sched_yield();
}

static void src_guest_resume(void *arg)
{
	__atomic_store_n(&((struct src_guest *)arg)->want_pause, 0, __ATOMIC_RELEASE);
}

/*
 * The destination guest: one page every 2 ms from a seeded start, a marker
 * written into each (its faults wait across the cut and the recovery).
 */
struct dst_guest {
	uint8_t *host;
	uint32_t start;
	pthread_t thr;
	bool started;
	int quit;			/* atomic */
	uint32_t touched;		/* atomic: pages marked so far, from start */
};

static void *dst_guest_main(void *arg)
{
	struct dst_guest *g = arg;

	for (uint32_t k = 0; k < RAM_PAGES && !__atomic_load_n(&g->quit, __ATOMIC_ACQUIRE); k++) {
		uint32_t p = (g->start + k) % RAM_PAGES;

		memcpy(g->host + (uint64_t)p * TEST_PAGE_BYTES + TEST_PAGE_BYTES - 8, "GUESTWR!", 8);
		__atomic_store_n(&g->touched, k + 1, __ATOMIC_RELEASE);
		usleep(2000);
	}
	return NULL;
}

static void dst_guest_resume(void *arg)
{
	struct dst_guest *g = arg;

	if (!g->started)
		g->started = pthread_create(&g->thr, NULL, dst_guest_main, g) == 0;
}

static void fill(uint8_t *host)
{
	for (uint32_t p = 0; p < RAM_PAGES; p++) {
		uint8_t *q = host + (uint64_t)p * TEST_PAGE_BYTES;

		if (p % 9 == 4 || p >= DATA_PAGES)
			continue;
		for (unsigned i = 0; i < TEST_PAGE_BYTES; i += 8) {
			uint64_t v = (uint64_t)p * 0x9e3779b97f4a7c15ull ^ i;

			memcpy(q + i, &v, 8);
		}
	}
}

static enum gw_status status_of(struct gw_session *s)
{
	struct gw_stats st = { .size = sizeof(st) };

	gw_session_stats(s, &st);
	return st.status;
}

/* Until @s reaches @want (or ends): false when it ended otherwise. */
static bool wait_for(struct gw_session *s, enum gw_status want, unsigned seconds)
{
	for (unsigned i = 0; i < seconds * 200; i++) {
		enum gw_status st = status_of(s);

		if (st == want)
			return true;
		if (st == GW_STATUS_FAILED || st == GW_STATUS_CANCELLED || st == GW_STATUS_COMPLETED)
			return st == want;
		usleep(5000);
	}
	return false;
}

/* A stranger at the recovery listener: PC_RECOVER with another id gets ERROR DENIED. */
static void stranger(const char *url)
{
	struct gw_msg_pc_recover m = { .recoveries = 1 };
	struct sockaddr_in a = { .sin_family = AF_INET };
	uint8_t buf[8 + GW_WIRE_MAX_REASON];
	const char *port = strrchr(url, ':');
	union gw_msg reply;
	struct gw_conn c;
	int fd, type;

	memset(m.id, 0xee, sizeof(m.id));
	a.sin_port = htons((uint16_t)atoi(port + 1));
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	TEST_ASSERT(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0, "connect %s", url);
	gw_conn_init(&c, fd);
	gw_conn_set_timeout(&c, 5000);
	TEST_ASSERT(gw_conn_send_msg(&c, GW_MSG_PC_RECOVER, &m) == 0, "send");
	type = gw_conn_recv_msg(&c, &reply, buf, sizeof(buf), NULL, 0);
	TEST_CHECK(type == GW_MSG_ERROR && reply.error.code == GW_WERR_DENIED,
		   "a wrong migration id is refused with DENIED (got %d)", type);
	gw_conn_close(&c);
}

static void one_run(uint64_t seed)
{
	struct test_ram sram, dram;
	struct test_vm svm = { 0 }, dvm = { 0 };
	struct src_guest sg = { 0 };
	struct dst_guest dg = { 0 };
	struct gw_vm_info si, di;
	struct gw_session *src, *dst;
	struct gw_stats ss = { .size = sizeof(ss) }, ds = { .size = sizeof(ds) };
	struct relay *relay;
	uint8_t *frozen = malloc(RAM_BYTES);
	unsigned channels, delay_ms, cut_pct;
	uint64_t cut_pages = 0, set_pages = 0;
	int only, sret, dret;
	char url[80];

	rng = seed;
	channels = 1 + rnd() % 3;
	delay_ms = rnd() % MAX_DELAY_MS;
	only = rnd() % 2 ? -1 : (int)(rnd() % (channels + 2));	/* all, or control / a channel / preempt */
	/* The cut falls at a point of postcopy's progress, not of time (a slow or fast machine moves it). */
	cut_pct = 5 + delay_ms % 45;
	printf("seed %llu: %u channel(s), cut %s once %u%% of the postcopy pages went through\n",
	       (unsigned long long)seed, channels, only < 0 ? "every connection" : "one connection", cut_pct);
	fflush(stdout);
	TEST_ASSERT(frozen, "malloc");
	TEST_ASSERT(test_ram_create(&sram, "rc-src", RAM_BYTES, 1u << 20) == 0, "source RAM");
	TEST_ASSERT(test_ram_create(&dram, "rc-dst", RAM_BYTES, 1u << 20) == 0, "destination RAM");
	fill(sram.host);
	test_vm_info_one(&si, &sram, "ram0");
	test_vm_info_one(&di, &dram, "ram0");
	sg.host = sram.host;
	svm.on_pause = src_guest_pause;
	svm.on_resume = src_guest_resume;
	svm.hook_arg = &sg;
	dg.host = dram.host;
	dg.start = rnd() % RAM_PAGES;
	dvm.on_resume = dst_guest_resume;
	dvm.hook_arg = &dg;

	dst = gw_session_new(GW_ROLE_DEST, &di, &test_vm_ops, &dvm);
	src = gw_session_new(GW_ROLE_SOURCE, &si, &test_vm_ops, &svm);
	TEST_ASSERT(src && dst, "sessions");
	TEST_ASSERT(gw_session_set(dst, GW_PARAM_IO_TIMEOUT_MS, IO_TIMEOUT_MS) == 0, "destination timeout");
	TEST_ASSERT(gw_incoming_start(dst, "tcp:127.0.0.1:0") == 0, "incoming");
	relay = relay_start((uint16_t)atoi(strrchr(gw_incoming_url(dst), ':') + 1));
	TEST_ASSERT(relay, "relay");
	relay_cut_at(relay, only, cut_pct);
	TEST_ASSERT(gw_session_set(src, GW_PARAM_POSTCOPY, 1) == 0 &&
		    gw_session_set(src, GW_PARAM_POSTCOPY_AFTER_ROUNDS, 1) == 0 &&
		    gw_session_set(src, GW_PARAM_CHANNELS, channels) == 0 &&
		    gw_session_set(src, GW_PARAM_IO_TIMEOUT_MS, IO_TIMEOUT_MS) == 0 &&
		    gw_session_set(src, GW_PARAM_MAX_BANDWIDTH_BPS, CAP_BPS) == 0 &&
		    gw_session_set(src, GW_PARAM_DOWNTIME_LIMIT_US, 1000) == 0, "parameters");
	TEST_ASSERT(pthread_create(&sg.thr, NULL, src_guest_main, &sg) == 0, "source guest");
	TEST_ASSERT(gw_migrate_start(src, relay_url(relay)) == 0, "migrate");
	/*
	 * The relay cuts by itself, after the switch (it counts only pages the
	 * source sends once RESUMED came back): postcopy-active may already be
	 * over, so both sides are awaited in postcopy-paused.
	 */
	TEST_CHECK(wait_for(dst, GW_STATUS_POSTCOPY_PAUSED, 90), "seed %llu: destination paused (%s)",
		   (unsigned long long)seed, gw_status_name(status_of(dst)));
	TEST_CHECK(wait_for(src, GW_STATUS_POSTCOPY_PAUSED, 30), "seed %llu: source paused (%s)",
		   (unsigned long long)seed, gw_status_name(status_of(src)));
	TEST_CHECK(relay_cut_made(relay, &cut_pages, &set_pages) && cut_pages < set_pages,
		   "seed %llu: the relay cut after %llu of %llu postcopy pages", (unsigned long long)seed,
		   (unsigned long long)cut_pages, (unsigned long long)set_pages);
	printf("seed %llu: cut after %llu of %llu postcopy pages\n", (unsigned long long)seed,
	       (unsigned long long)cut_pages, (unsigned long long)set_pages);
	memcpy(frozen, sram.host, RAM_BYTES);	/* paused for good since the switch: frozen */
	TEST_CHECK(gw_postcopy_resume(src, "tcp:127.0.0.1:1") != 0 || 1, "resume before a listener");
	TEST_CHECK(gw_postcopy_recover(dst, "tcp:127.0.0.1:0") == 0, "seed %llu: destination listens again",
		   (unsigned long long)seed);
	snprintf(url, sizeof(url), "%s", gw_incoming_url(dst));
	stranger(url);
	/* The first attempt may still be failing against port 1: retry until it takes. */
	for (unsigned i = 0; i < 600 && status_of(src) != GW_STATUS_POSTCOPY_ACTIVE &&
	     status_of(src) != GW_STATUS_COMPLETED; i++) {
		if (status_of(src) == GW_STATUS_POSTCOPY_PAUSED)
			(void)gw_postcopy_resume(src, url);
		usleep(10000);
	}
	TEST_CHECK(gw_session_set(src, GW_PARAM_MAX_BANDWIDTH_BPS, 0) == 0, "uncap");
	sret = gw_session_wait(src);
	dret = gw_session_wait(dst);
	gw_session_stats(src, &ss);
	gw_session_stats(dst, &ds);
	TEST_CHECK(sret == 0 && dret == 0, "seed %llu: completed (src %s: %s; dst %s: %s)", (unsigned long long)seed,
		   gw_status_name(ss.status), ss.error, gw_status_name(ds.status), ds.error);
	TEST_CHECK(ss.postcopy_recoveries >= 1 && ds.postcopy_recoveries >= 1, "seed %llu: recovered (%u, %u)",
		   (unsigned long long)seed, ss.postcopy_recoveries, ds.postcopy_recoveries);
	TEST_CHECK(ds.postcopy_placed_pushed + ds.postcopy_placed_requested == ds.postcopy_pages &&
		   ds.postcopy_remaining_pages == 0, "seed %llu: every page placed once", (unsigned long long)seed);
	TEST_CHECK(ss.verify == GW_VERIFY_OK && ds.verify == GW_VERIFY_OK, "seed %llu: digests equal (%s, %s)",
		   (unsigned long long)seed, gw_verify_name(ss.verify), gw_verify_name(ds.verify));
	TEST_CHECK(ss.postcopy_paused_ns > 0, "seed %llu: paused time measured", (unsigned long long)seed);
	__atomic_store_n(&dg.quit, 1, __ATOMIC_RELEASE);
	if (dg.started)
		pthread_join(dg.thr, NULL);
	for (uint32_t p = 0; p < RAM_PAGES; p++) {
		const uint8_t *d = dram.host + (uint64_t)p * TEST_PAGE_BYTES, *e = frozen + (uint64_t)p * TEST_PAGE_BYTES;
		uint32_t k = (p + RAM_PAGES - dg.start) % RAM_PAGES;
		bool marked = k < __atomic_load_n(&dg.touched, __ATOMIC_ACQUIRE);
		bool ok = !memcmp(d, e, TEST_PAGE_BYTES - 8) &&
			  !memcmp(d + TEST_PAGE_BYTES - 8, marked ? (const uint8_t *)"GUESTWR!" : e + TEST_PAGE_BYTES - 8, 8);

		if (!ok) {
			TEST_CHECK(ok, "seed %llu: page %u differs at the end (marked %d)", (unsigned long long)seed, p,
				   marked);
			break;
		}
	}
	TEST_CHECK(test_ram_guards_intact(&sram) && test_ram_guards_intact(&dram), "guards intact");
	__atomic_store_n(&sg.quit, 1, __ATOMIC_RELEASE);
	pthread_join(sg.thr, NULL);
	gw_session_free(src);
	gw_session_free(dst);
	relay_stop(relay);
	test_ram_destroy(&sram);
	test_ram_destroy(&dram);
	free(frozen);
}

int main(void)
{
	const char *one = getenv("GW_TEST_SEED"), *runs_env = getenv("GW_TEST_RUNS");
	unsigned runs = runs_env ? (unsigned)atoi(runs_env) : 20;
	uint64_t base = one ? strtoull(one, NULL, 0) : (uint64_t)time(NULL);
	char why[256];

	test_log_quiet();
	test_time_bound(60 + runs * 30);
	if (gw_dirty_probe(GW_DIRTY_AUTO, NULL, why, sizeof(why)))
		test_skip("no dirty tracking here: %s", why);
	if (gw_uffd_post_probe(why, sizeof(why)))
		test_skip("%s", why);
	printf("base seed %llu (GW_TEST_SEED=%llu repeats the first run)\n", (unsigned long long)base,
	       (unsigned long long)base);
	for (unsigned i = 0; i < (one ? 1 : runs); i++)
		one_run(base + i);
	TEST_EXIT();
}
