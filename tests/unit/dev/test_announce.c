/* SPDX-License-Identifier: MIT */
/*
 * The announcer (vmm/dev/announce.h) against fake send functions.
 *
 * Invariants:
 * 1. frames: the RARP is QEMU's byte for byte (60 bytes, broadcast,
 *    0x8035, opcode 3, sender = target hardware = the MAC, addresses 0,
 *    zero padding); the gratuitous ARP is RFC 5227's announcement.
 * 2. delays: computed as QEMU's qemu_announce_timer_step (initial + step *
 *    (n - 1), capped at max), defaults 50, 150, 250, 350.
 * 3. parameters: QEMU's bounds, each refused with its name; new() refuses
 *    what check refuses.
 * 4. schedule: every round sends one RARP per NIC (and an ARP where an
 *    address is set), NICs in order, rounds in order; EAGAIN is counted,
 *    not retried; the log says announce_start, announce_round n=1..R,
 *    announce_done; rounds 0 sends nothing; a second start restarts at
 *    round 0; after stop no send function runs.
 *
 * Timing never decides: delays are 0..2 ms; waits are bounds (10 s).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <godwit/log.h>
#include "dev/announce.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define WAIT_NS (10ull * 1000000000u)
#define CALLS_MAX 4096u

static const uint8_t mac0[6] = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x00 };
static const uint8_t mac1[6] = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x01 };
static const uint8_t mac2[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 };
static const uint8_t ip1[4] = { 10, 96, 7, 21 };

/* ---- 1. frames ---- */

static void frames(void)
{
	static const uint8_t rarp[60] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x67, 0x77, 0x00,
		0x80, 0x35,			/* RARP */
		0x00, 0x01, 0x08, 0x00, 6, 4,	/* Ethernet, IPv4 */
		0x00, 0x03,			/* reverse request */
		0x52, 0x54, 0x00, 0x67, 0x77, 0x00, 0, 0, 0, 0,
		0x52, 0x54, 0x00, 0x67, 0x77, 0x00, 0, 0, 0, 0,
		/* 18 bytes of padding, zero */
	};
	static const uint8_t garp[60] = {
		0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x52, 0x54, 0x00, 0x67, 0x77, 0x01,
		0x08, 0x06,			/* ARP */
		0x00, 0x01, 0x08, 0x00, 6, 4,
		0x00, 0x01,			/* request */
		0x52, 0x54, 0x00, 0x67, 0x77, 0x01, 10, 96, 7, 21,
		0, 0, 0, 0, 0, 0, 10, 96, 7, 21,
	};
	uint8_t f[VMM_ANNOUNCE_FRAME_BYTES];

	memset(f, 0xaa, sizeof(f));
	TEST_CHECK(vmm_announce_rarp(f, mac0) == 60, "RARP length");
	for (unsigned i = 0; i < 60; i++)
		TEST_CHECK(f[i] == rarp[i], "RARP byte %u: %#x, expected %#x", i, f[i], rarp[i]);
	memset(f, 0xaa, sizeof(f));
	TEST_CHECK(vmm_announce_garp(f, mac1, ip1) == 60, "ARP length");
	for (unsigned i = 0; i < 60; i++)
		TEST_CHECK(f[i] == garp[i], "ARP byte %u: %#x, expected %#x", i, f[i], garp[i]);
}

/* ---- 2. delays ---- */

static void delays(void)
{
	static const int64_t qemu[] = { 0, 50, 150, 250, 350, 450, 550, 550, 550 };
	struct vmm_announce_params p;

	vmm_announce_params_default(&p);
	TEST_CHECK(p.initial_ms == 50 && p.max_ms == 550 && p.rounds == 5 && p.step_ms == 100,
		   "QEMU's defaults");
	for (unsigned n = 0; n < sizeof(qemu) / sizeof(qemu[0]); n++)
		TEST_CHECK(vmm_announce_delay_ms(&p, n) == qemu[n], "delay %u: %lld", n,
			   (long long)vmm_announce_delay_ms(&p, n));
	p.initial_ms = 700;		/* initial above max: max, as QEMU */
	TEST_CHECK(vmm_announce_delay_ms(&p, 1) == 550, "capped at max");
	p = (struct vmm_announce_params){ .initial_ms = 0, .max_ms = 100000, .rounds = 1000,
					   .step_ms = 10000 };
	TEST_CHECK(vmm_announce_delay_ms(&p, 999) == 100000, "no overflow at the bounds");
}

/* ---- 3. parameters ---- */

static void params(void)
{
	static const struct { int64_t initial, max, rounds, step; const char *name; } bad[] = {
		{ -1, 550, 5, 100, "announce-initial" }, { 100001, 550, 5, 100, "announce-initial" },
		{ 50, -1, 5, 100, "announce-max" }, { 50, 100001, 5, 100, "announce-max" },
		{ 50, 550, -1, 100, "announce-rounds" }, { 50, 550, 1001, 100, "announce-rounds" },
		{ 50, 550, 5, 0, "announce-step" }, { 50, 550, 5, 10001, "announce-step" },
	};
	struct vmm_announce_params p;
	struct vmm_announce *a;
	char why[128];

	vmm_announce_params_default(&p);
	TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == 0, "defaults: %s", why);
	p = (struct vmm_announce_params){ .initial_ms = 0, .max_ms = 0, .rounds = 0, .step_ms = 1 };
	TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == 0, "lower bounds: %s", why);
	p = (struct vmm_announce_params){ .initial_ms = 100000, .max_ms = 100000, .rounds = 1000,
					   .step_ms = 10000 };
	TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == 0, "upper bounds: %s", why);
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		vmm_announce_params_default(&p);
		p.initial_ms = bad[i].initial, p.max_ms = bad[i].max;
		p.rounds = bad[i].rounds, p.step_ms = bad[i].step;
		why[0] = 0;
		TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == -EINVAL &&
			   strstr(why, bad[i].name), "case %u accepted or unnamed: %s", i, why);
		errno = 0;
		a = vmm_announce_new(&p);
		TEST_CHECK(!a && errno == EINVAL, "case %u: new accepted", i);
		vmm_announce_destroy(a);
	}
	vmm_announce_params_default(&p);
	p.nr_interfaces = 1;
	TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == -EINVAL, "empty interface name");
	snprintf(p.interfaces[0], sizeof(p.interfaces[0]), "virtio-net1");
	TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == 0, "one interface: %s", why);
	TEST_CHECK(vmm_announce_params_wants(&p, "virtio-net1") &&
		   !vmm_announce_params_wants(&p, "virtio-net0"), "interfaces filter");
	p.nr_interfaces = 0;
	TEST_CHECK(vmm_announce_params_wants(&p, "virtio-net0"), "no interfaces: every NIC");
	p.nr_interfaces = VMM_ANNOUNCE_INTERFACES_MAX + 1;
	TEST_CHECK(vmm_announce_params_check(&p, why, sizeof(why)) == -EINVAL, "too many interfaces");
	TEST_CHECK(vmm_vm_announce(NULL, &p) == -EOPNOTSUPP, "the weak hook: no NIC");
}

/* ---- 4. schedule ---- */

struct call {
	unsigned nic;
	uint16_t ethertype;
};

static struct {
	pthread_mutex_t lock;
	struct call calls[CALLS_MAX];
	unsigned nr;
	char lines[64][256];
	unsigned nr_lines;
} rec = { .lock = PTHREAD_MUTEX_INITIALIZER };

struct fake_nic {
	unsigned id;
	int ret;			/* what send says */
};

static int fake_send(void *opaque, const void *frame, size_t len)
{
	const struct fake_nic *n = opaque;
	const uint8_t *f = frame;

	TEST_ASSERT(len == VMM_ANNOUNCE_FRAME_BYTES, "frame length %zu", len);
	pthread_mutex_lock(&rec.lock);
	if (rec.nr < CALLS_MAX)
		rec.calls[rec.nr++] = (struct call){ n->id, (uint16_t)(f[12] << 8 | f[13]) };
	pthread_mutex_unlock(&rec.lock);
	return n->ret;
}

static void sink(void *opaque, enum gw_log_level level, const char *line)
{
	(void)opaque, (void)level;
	pthread_mutex_lock(&rec.lock);
	if (strstr(line, " announce ") && rec.nr_lines < 64)
		snprintf(rec.lines[rec.nr_lines++], sizeof(rec.lines[0]), "%s", line);
	pthread_mutex_unlock(&rec.lock);
}

static void rec_reset(void)
{
	pthread_mutex_lock(&rec.lock);
	rec.nr = rec.nr_lines = 0;
	pthread_mutex_unlock(&rec.lock);
}

static unsigned rec_calls(void)
{
	unsigned n;

	pthread_mutex_lock(&rec.lock);
	n = rec.nr;
	pthread_mutex_unlock(&rec.lock);
	return n;
}

static void wait_calls(unsigned n)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	while (rec_calls() < n) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		TEST_ASSERT(t.tv_sec - t0.tv_sec < 10, "stalled at %u of %u calls", rec_calls(), n);
		nanosleep(&(struct timespec){ 0, 1000000 }, NULL);
	}
}

static bool has_line(unsigned i, const char *s)
{
	return i < rec.nr_lines && strstr(rec.lines[i], s);
}

static void schedule(void)
{
	struct fake_nic n0 = { 0, 0 }, n1 = { 1, 0 }, n2 = { 2, -EAGAIN };
	struct vmm_announce_params p = { .initial_ms = 0, .max_ms = 2, .rounds = 5, .step_ms = 1 };
	struct vmm_announce_stats st;
	struct vmm_announce *a;
	char buf[64];

	rec_reset();
	a = vmm_announce_new(&p);
	TEST_ASSERT(a, "new");
	TEST_CHECK(vmm_announce_add_nic(a, fake_send, &n0, mac0) == 0, "nic 0");
	TEST_CHECK(vmm_announce_add_nic(a, fake_send, &n1, mac1) == 1, "nic 1");
	TEST_CHECK(vmm_announce_add_nic(a, fake_send, &n2, mac2) == 2, "nic 2");
	TEST_CHECK(vmm_announce_add_nic(a, fake_send, &n2, (const uint8_t[6]){ 1 }) == -EINVAL,
		   "multicast MAC accepted");
	TEST_CHECK(vmm_announce_set_ipv4(a, 1, ip1) == 0, "ipv4 on nic 1");
	TEST_CHECK(vmm_announce_set_ipv4(a, 3, ip1) == -EINVAL, "ipv4 on a missing nic");
	vmm_announce_set_log_side(a, "dst");
	TEST_ASSERT(vmm_announce_start(a) == 0, "start");
	TEST_ASSERT(vmm_announce_wait(a, WAIT_NS) == 0, "schedule done");
	/* Per round: nic 0 RARP, nic 1 RARP, nic 1 ARP, nic 2 RARP (EAGAIN, not retried). */
	pthread_mutex_lock(&rec.lock);
	TEST_CHECK(rec.nr == 5 * 4, "%u calls", rec.nr);
	for (unsigned i = 0; i < rec.nr; i++) {
		static const struct call want[4] = { { 0, 0x8035 }, { 1, 0x8035 }, { 1, 0x0806 },
						     { 2, 0x8035 } };

		TEST_CHECK(rec.calls[i].nic == want[i % 4].nic &&
			   rec.calls[i].ethertype == want[i % 4].ethertype,
			   "call %u: nic %u ethertype %#x", i, rec.calls[i].nic, rec.calls[i].ethertype);
	}
	TEST_CHECK(rec.nr_lines == 7, "%u log lines", rec.nr_lines);
	/* start is the caller's line (its side); the rounds are the announcer's ("dst"). */
	TEST_CHECK(has_line(0, "announce_start nics=3 rounds=5"), "start line: %s", rec.lines[0]);
	TEST_CHECK(has_line(1, " dst "), "the announcer's side: %s", rec.lines[1]);
	for (unsigned k = 1; k <= 5; k++) {
		snprintf(buf, sizeof(buf), "announce_round n=%u nics=3 sent=3 eagain=1", k);
		TEST_CHECK(has_line(k, buf), "round line %u: %s", k, k < rec.nr_lines ? rec.lines[k] : "");
	}
	TEST_CHECK(has_line(6, "announce_done rounds=5 nics=3 sent=15 eagain=5"),
		   "done line: %s", rec.nr_lines > 6 ? rec.lines[6] : "");
	pthread_mutex_unlock(&rec.lock);
	vmm_announce_get_stats(a, &st);
	TEST_CHECK(st.starts == 1 && st.rounds == 5 && st.frames_sent == 15 &&
		   st.frames_eagain == 5 && st.frames_failed == 0 && !st.running, "stats");

	/* The same announcer again, with new parameters: rounds 0 sends nothing. */
	rec_reset();
	p.rounds = 0;
	TEST_CHECK(vmm_announce_set_params(a, &p) == 0, "set params");
	p.step_ms = 0;
	TEST_CHECK(vmm_announce_set_params(a, &p) == -EINVAL, "bad params set");
	TEST_ASSERT(vmm_announce_start(a) == 0, "start, 0 rounds");
	TEST_CHECK(vmm_announce_wait(a, WAIT_NS) == 0, "done at once");
	TEST_CHECK(rec_calls() == 0, "rounds 0: %u calls", rec_calls());
	vmm_announce_destroy(a);
}

/* A second start while the schedule waits (100 s away) restarts it from round 0. */
static void restart_and_stop(void)
{
	struct fake_nic n0 = { 0, 0 };
	struct vmm_announce_params p = { .initial_ms = 100000, .max_ms = 100000, .rounds = 1000,
					 .step_ms = 10000 };
	struct vmm_announce_stats st;
	struct vmm_announce *a;
	unsigned starts = 0;

	rec_reset();
	a = vmm_announce_new(&p);
	TEST_ASSERT(a, "new");
	TEST_CHECK(vmm_announce_add_nic(a, fake_send, &n0, mac0) == 0, "nic 0");
	TEST_ASSERT(vmm_announce_start(a) == 0, "start");
	wait_calls(1);
	TEST_CHECK(vmm_announce_add_nic(a, fake_send, &n0, mac1) == -EBUSY, "add while running");
	TEST_CHECK(vmm_announce_set_params(a, &p) == -EBUSY, "set while running");
	TEST_ASSERT(vmm_announce_start(a) == 0, "restart");
	wait_calls(2);
	vmm_announce_stop(a);
	vmm_announce_get_stats(a, &st);
	TEST_CHECK(!st.running && st.starts == 2 && st.rounds == 2, "stats after stop: %llu rounds",
		   (unsigned long long)st.rounds);
	TEST_CHECK(rec_calls() == 2, "two round 0s: %u calls", rec_calls());
	pthread_mutex_lock(&rec.lock);
	for (unsigned i = 0; i < rec.nr_lines; i++)
		starts += strstr(rec.lines[i], "announce_start") != NULL;
	TEST_CHECK(starts == 2 && strstr(rec.lines[rec.nr_lines - 1], "announce_stopped"),
		   "%u start lines, last: %s", starts, rec.lines[rec.nr_lines - 1]);
	pthread_mutex_unlock(&rec.lock);
	TEST_CHECK(vmm_announce_wait(a, 0) == 0, "stopped: nothing to wait for");
	vmm_announce_stop(a);		/* idempotent */
	vmm_announce_destroy(a);
	TEST_CHECK(rec_calls() == 2, "no call after stop");
	vmm_announce_destroy(NULL);
}

int main(void)
{
	gw_log_set_sink(sink, NULL);
	gw_log_set_level(GW_LOG_INFO);	/* the events looked for are INFO */
	frames();
	delays();
	params();
	schedule();
	restart_and_stop();
	printf("announce: frames, delays, %s\n", test_failures ? "FAILED" : "schedule ok");
	TEST_EXIT();
}
