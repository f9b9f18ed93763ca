/* SPDX-License-Identifier: MIT */
/*
 * A VM with one virtio-net NIC (vm_base.c's devices), migrated in process
 * while frames flow: the soft VM on uffd-wp, the KVM VM on kvm-log. The VM
 * runs idle (test_vm_guestnet.c has the guest's own driver): the fake
 * driver of tests/unit/dev/netdrv.c runs on a test thread against the VM's RAM (at DRV_GPA) and its MMIO
 * bus (the register code a KVM_EXIT_MMIO reaches), parked around
 * the pause like a vCPU (the engine ops are wrapped for that). "The
 * network" is the other end of the NIC's socketpair (net_backend_fd): it
 * sends numbered frames, at most WINDOW ahead of their echoes, the driver
 * echoes every frame it receives, the network counts the echoes.
 *
 * Invariants:
 * 1. migrate: after the pause LATE more frames reach the source's
 *    socketpair (the switch has not learned the new port yet), then the
 *    network sends to the destination's. Every frame reaches the guest
 *    once and comes back once (none lost, none duplicated, none corrupt):
 *    what the source's device had read after its stop is carried, the
 *    rest of the rings migrate with RAM. The RAM digest (source at pause,
 *    destination at resume) is verified.
 * 2. fail: a destination without a NIC refuses the state with a reason
 *    naming the NIC count; the source resumes and its NIC carries on where
 *    it stopped: again every frame once, both ways.
 * 3. unreported (KVM only): the same migration as 1 with no session handed
 *    to the VM (set_session not called), so its NIC's writes reach no
 *    tracker: the RAM digests differ. What 1's verified digest proves.
 *
 * Timing never decides: every wait gives up after 10-20 s.
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
#include "netdrv.h"
#include "test_util.h"
#include "vmm.h"

TEST_DEFINE_FAILURES;

/*
 * Built twice: the soft VM (suite unit, uffd-wp: it sees the device's
 * writes through the RAM's mapping too) and with NIC_TEST_KVM the KVM VM
 * (suite kvm, kvm-log: KVM never sees a device write, so the verified
 * digest says every one was reported). The driver's RAM: somewhere the
 * idle guest never touches (KVM: its ram block, the sys block holds the
 * guest's image and tables).
 */
#ifdef NIC_TEST_KVM
#define BE (&vmm_kvm)
#define DRV_GPA (0x100000000ull + (16ull << 20))
#define TRACKER GW_DIRTY_KVM_LOG
#define TRACKER_NAME "kvm-log"
#else
#define BE (&vmm_soft)
#define DRV_GPA NETDRV_RAM_GPA
#define TRACKER GW_DIRTY_UFFD_WP
#define TRACKER_NAME "uffd-wp"
#endif

#define FEATURES (VIRTIO_FEATURE(VIRTIO_F_VERSION_1) | VIRTIO_FEATURE(VIRTIO_NET_F_MAC) | \
		  VIRTIO_FEATURE(VIRTIO_NET_F_STATUS) | VIRTIO_FEATURE(VIRTIO_RING_F_EVENT_IDX))
#define VM_BYTES (32ull << 20)
#define FRAMES 6000u
#define MIGRATE_AT 300u		/* echoes before the migration starts */
#define WINDOW 128u		/* frames ahead of their echoes: under the carry FIFO's 256 */
#define LATE 32u		/* frames that reach the source after its pause */
#define FRAME_BYTES 64u
#define WAIT_NS (20ull * 1000000000u)

static struct {
	struct vmm *src, *dst;
	struct gw_vm_ops src_ops, dst_ops;
	int ps, pd;			/* the network's ends: source's NIC, destination's (-1) */
	bool fail;			/* case 2: the destination has no NIC */
	atomic_bool abort_net;		/* case 3: the network gives up at once */

	/* The driver thread ("the guest"), parked under lock. */
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool park_req, parked, stop;	/* lock */
	struct netdrv drv;		/* the driver thread's; re-attached while parked */
	unsigned rx_seen[FRAMES];	/* driver thread: frames the guest received */
	atomic_uint rx_bad;
	atomic_uint rx_total;

	/* The network thread. */
	atomic_int phase;		/* 0 to the source, 1 LATE more to it (paused), 2 switched */
	atomic_int cur;			/* the fd it sends to */
	unsigned echo_seen[FRAMES];	/* network thread */
	atomic_uint echoed, sent, echo_bad;
	atomic_uint announced;		/* RARPs from the destination's NIC (vm_announce.c) */
	unsigned echoed_at_start, echoed_at_pause;	/* frames flowed across the migration */
} t;

static uint64_t now_ns(void)
{
	return netdrv_now_ns();
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

static void *ram_of(struct vmm *vm)
{
	const struct gw_vm_info *vi = BE->info(vm);

	for (unsigned i = 0; i < vi->nr_blocks; i++) {
		const struct gw_ram_block *b = &vi->blocks[i];

		if (b->gpa <= DRV_GPA && DRV_GPA + NETDRV_RAM_BYTES <= b->gpa + b->size_bytes)
			return (uint8_t *)b->host + (DRV_GPA - b->gpa);
	}
	TEST_ASSERT(0, "no RAM at the driver's %#llx", (unsigned long long)DRV_GPA);
	return NULL;
}

#ifdef NIC_TEST_KVM
/* The driver's own writes, which KVM would log for a vCPU: reported as such (source only). */
static struct gw_session *drv_session;

static void drv_wrote(void *opaque, uint64_t gpa, uint64_t len)
{
	(void)opaque;
	if (__atomic_load_n(&drv_session, __ATOMIC_ACQUIRE))
		gw_session_mark_dirty(drv_session, gpa, len);
}
#endif

static void attach(struct vmm *vm)
{
	struct virtio_net *n = BE->nic(vm, 0);

	TEST_ASSERT(n, "the VM has no NIC");
	netdrv_attach(&t.drv, ram_of(vm), DRV_GPA, BE->mmio_bus(vm), virtio_net_base_gpa(n));
#ifdef NIC_TEST_KVM
	t.drv.wrote = drv_wrote;
#endif
}

/* ---- the guest ---- */

static void *driver_main(void *arg)
{
	uint8_t frame[NETDRV_BUF_BYTES], pending[NETDRV_BUF_BYTES];
	int pending_len = 0;

	(void)arg;
	for (;;) {
		int r;

		pthread_mutex_lock(&t.lock);
		while (t.park_req && !t.stop) {
			t.parked = true;
			pthread_cond_broadcast(&t.cond);
			pthread_cond_wait(&t.cond, &t.lock);
		}
		t.parked = false;
		if (t.stop) {
			pthread_mutex_unlock(&t.lock);
			return NULL;
		}
		pthread_mutex_unlock(&t.lock);
		netdrv_tx_reclaim(&t.drv);
		if (pending_len) {
			if (netdrv_tx(&t.drv, pending, (uint32_t)pending_len) == 0)
				pending_len = 0;
			continue;
		}
		r = netdrv_rx(&t.drv, frame, sizeof(frame));
		if (r < 0) {
			atomic_fetch_add(&t.rx_bad, 1);
			continue;
		}
		if (r == 0) {
			sleep_us(50);
			continue;
		}
		int64_t seq = netdrv_frame_check(frame, (uint32_t)r);

		if (seq < 0 || seq >= FRAMES) {
			atomic_fetch_add(&t.rx_bad, 1);
			continue;
		}
		t.rx_seen[seq]++;
		atomic_fetch_add(&t.rx_total, 1);
		memcpy(pending, frame, (size_t)r);
		pending_len = r;
	}
}

static void park(bool on)
{
	uint64_t t0 = now_ns();

	pthread_mutex_lock(&t.lock);
	t.park_req = on;
	pthread_cond_broadcast(&t.cond);
	while (on && !t.parked && now_ns() - t0 < WAIT_NS) {
		pthread_mutex_unlock(&t.lock);
		sleep_us(100);
		pthread_mutex_lock(&t.lock);
	}
	TEST_ASSERT(!on || t.parked, "the driver thread did not park");
	pthread_mutex_unlock(&t.lock);
}

/* ---- the network ---- */

static void drain(int fd)
{
	uint8_t f[NETDRV_BUF_BYTES];
	ssize_t n;

	while (fd >= 0 && (n = recv(fd, f, sizeof(f), MSG_DONTWAIT)) > 0) {
		int64_t seq = netdrv_frame_check(f, (uint32_t)n);

		if (n >= 14 && f[12] == 0x80 && f[13] == 0x35) {	/* RARP: the moved NIC announced */
			atomic_fetch_add(&t.announced, 1);
			continue;
		}
		if (seq < 0 || seq >= FRAMES) {
			atomic_fetch_add(&t.echo_bad, 1);
			continue;
		}
		t.echo_seen[seq]++;
		atomic_fetch_add(&t.echoed, 1);
	}
}

static void *network_main(void *arg)
{
	uint8_t f[NETDRV_BUF_BYTES];
	unsigned late = 0;
	uint64_t t_end = 0;

	(void)arg;
	while (atomic_load(&t.echoed) < FRAMES && !atomic_load(&t.abort_net)) {
		unsigned seq = atomic_load(&t.sent);
		int phase = atomic_load(&t.phase);
		bool room = seq - atomic_load(&t.echoed) < WINDOW || (phase == 1 && late < LATE);

		drain(t.ps);
		drain(t.pd);
		if (phase == 1 && late == LATE) {
			if (!t.fail)
				atomic_store(&t.cur, t.pd);
			atomic_store(&t.phase, 2);
		}
		if (seq < FRAMES && room) {
			uint32_t len = netdrv_frame_make(f, seq, FRAME_BYTES);

			if (send(atomic_load(&t.cur), f, len, MSG_DONTWAIT) == (ssize_t)len) {
				atomic_store(&t.sent, seq + 1);
				late += phase == 1;
			}
		}
		if (seq == FRAMES && !t_end)
			t_end = now_ns();
		if (t_end && now_ns() - t_end > WAIT_NS)
			break;
		sleep_us(150);
	}
	return NULL;
}

/* ---- the engine's callbacks, wrapped ---- */

static int src_pause(void *opaque)
{
	int ret;

	park(true);		/* the guest stops first, as its vCPUs would */
	t.echoed_at_pause = atomic_load(&t.echoed);
	ret = BE->engine_ops->pause(opaque);
	atomic_store(&t.phase, 1);
	return ret;
}

/* Everything the network sent the source is in its NIC (the carry FIFO) before the save. */
static int src_save_state(void *opaque, struct gw_state *st)
{
	uint64_t t0 = now_ns();
	int outq = 1;

	while (atomic_load(&t.phase) != 2 && now_ns() - t0 < WAIT_NS)
		sleep_us(100);
	while (now_ns() - t0 < WAIT_NS && !ioctl(t.ps, SIOCOUTQ, &outq) && outq > 0)
		sleep_us(100);
	TEST_CHECK(atomic_load(&t.phase) == 2 && outq == 0, "late frames not in the NIC: phase %d outq %d",
		   atomic_load(&t.phase), outq);
	return BE->engine_ops->save_state(opaque, st);
}

static int src_resume(void *opaque)
{
	int ret = BE->engine_ops->resume(opaque);

	if (!ret)
		park(false);	/* a failed migration: the guest runs on here */
	return ret;
}

static int dst_resume(void *opaque)
{
	int ret = BE->engine_ops->resume(opaque);

	if (!ret) {
#ifdef NIC_TEST_KVM
		__atomic_store_n(&drv_session, NULL, __ATOMIC_RELEASE);	/* a destination's: nothing */
#endif
		attach(t.dst);	/* parked: the guest continues over there */
		park(false);
	}
	return ret;
}

static struct vmm *new_vm(bool incoming, unsigned nr_nics, int fd)
{
	struct virtio_net_nic nic = { .mac = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x00 }, .mac_set = true };
	int fds[1] = { fd };
	struct vmm_config cfg = {
		.memory_bytes = incoming ? 0 : VM_BYTES, .nr_vcpus = 1, .fill = VMM_FILL_MIX,
		.seed = 3, .workload = "idle", .incoming = incoming, .dirty_backend = TRACKER, .nics = &nic,
		.nr_nics = nr_nics, .nic_fds = fds,
	};
	char err[256] = "";
	struct vmm *vm = BE->create(&cfg, err, sizeof(err));

	TEST_ASSERT(vm, "BE->create: %s", err);
	return vm;
}

static void pair(int *mine, int *vm_end)
{
	int sv[2];

	TEST_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	*mine = sv[0];
	*vm_end = sv[1];
}

enum nic_case { NIC_MIGRATE, NIC_FAIL, NIC_UNREPORTED };

static void run(enum nic_case c)
{
	bool fail = c == NIC_FAIL;
	struct gw_vm_info none = { .size = sizeof(none), .nr_blocks = 0, .kvm_vm_fd = -1 };
	struct gw_stats st = { .size = sizeof(st) };
	struct virtio_net_stats ns_src, ns_dst;
	const char *name = fail ? "fail" : c == NIC_UNREPORTED ? "unreported" : "migrate";
	struct gw_session *ss, *ds;
	pthread_t drv_thr, net_thr;
	char url[128], err[512] = "";
	unsigned lost = 0, dup = 0, echo_lost = 0, echo_dup = 0;
	int vm_end, sret, dret;
	uint64_t t0;

	memset(&t, 0, sizeof(t));
	pthread_mutex_init(&t.lock, NULL);
	pthread_cond_init(&t.cond, NULL);
	t.fail = fail;
	t.pd = -1;
	pair(&t.ps, &vm_end);
	t.src = new_vm(false, 1, vm_end);
	if (fail) {
		t.dst = new_vm(true, 0, -1);
	} else {
		pair(&t.pd, &vm_end);
		t.dst = new_vm(true, 1, vm_end);
	}
	atomic_store(&t.cur, t.ps);
	memset(ram_of(t.src), 0, NETDRV_RAM_BYTES);	/* the guest clears its rings and buffers */
	attach(t.src);
	TEST_ASSERT(netdrv_setup(&t.drv, FEATURES) & VIRTIO_STATUS_DRIVER_OK, "%s: negotiation", name);
	netdrv_post_rx_all(&t.drv);
	TEST_ASSERT(BE->start(t.src) == 0, "%s: start", name);

	t.src_ops = *BE->engine_ops;
	t.src_ops.pause = src_pause;
	t.src_ops.save_state = src_save_state;
	t.src_ops.resume = src_resume;
	t.dst_ops = *BE->engine_ops;
	t.dst_ops.resume = dst_resume;
	ss = gw_session_new(GW_ROLE_SOURCE, BE->info(t.src), &t.src_ops, t.src);
	ds = gw_session_new(GW_ROLE_DEST, &none, &t.dst_ops, t.dst);
	TEST_ASSERT(ss && ds, "sessions");
	if (c != NIC_UNREPORTED)
		BE->set_session(t.src, ss);
#ifdef NIC_TEST_KVM
	__atomic_store_n(&drv_session, ss, __ATOMIC_RELEASE);
#endif

	TEST_ASSERT(pthread_create(&drv_thr, NULL, driver_main, NULL) == 0, "driver thread");
	TEST_ASSERT(pthread_create(&net_thr, NULL, network_main, NULL) == 0, "network thread");
	t0 = now_ns();
	while (atomic_load(&t.echoed) < MIGRATE_AT && now_ns() - t0 < WAIT_NS)
		sleep_us(1000);
	TEST_ASSERT(atomic_load(&t.echoed) >= MIGRATE_AT, "%s: frames do not flow (%u echoed)", name,
		    atomic_load(&t.echoed));

	t.echoed_at_start = atomic_load(&t.echoed);
	snprintf(url, sizeof(url), "unix:/tmp/gw-soft-nic-%d.sock", (int)getpid());
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
	gw_session_stats(ss, &st);
	gw_session_error(ss, err, sizeof(err));
	if (fail) {
		TEST_CHECK(sret != 0 && dret != 0, "%s: the migration did not fail (%d, %d)", name, sret, dret);
		TEST_CHECK(strstr(err, "NIC") != NULL, "%s: the reason does not name the NICs: %s", name, err);
		TEST_CHECK(BE->state(t.src) == VMM_RUNNING, "%s: source %s", name,
			   vmm_state_name(BE->state(t.src)));
	} else if (c == NIC_UNREPORTED) {
		TEST_CHECK(st.verify == GW_VERIFY_MISMATCH, "%s: digest %s, expected a mismatch", name,
			   gw_verify_name(st.verify));
		atomic_store(&t.abort_net, true);	/* the guest's rings may be torn now */
	} else {
		TEST_ASSERT(sret == 0 && dret == 0, "%s: source %d (%s), destination %d", name, sret, err, dret);
		TEST_CHECK(st.verified, "%s: RAM digest not verified (%s)", name, gw_verify_name(st.verify));
		TEST_CHECK(!strcmp(st.dirty_backend, TRACKER_NAME), "%s: tracker %s", name, st.dirty_backend);
		TEST_CHECK(BE->state(t.dst) == VMM_RUNNING, "%s: destination %s", name,
			   vmm_state_name(BE->state(t.dst)));
	}
	/* The rest of the frames, after the migration. */
	pthread_join(net_thr, NULL);
	pthread_mutex_lock(&t.lock);
	t.stop = true;
	pthread_cond_broadcast(&t.cond);
	pthread_mutex_unlock(&t.lock);
	pthread_join(drv_thr, NULL);
	BE->set_session(t.src, NULL);
#ifdef NIC_TEST_KVM
	__atomic_store_n(&drv_session, NULL, __ATOMIC_RELEASE);
#endif
	if (!fail)
		BE->set_postmigrate(t.src);
	if (c == NIC_UNREPORTED) {
		printf("%s: digest %s without the device's reports\n", name, gw_verify_name(st.verify));
		goto out;
	}

	for (unsigned i = 0; i < FRAMES; i++) {
		lost += t.rx_seen[i] == 0;
		dup += t.rx_seen[i] > 1;
		echo_lost += t.echo_seen[i] == 0;
		echo_dup += t.echo_seen[i] > 1;
	}
	TEST_CHECK(!lost && !dup && !atomic_load(&t.rx_bad), "%s: guest: %u lost, %u duplicated, %u bad",
		   name, lost, dup, atomic_load(&t.rx_bad));
	TEST_CHECK(!echo_lost && !echo_dup && !atomic_load(&t.echo_bad),
		   "%s: network: %u lost, %u duplicated, %u bad", name, echo_lost, echo_dup,
		   atomic_load(&t.echo_bad));
	virtio_net_get_stats(BE->nic(t.src, 0), &ns_src);
	memset(&ns_dst, 0, sizeof(ns_dst));
	if (!fail) {
		virtio_net_get_stats(BE->nic(t.dst, 0), &ns_dst);
		TEST_CHECK(ns_src.carried_out == ns_dst.carried_in, "%s: %llu frames carried out, %llu in",
			   name, (unsigned long long)ns_src.carried_out,
			   (unsigned long long)ns_dst.carried_in);
	}
	TEST_CHECK(t.echoed_at_pause > t.echoed_at_start && t.echoed_at_pause < FRAMES,
		   "%s: no frame flowed during the migration (%u echoed at its start, %u at the pause)",
		   name, t.echoed_at_start, t.echoed_at_pause);
	printf("%s: %u frames each way (%u echoed at the start, %u at the pause), %llu carried, "
	       "%u announced, downtime %.1f ms, %s\n", name, FRAMES, t.echoed_at_start,
	       t.echoed_at_pause, (unsigned long long)ns_src.carried_out, atomic_load(&t.announced),
	       st.downtime_ns / 1e6,
	       fail ? err : gw_verify_name(st.verify));
out:
	gw_session_free(ss);
	gw_session_free(ds);
	BE->destroy(t.src);
	BE->destroy(t.dst);
	close(t.ps);
	if (t.pd >= 0)
		close(t.pd);
	pthread_mutex_destroy(&t.lock);
	pthread_cond_destroy(&t.cond);
}

int main(void)
{
	char why[256] = "";

	if (BE->probe(why, sizeof(why)))
		test_skip("%s VM not usable here: %s", BE->name, why);
	run(NIC_MIGRATE);
	run(NIC_FAIL);
#ifdef NIC_TEST_KVM
	run(NIC_UNREPORTED);	/* uffd-wp sees the device's writes through the mapping anyway */
#endif
	TEST_EXIT();
}
