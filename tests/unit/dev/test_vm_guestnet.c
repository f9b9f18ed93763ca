/* SPDX-License-Identifier: MIT */
/*
 * Frames through the guest's own driver (common/vnet_drv.c) while the VM
 * migrates in process: the l2fwd and echo workloads (vmm/workload.h), the
 * NICs on socketpairs (vmm_config.nic_fds), "the network" a test thread
 * that sends gwpktgen's frames (bench/pgframe.h: numbered, CRC32C over the
 * payload) into NIC s and reads what comes back out of the egress NIC.
 *
 * Invariants, each case over the whole run (source, then destination):
 * every frame sent comes back exactly once with its CRC intact (0 lost, 0
 * duplicated, 0 corrupt), its MAC header rewritten as the workload says
 * (one NIC: swapped; two NICs: out of the other NIC, source = that NIC's
 * MAC, destination = dstJ or the sender), and frames flow after the
 * migration (the destination's guest forwarded some); the RAM digest
 * (source at pause, destination at resume) is verified, and the guest's
 * progress counter (frames forwarded) is at least the frames received.
 *
 * 1. l2fwd, one NIC, migrated; LATE frames reach the source after its
 *    pause (carried to the destination by the NIC's carry FIFO).
 * 2. l2fwd, two NICs, both directions at once, migrated.
 * 3. l2fwd, one NIC, failure window: the destination has no NIC and
 *    refuses the state; the source's guest forwards on, every frame once.
 * 4. echo (interrupt-driven): right after the source's vCPUs park, one
 *    more frame reaches the NIC and its interrupt is raised with nobody to
 *    take it (checked: InterruptStatus set before the save); the
 *    destination's guest must take that interrupt: echo looks at its ring
 *    only when its line rose, and the network sends nothing more (no late
 *    frame, nothing to the destination) until that frame is back, so it
 *    comes back only if the interrupt crossed the migration.
 *
 * Built for the soft VM on uffd-wp (suite unit). Timing never decides:
 * every wait is a hang guard of 20 s. The network paces itself (one frame
 * per stream per 0.1 ms at most) and holds its last AFTER frames until the
 * source pauses (half of them trickle out meanwhile, so that frames are in
 * flight at the pause), so frames cross the switch on any machine.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <linux/sockios.h>
#include <godwit/session.h>
#include "dev/virtio_net.h"
#include "dev/virtio_regs.h"
#include "pgframe.h"
#include "test_util.h"
#include "vm_base.h"
#include "vmm.h"

TEST_DEFINE_FAILURES;

#define BE (&vmm_soft)
#define TRACKER GW_DIRTY_UFFD_WP
#define TRACKER_NAME "uffd-wp"

#define VM_BYTES (32ull << 20)
#define FRAMES 4000u		/* per stream */
#define MIGRATE_AT 200u		/* frames back (per stream) before the migration starts */
#define WINDOW 32u		/* frames of a stream ahead of their return: under the carry FIFO */
#define LATE 16u		/* frames per stream that reach the source after its pause */
#define AFTER 1000u		/* frames per stream held back until the pause (or the end) */
#define TRICKLE_NS 2000000ull	/* held frames: one per 2 ms, half of them, until the pause */
#define FRAME_BYTES 96u
#define WAIT_NS (20ull * 1000000000u)
#define MAX_NICS 2u
#define RUN_ID 0x5eed0000u

static const uint8_t net_mac[MAX_NICS][6] = {	/* the senders on each wire */
	{ 0x02, 0x00, 0x00, 0x00, 0x00, 0xa0 }, { 0x02, 0x00, 0x00, 0x00, 0x00, 0xa1 },
};
static const uint8_t dst1_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0xb1 };

enum gn_case { GN_ONE, GN_TWO, GN_FAIL, GN_ECHO_IRQ };

struct stream {			/* frames sent into NIC `in`, expected out of NIC `out` */
	unsigned in, out;
	uint8_t want_dst[6], want_src[6];	/* the MAC header they come back with */
	atomic_uint sent, back;
	unsigned late;			/* network thread: sent during the pause */
	uint64_t trickle_ns;		/* network thread: the last frame sent past the gate */
	uint8_t seen[FRAMES];		/* network thread */
};

static struct {
	enum gn_case c;
	struct vmm *src, *dst;
	struct gw_vm_ops src_ops, dst_ops;
	unsigned nr_nics, nr_streams;
	unsigned late;			/* frames per stream sent to the paused source: LATE, echo 0 */
	int ps[MAX_NICS], pd[MAX_NICS];	/* the network's ends: source's NICs, destination's */
	struct stream s[MAX_NICS];
	atomic_int phase;		/* 0 to the source, 1 LATE more to it (paused), 2 switched */
	atomic_bool gate_open;		/* the last AFTER frames may go: paused, or no migration */
	atomic_uint bad, foreign, wrong_mac, dup;
	atomic_uint back_total;
	unsigned back_at_pause, back_after;	/* frames back: at the pause, from the destination */
	/* echo: the pending interrupt */
	struct vmm_vm_hooks hooks;
	const struct vmm_vm_hooks *orig_hooks;
	atomic_uint irq_seq;		/* its frame's sequence number, +1 (0: not sent) */
	pthread_mutex_t send_lock;	/* held by the network around its sends */
	uint32_t irq_status_at_save;
} t;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

static const uint8_t *guest_mac(unsigned i)
{
	static uint8_t m[MAX_NICS][6];

	memcpy(m[i], (uint8_t[6]){ 0x52, 0x54, 0x00, 0x67, 0x77, (uint8_t)i }, 6);
	return m[i];
}

/* ---- the network ---- */

static bool send_frame(struct stream *s, int fd, uint64_t seq)
{
	uint8_t f[FRAME_BYTES];

	pgframe_build(f, guest_mac(s->in), net_mac[s->in], FRAME_BYTES, RUN_ID + s->in, seq);
	pgframe_seal(f, FRAME_BYTES, now_ns());
	return send(fd, f, FRAME_BYTES, MSG_DONTWAIT) == (ssize_t)FRAME_BYTES;
}

/* One frame out of NIC @nic: which stream, intact, its MACs, first time. */
static void take(unsigned nic, const uint8_t *f, ssize_t n)
{
	for (unsigned k = 0; k < t.nr_streams; k++) {
		struct stream *s = &t.s[k];
		uint64_t seq = 0;
		enum pgframe_verdict v;

		if (s->out != nic)
			continue;
		v = pgframe_check(f, (size_t)n, s->want_dst, RUN_ID + s->in, &seq);
		if (v == PGFRAME_NOT_OURS || v == PGFRAME_FOREIGN)
			continue;
		if (v == PGFRAME_CORRUPT || seq >= FRAMES + 1) {
			atomic_fetch_add(&t.bad, 1);
			return;
		}
		if (memcmp(f + 6, s->want_src, 6))
			atomic_fetch_add(&t.wrong_mac, 1);
		if (seq == FRAMES) {	/* echo: the frame of the pending interrupt */
			atomic_store(&t.irq_seq, 0);
			return;
		}
		if (s->seen[seq]++) {
			atomic_fetch_add(&t.dup, 1);
			return;
		}
		atomic_fetch_add(&s->back, 1);
		atomic_fetch_add(&t.back_total, 1);
		if (atomic_load(&t.phase) == 2)
			t.back_after++;
		return;
	}
	if (n >= 14 && f[12] == 0x80 && f[13] == 0x35)
		return;			/* RARP: the moved NIC announced itself */
	atomic_fetch_add(&t.foreign, 1);
}

static void drain(unsigned nic, int fd)
{
	uint8_t f[4096];
	ssize_t n;

	while (fd >= 0 && (n = recv(fd, f, sizeof(f), MSG_DONTWAIT)) > 0)
		take(nic, f, n);
}

static bool all_back(void)
{
	for (unsigned k = 0; k < t.nr_streams; k++)
		if (atomic_load(&t.s[k].back) < FRAMES)
			return false;
	return true;
}

static void send_some(struct stream *s, int phase)
{
	unsigned seq = atomic_load(&s->sent);
	bool room = seq - atomic_load(&s->back) < WINDOW || (phase == 1 && s->late < t.late);
	int fd = phase == 2 && t.c != GN_FAIL ? t.pd[s->in] : t.ps[s->in];

	if (atomic_load(&t.irq_seq))
		return;		/* echo: nothing else may wake the destination's guest */
	if (seq >= FRAMES - AFTER && !atomic_load(&t.gate_open)) {
		/* Until the pause: a trickle (1 per TRICKLE_NS), then none: frames cross the switch. */
		if (seq >= FRAMES - AFTER / 2 || now_ns() - s->trickle_ns < TRICKLE_NS)
			return;
		s->trickle_ns = now_ns();
	}
	if (seq < FRAMES && room && (phase != 1 || s->late < t.late) && send_frame(s, fd, seq)) {
		atomic_store(&s->sent, seq + 1);
		s->late += phase == 1;
	}
}

static void *network_main(void *arg)
{
	uint64_t last_ns = now_ns();
	unsigned last_back = 0;

	(void)arg;
	while (!all_back()) {
		int phase = atomic_load(&t.phase);
		bool late_done = true;

		for (unsigned i = 0; i < t.nr_nics; i++) {
			drain(i, t.ps[i]);
			drain(i, t.pd[i]);
		}
		pthread_mutex_lock(&t.send_lock);
		for (unsigned k = 0; k < t.nr_streams; k++) {
			send_some(&t.s[k], phase);
			late_done &= t.s[k].late >= t.late || atomic_load(&t.s[k].sent) == FRAMES;
		}
		pthread_mutex_unlock(&t.send_lock);
		if (phase == 1 && late_done)
			atomic_store(&t.phase, 2);
		if (atomic_load(&t.back_total) != last_back) {
			last_back = atomic_load(&t.back_total);
			last_ns = now_ns();
		}
		if (now_ns() - last_ns > 2 * WAIT_NS)
			break;		/* a hang guard: nothing came back for that long */
		sleep_us(100);
	}
	return NULL;
}

/* ---- the engine's callbacks and the echo case's pause, wrapped ---- */

static uint32_t int_status(struct vmm *vm)
{
	uint8_t b[4];
	uint64_t base = virtio_net_base_gpa(BE->nic(vm, 0));

	vmm_mmio_access(BE->mmio_bus(vm), base + VIRTIO_MMIO_INTERRUPT_STATUS, b, 4, false);
	return gw_le32_get(b);
}

static void wait_outq_empty(int fd, uint64_t t0)
{
	int outq = 1;

	while (now_ns() - t0 < WAIT_NS && !ioctl(fd, SIOCOUTQ, &outq) && outq > 0)
		sleep_us(100);
}

/*
 * vCPUs parked, NICs not stopped yet: a frame now raises an interrupt
 * nobody takes. The network holds (irq_seq set) and everything it sent is
 * in guest RAM first, so that no frame reaches the destination's NIC
 * later (the carry FIFO is empty) to wake its guest in the pending
 * interrupt's place: WINDOW + 1 is under the ring's VNET_DRV_QUEUE_NUM.
 */
static void pause_vcpus_then_frame(struct vmm_vm *vm)
{
	uint64_t t0 = now_ns();

	t.orig_hooks->pause_vcpus(vm);
	if ((struct vmm *)vm != t.src || atomic_load(&t.phase) != 0)
		return;
	atomic_store(&t.irq_seq, FRAMES + 1);
	pthread_mutex_lock(&t.send_lock);	/* a send the network had begun is done */
	pthread_mutex_unlock(&t.send_lock);
	wait_outq_empty(t.ps[0], t0);
	TEST_ASSERT(send_frame(&t.s[0], t.ps[0], FRAMES), "the interrupt's frame");
	wait_outq_empty(t.ps[0], t0);
	while (!(int_status(t.src) & VIRTIO_MMIO_INT_VRING) && now_ns() - t0 < WAIT_NS)
		sleep_us(100);
}

static int src_pause(void *opaque)
{
	int ret;

	t.back_at_pause = atomic_load(&t.back_total);
	ret = BE->engine_ops->pause(opaque);
	atomic_store(&t.phase, 1);
	atomic_store(&t.gate_open, true);
	return ret;
}

/* Everything the network sent the source is in its NICs (the carry FIFO) before the save. */
static int src_save_state(void *opaque, struct gw_state *st)
{
	uint64_t t0 = now_ns();
	int outq = 1;

	while (atomic_load(&t.phase) != 2 && now_ns() - t0 < WAIT_NS)
		sleep_us(100);
	for (unsigned i = 0; i < t.nr_nics; i++)
		while (now_ns() - t0 < WAIT_NS && !ioctl(t.ps[i], SIOCOUTQ, &outq) && outq > 0)
			sleep_us(100);
	TEST_CHECK(atomic_load(&t.phase) == 2 && outq == 0,
		   "late frames not in the NIC: phase %d outq %d (sent %u, back %u, late %u)",
		   atomic_load(&t.phase), outq, atomic_load(&t.s[0].sent), atomic_load(&t.s[0].back),
		   t.s[0].late);
	t.irq_status_at_save = int_status(t.src);
	return BE->engine_ops->save_state(opaque, st);
}

static struct vmm *new_vm(bool incoming, unsigned nr_nics, const int *fds, const char *wl)
{
	struct virtio_net_nic nics[MAX_NICS];
	struct vmm_config cfg = {
		.memory_bytes = incoming ? 0 : VM_BYTES, .nr_vcpus = 1, .fill = VMM_FILL_MIX,
		.seed = 3, .workload = incoming ? "idle" : wl, .incoming = incoming,
		.dirty_backend = TRACKER, .nics = nics, .nr_nics = nr_nics, .nic_fds = fds,
	};
	char err[256] = "";
	struct vmm *vm;

	memset(nics, 0, sizeof(nics));
	for (unsigned i = 0; i < MAX_NICS; i++) {
		memcpy(nics[i].mac, guest_mac(i), 6);
		nics[i].mac_set = true;
	}
	vm = BE->create(&cfg, err, sizeof(err));
	TEST_ASSERT(vm, "BE->create(%s): %s", wl, err);
	return vm;
}

static void pair(int *mine, int *vm_end)
{
	int sv[2];

	TEST_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	*mine = sv[0];
	*vm_end = sv[1];
}

static void streams_init(enum gn_case c)
{
	t.nr_nics = c == GN_TWO ? 2 : 1;
	t.nr_streams = t.nr_nics;
	t.late = c == GN_ECHO_IRQ ? 0 : LATE;
	for (unsigned k = 0; k < t.nr_streams; k++) {
		struct stream *s = &t.s[k];

		s->in = k;
		s->out = t.nr_nics == 2 ? k ^ 1 : k;
		memcpy(s->want_src, guest_mac(s->out), 6);
		memcpy(s->want_dst, c == GN_TWO && s->out == 1 ? dst1_mac : net_mac[k], 6);
	}
}

static const char *case_workload(enum gn_case c)
{
	return c == GN_TWO ? "l2fwd:dst1=02:00:00:00:00:b1" : c == GN_ECHO_IRQ ? "echo" : "l2fwd";
}

static void vms_new(enum gn_case c)
{
	int src_fds[MAX_NICS], dst_fds[MAX_NICS];

	for (unsigned i = 0; i < t.nr_nics; i++) {
		pair(&t.ps[i], &src_fds[i]);
		t.pd[i] = -1;
		if (c != GN_FAIL)
			pair(&t.pd[i], &dst_fds[i]);
	}
	t.src = new_vm(false, t.nr_nics, src_fds, case_workload(c));
	t.dst = new_vm(true, c == GN_FAIL ? 0 : t.nr_nics, dst_fds, case_workload(c));
	if (c == GN_ECHO_IRQ) {	/* the source's pause: a frame once its vCPUs are parked */
		struct vmm_vm *b = (struct vmm_vm *)t.src;

		t.orig_hooks = b->hooks;
		t.hooks = *b->hooks;
		t.hooks.pause_vcpus = pause_vcpus_then_frame;
		b->hooks = &t.hooks;
	}
}

/* Until @n frames per stream came back (a hang guard, not a timing check). */
static void wait_back(unsigned n, const char *name)
{
	uint64_t t0 = now_ns();

	while (now_ns() - t0 < WAIT_NS) {
		bool ok = true;

		for (unsigned k = 0; k < t.nr_streams; k++)
			ok &= atomic_load(&t.s[k].back) >= n;
		if (ok)
			return;
		sleep_us(1000);
	}
	TEST_ASSERT(0, "%s: frames do not flow through the guest (%u back)", name,
		    atomic_load(&t.back_total));
}

static int migrate(struct gw_session *ss, struct gw_session *ds, struct gw_stats *st,
		   char *err, size_t err_len, const char *name)
{
	char url[128];
	int sret, dret;

	snprintf(url, sizeof(url), "unix:/tmp/gw-guestnet-%d.sock", (int)getpid());
	TEST_ASSERT(gw_incoming_start(ds, url) == 0, "%s: incoming %s", name, url);
	TEST_ASSERT(gw_session_set(ss, GW_PARAM_VERIFY, 1) == 0 &&
		    gw_session_set(ss, GW_PARAM_DIRTY_BACKEND, TRACKER) == 0 &&
		    gw_session_set(ss, GW_PARAM_DOWNTIME_LIMIT_US, 200000) == 0 &&
		    gw_session_set(ss, GW_PARAM_CONVERGE_TIMEOUT_MS, 20000) == 0 &&
		    gw_session_set(ss, GW_PARAM_CONVERGE_POLICY, GW_CONVERGE_FORCE) == 0 &&
		    /* Round 0 lasts about a second while frames flow. */
		    gw_session_set(ss, GW_PARAM_MAX_BANDWIDTH_BPS, 24 << 20) == 0, "parameters");
	TEST_ASSERT(gw_migrate_start(ss, gw_incoming_url(ds)) == 0, "%s: migrate", name);
	sret = gw_session_wait(ss);
	dret = gw_session_wait(ds);
	gw_session_stats(ss, st);
	gw_session_error(ss, err, err_len);
	return sret || dret ? -1 : 0;
}

static void check_frames(const char *name, struct vmm *runs_on)
{
	unsigned lost = 0;
	uint64_t progress = BE->progress(runs_on);

	for (unsigned k = 0; k < t.nr_streams; k++)
		for (unsigned i = 0; i < FRAMES; i++)
			lost += !t.s[k].seen[i];
	TEST_CHECK(!lost && !atomic_load(&t.dup) && !atomic_load(&t.bad),
		   "%s: %u lost, %u duplicated, %u corrupt", name, lost, atomic_load(&t.dup),
		   atomic_load(&t.bad));
	TEST_CHECK(!atomic_load(&t.wrong_mac) && !atomic_load(&t.foreign),
		   "%s: %u with a wrong source MAC, %u foreign", name, atomic_load(&t.wrong_mac),
		   atomic_load(&t.foreign));
	TEST_CHECK(progress >= (uint64_t)FRAMES * t.nr_streams,
		   "%s: progress %llu, %u frames forwarded", name, (unsigned long long)progress,
		   FRAMES * t.nr_streams);
}

static void run(enum gn_case c, const char *name)
{
	struct gw_vm_info none = { .size = sizeof(none), .nr_blocks = 0, .kvm_vm_fd = -1 };
	struct gw_stats st = { .size = sizeof(st) };
	struct gw_session *ss, *ds;
	pthread_t net_thr;
	char err[512] = "";
	int ret;

	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.send_lock, NULL);
	t.c = c;
	streams_init(c);
	vms_new(c);
	TEST_ASSERT(BE->start(t.src) == 0, "%s: start", name);
	t.src_ops = *BE->engine_ops;
	t.src_ops.pause = src_pause;
	t.src_ops.save_state = src_save_state;
	t.dst_ops = *BE->engine_ops;
	ss = gw_session_new(GW_ROLE_SOURCE, BE->info(t.src), &t.src_ops, t.src);
	ds = gw_session_new(GW_ROLE_DEST, &none, &t.dst_ops, t.dst);
	TEST_ASSERT(ss && ds, "sessions");
	BE->set_session(t.src, ss);

	TEST_ASSERT(pthread_create(&net_thr, NULL, network_main, NULL) == 0, "network thread");
	wait_back(MIGRATE_AT, name);
	ret = migrate(ss, ds, &st, err, sizeof(err), name);
	atomic_store(&t.gate_open, true);
	if (c == GN_FAIL) {
		TEST_CHECK(ret != 0 && strstr(err, "NIC"), "%s: not refused for its NICs: %s", name, err);
		TEST_CHECK(BE->state(t.src) == VMM_RUNNING, "%s: source %s", name,
			   vmm_state_name(BE->state(t.src)));
	} else {
		TEST_ASSERT(ret == 0, "%s: migration failed: %s", name, err);
		TEST_CHECK(st.verified, "%s: RAM digest not verified (%s)", name, gw_verify_name(st.verify));
		TEST_CHECK(!strcmp(st.dirty_backend, TRACKER_NAME), "%s: tracker %s", name, st.dirty_backend);
	}
	pthread_join(net_thr, NULL);
	BE->set_session(t.src, NULL);
	check_frames(name, c == GN_FAIL ? t.src : t.dst);
	TEST_CHECK(t.back_after > 0, "%s: no frame came back after the switch", name);
	if (c == GN_ECHO_IRQ) {
		TEST_CHECK(t.irq_status_at_save & VIRTIO_MMIO_INT_VRING,
			   "%s: no interrupt pending at the save (status %#x)", name, t.irq_status_at_save);
		TEST_CHECK(atomic_load(&t.irq_seq) == 0,
			   "%s: the destination's guest never took the pending interrupt", name);
	}
	if (c != GN_FAIL)
		BE->set_postmigrate(t.src);
	printf("%s: %u streams x %u frames, %u back before the pause, %u after the switch, "
	       "progress %llu, downtime %.1f ms, %s\n", name, t.nr_streams, FRAMES, t.back_at_pause,
	       t.back_after, (unsigned long long)BE->progress(c == GN_FAIL ? t.src : t.dst),
	       st.downtime_ns / 1e6, c == GN_FAIL ? err : gw_verify_name(st.verify));
	gw_session_free(ss);
	gw_session_free(ds);
	BE->destroy(t.src);
	BE->destroy(t.dst);
	for (unsigned i = 0; i < t.nr_nics; i++) {
		close(t.ps[i]);
		if (t.pd[i] >= 0)
			close(t.pd[i]);
	}
	pthread_mutex_destroy(&t.send_lock);
}

int main(void)
{
	char why[256] = "";

	if (BE->probe(why, sizeof(why)))
		test_skip("%s VM not usable here: %s", BE->name, why);
	run(GN_ONE, "l2fwd-1nic");
	run(GN_TWO, "l2fwd-2nic");
	run(GN_FAIL, "l2fwd-refused");
	run(GN_ECHO_IRQ, "echo-irq");
	TEST_EXIT();
}
