/* SPDX-License-Identifier: MIT */
/*
 * The NIC guests of the KVM VM (guests/l2fwd.c, guests/echo.c, on the
 * driver of common/vnet_drv.c) with one NIC on a socketpair
 * (net_backend_fd), migrated in process. "The network" is the socketpair's
 * other end: it sends gwpktgen's frames (bench/pgframe.h: numbered, a
 * CRC32C over the payload) at most RATE_PPS and at most WINDOW ahead of
 * their return, and checks what comes back.
 *
 * Invariants:
 * 1. l2fwd on kvm-log and on kvm-ring: every frame comes back once, its
 *    MACs swapped and its payload intact (none lost, none duplicated, none
 *    corrupt) while the VM migrates: after the source's pause LATE more
 *    frames reach the source's socketpair (carried by its NIC), then the
 *    network sends to the destination's. Frames flowed during the
 *    migration and come back from the destination after its resume; the
 *    RAM digest (source at pause, destination at resume) is verified; the
 *    guest's count of frames sent carries on from the source's (it ends at
 *    the number of frames).
 * 2. echo on both trackers, an interrupt pending across the migration: the
 *    echo guest halts between frames (each frame comes back only through an
 *    interrupt). At the source's pause, vCPUs stopped, the NIC's line is raised (a
 *    configuration interrupt): the guest cannot take it on the source, the
 *    state carries it (the device's InterruptStatus, the IOAPIC and LAPIC),
 *    and the destination's guest takes it: its handler acknowledged
 *    VIRTIO_MMIO_INT_CONFIG there (nic_isr_seen), which the source's never
 *    saw. Frames keep coming back, once each, as in 1.
 * 3. Either workload without a NIC is refused when the VM is made.
 * 4. l2fwd between two NICs (and two vCPUs, the second idle): each frame
 *    leaves once by the other NIC, MACs rewritten (source: the egress NIC's,
 *    destination: the configured one, or back to the sender), payload intact.
 * 5. A failure window with traffic (kvm-ring): the same l2fwd run to a destination
 *    without a NIC, which refuses the state (the reason names the NICs).
 *    The source resumes and forwards on: every frame still comes back
 *    once, the LATE ones carried by its NIC first, frames come back from it
 *    after its resume, and its count of frames sent ends at the number of
 *    frames.
 *
 * Timing never decides: rates are bounded, every wait gives up after
 * WAIT_NS (a hang guard), and nothing depends on when the guest runs (the
 * source's pause waits for FLOWED frames, so the downtime printed counts
 * that wait too).
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
#include "kvm_test.h"
#include "pgframe.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define VM_BYTES (16ull << 20)
#define FRAMES 2000u
#define MIGRATE_AT 200u		/* frames back before the migration starts */
#define WINDOW 16u		/* frames ahead of their return: under the guest's 64 buffers */
#define LATE 8u			/* frames that reach the source after its pause */
#define FLOWED 100u		/* frames back between the migration's start and the pause */
#define RATE_PPS 1000u		/* at most, whatever the guest could take */
#define FRAME_BYTES 60u		/* a 64-byte frame with its FCS */
#define RUN_ID 0x6b766d6eu
#define PAIR_FRAMES 300u
#define WAIT_NS (60ull * 1000000000u)

static const uint8_t net_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static const uint8_t guest_mac[6] = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x10 };

static struct {
	const char *workload;
	enum gw_dirty_backend_id tracker;
	struct vmm *src, *dst;
	struct gw_vm_ops src_ops, dst_ops;
	int ps, pd;			/* the network's ends: source's NIC, destination's */
	bool raise_at_pause;		/* case 2 */
	bool fail;			/* case 5: the destination has no NIC */

	atomic_int phase;		/* 0 to the source, 1 LATE more to it (paused), 2 switched */
	atomic_bool dst_loaded;		/* the destination applied its state: the switch learned its port */
	atomic_int cur;			/* the fd the network sends to */
	atomic_bool resumed;		/* the destination, or the source after a failure */
	unsigned seen[FRAMES];		/* network thread */
	atomic_uint back, sent, bad;
	unsigned back_after;		/* network thread: frames back after that resume */
	unsigned back_at_start, back_at_pause;
	uint64_t src_written_at_pause;
} t;

static uint64_t now_ns(void)
{
	return kvm_test_now_ns();
}

static void sleep_us(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };

	nanosleep(&ts, NULL);
}

/* ---- the network ---- */

static void drain(int fd)
{
	uint8_t f[2048];
	ssize_t n;

	while (fd >= 0 && (n = recv(fd, f, sizeof(f), MSG_DONTWAIT)) > 0) {
		uint64_t seq = 0;
		enum pgframe_verdict v = pgframe_check(f, (size_t)n, net_mac, RUN_ID, &seq);

		if (v == PGFRAME_NOT_OURS && n >= 14 && f[12] == 0x80 && f[13] == 0x35)
			continue;	/* RARP: the destination announced the NIC */
		if (v != PGFRAME_OK || seq >= FRAMES || memcmp(f + 6, guest_mac, 6) != 0) {
			atomic_fetch_add(&t.bad, 1);
			continue;
		}
		t.seen[seq]++;
		atomic_fetch_add(&t.back, 1);
		if (atomic_load(&t.resumed) && fd == (t.fail ? t.ps : t.pd))
			t.back_after++;
	}
}

static bool send_one(unsigned seq)
{
	uint8_t f[FRAME_BYTES];

	pgframe_build(f, guest_mac, net_mac, sizeof(f), RUN_ID, seq);
	pgframe_seal(f, sizeof(f), now_ns());
	return send(atomic_load(&t.cur), f, sizeof(f), MSG_DONTWAIT) == (ssize_t)sizeof(f);
}

static void *network_main(void *arg)
{
	uint64_t t_end = 0, next_ns = now_ns();
	unsigned late = 0;

	(void)arg;
	while (atomic_load(&t.back) < FRAMES) {
		unsigned seq = atomic_load(&t.sent);
		int phase = atomic_load(&t.phase);
		bool room = seq - atomic_load(&t.back) < WINDOW || (phase == 1 && late < LATE);

		drain(t.ps);
		drain(t.pd);
		if (phase == 1 && late == LATE) {
			if (!t.fail)
				atomic_store(&t.cur, t.pd);
			atomic_store(&t.phase, 2);
			phase = 2;	/* this pass's send goes by it too */
		}
		/*
		 * The switch learns the new port when the destination's NIC is
		 * loaded; what reached its tap before is a flood's copy (dropped).
		 */
		if (phase == 2 && !t.fail && !atomic_load(&t.dst_loaded))
			room = false;
		if (seq < FRAMES && room && now_ns() >= next_ns && send_one(seq)) {
			atomic_store(&t.sent, seq + 1);
			late += phase == 1;
			next_ns += 1000000000ull / RATE_PPS;
		}
		if (seq == FRAMES && !t_end)
			t_end = now_ns();
		if (t_end && now_ns() - t_end > WAIT_NS)
			break;
		sleep_us(100);
	}
	return NULL;
}

/* ---- the engine's callbacks, wrapped ---- */

/* The NIC's line, raised by the device itself (a configuration interrupt). */
static void raise_config_irq(struct vmm *vm)
{
	struct virtio_mmio *tr = virtio_net_transport(vmm_kvm.nic(vm, 0));

	virtio_mmio_lock(tr);
	virtio_mmio_config_changed(tr);
	virtio_mmio_unlock(tr);
}

static int src_pause(void *opaque)
{
	uint64_t t0 = now_ns();
	int ret;

	/* Frames flow during the precopy however fast it is: the pause waits for FLOWED of them. */
	while (atomic_load(&t.back) < t.back_at_start + FLOWED && now_ns() - t0 < WAIT_NS)
		sleep_us(200);
	ret = vmm_kvm.engine_ops->pause(opaque);

	t.back_at_pause = atomic_load(&t.back);
	t.src_written_at_pause = kvm_test_area(t.src, 0)->written;
	if (!ret && t.raise_at_pause)
		raise_config_irq(t.src);	/* vCPUs stopped: pending until the destination */
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
	return vmm_kvm.engine_ops->save_state(opaque, st);
}

static int dst_load_state(void *opaque, struct gw_state *st)
{
	int ret = vmm_kvm.engine_ops->load_state(opaque, st);

	if (!ret)
		atomic_store(&t.dst_loaded, true);
	return ret;
}

/* The destination's resume, or the source's after a failed migration. */
static int resume(void *opaque)
{
	int ret = vmm_kvm.engine_ops->resume(opaque);

	atomic_store(&t.resumed, ret == 0);
	return ret;
}

/* ---- one case ---- */

static struct vmm *new_vm(bool incoming, int fd, unsigned nr_nics)
{
	struct virtio_net_nic nic = { .mac_set = true };
	struct kvm_vm_opts opts = { .guest_recheck = 0 };
	struct vmm_config cfg = {
		.memory_bytes = incoming ? 0 : VM_BYTES, .nr_vcpus = 1, .fill = VMM_FILL_NONE,
		.seed = 3, .workload = incoming ? NULL : t.workload, .incoming = incoming, .dirty_backend = t.tracker,
		.nics = &nic, .nr_nics = nr_nics, .nic_fds = &fd,
	};
	char err[256] = "";
	struct vmm *vm;

	memcpy(nic.mac, guest_mac, sizeof(nic.mac));
	vm = vmm_kvm_create_opts(&cfg, &opts, err, sizeof(err));
	TEST_ASSERT(vm, "create: %s", err);
	return vm;
}

static void pair(int *mine, int *vm_end)
{
	int sv[2];

	TEST_ASSERT(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) == 0, "socketpair");
	*mine = sv[0];
	*vm_end = sv[1];
}

static void migrate(const char *name, struct gw_session *ss, struct gw_session *ds)
{
	struct gw_stats st = { .size = sizeof(st) };
	char url[128], err[512] = "";
	int sret, dret;

	snprintf(url, sizeof(url), "unix:/tmp/gw-kvm-net-%d.sock", (int)getpid());
	TEST_ASSERT(gw_incoming_start(ds, url) == 0, "%s: incoming %s", name, url);
	TEST_ASSERT(gw_session_set(ss, GW_PARAM_VERIFY, 1) == 0 &&
		    gw_session_set(ss, GW_PARAM_DIRTY_BACKEND, t.tracker) == 0 &&
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
	if (t.fail) {
		TEST_CHECK(sret != 0 && dret != 0 && strstr(err, "NIC"),
			   "%s: the migration did not fail on the NIC count (%d, %d: %s)", name, sret,
			   dret, err);
		TEST_CHECK(vmm_kvm.state(t.src) == VMM_RUNNING, "%s: source %s", name,
			   vmm_state_name(vmm_kvm.state(t.src)));
		printf("%s: refused (%s), the source runs on\n", name, err);
		return;
	}
	TEST_ASSERT(sret == 0 && dret == 0, "%s: source %d (%s), destination %d", name, sret, err, dret);
	TEST_CHECK(st.verified, "%s: RAM digest not verified (%s)", name, gw_verify_name(st.verify));
	printf("%s: migrated on %s, downtime %.1f ms, digest %s\n", name, st.dirty_backend,
	       st.downtime_ns / 1e6, gw_verify_name(st.verify));
}

static void check_frames(const char *name)
{
	unsigned lost = 0, dup = 0;

	for (unsigned i = 0; i < FRAMES; i++) {
		lost += t.seen[i] == 0;
		dup += t.seen[i] > 1;
	}
	TEST_CHECK(!lost && !dup && !atomic_load(&t.bad), "%s: %u lost, %u duplicated, %u bad", name,
		   lost, dup, atomic_load(&t.bad));
	TEST_CHECK(t.back_at_pause >= t.back_at_start + FLOWED && t.back_at_pause < FRAMES,
		   "%s: no frame flowed during the migration (%u back at its start, %u at the pause)",
		   name, t.back_at_start, t.back_at_pause);
	TEST_CHECK(t.back_after > 0, "%s: no frame came back from the %s after its resume", name,
		   t.fail ? "source" : "destination");
}

static void check_guest(const char *name)
{
	struct vmm *on = t.fail ? t.src : t.dst;	/* where the guest runs at the end */
	const struct gw_vcpu_area *sa = kvm_test_area(t.src, 0), *da = kvm_test_area(on, 0);
	struct kvm_guest_report rep;
	uint64_t t0 = now_ns();

	/* The count is published after the frames it counts left. */
	while (*(volatile const uint64_t *)&da->written < FRAMES && now_ns() - t0 < WAIT_NS)
		sleep_us(200);
	vmm_kvm_guest_report(on, &rep);
	TEST_CHECK(rep.panics == 0 && da->state == GW_VCPU_RUNNING, "%s: destination guest state %llu, %llu panics",
		   name, (unsigned long long)da->state, (unsigned long long)rep.panics);
	/* The source's count at its pause may lag the frames that left (it follows a pass). */
	TEST_CHECK(da->written == FRAMES && vmm_kvm.progress(on) == FRAMES &&
		   t.src_written_at_pause > 0 && t.src_written_at_pause < FRAMES,
		   "%s: the destination's guest counts %llu frames sent in all (progress %llu), the "
		   "source's %llu at its pause", name, (unsigned long long)da->written,
		   (unsigned long long)vmm_kvm.progress(on), (unsigned long long)t.src_written_at_pause);
	if (!t.raise_at_pause || t.fail)
		return;
	TEST_CHECK(!(sa->nic_isr_seen & VIRTIO_MMIO_INT_CONFIG),
		   "%s: the source's guest took the interrupt raised at its pause", name);
	TEST_CHECK(da->nic_isr_seen & VIRTIO_MMIO_INT_CONFIG,
		   "%s: the destination's guest never took the pending interrupt (saw %#llx)", name,
		   (unsigned long long)da->nic_isr_seen);
	printf("%s: interrupts taken: %llu on the source, %llu in all on the destination\n", name,
	       (unsigned long long)sa->ticks, (unsigned long long)da->ticks);
}

static void run(const char *workload, enum gw_dirty_backend_id tracker, bool raise_at_pause,
		bool fail)
{
	struct gw_vm_info none = { .size = sizeof(none), .nr_blocks = 0, .kvm_vm_fd = -1 };
	struct gw_session *ss, *ds;
	pthread_t net_thr;
	char name[64];
	int vm_end;
	uint64_t t0;

	memset(&t, 0, sizeof(t));
	t.workload = workload;
	t.tracker = tracker;
	t.raise_at_pause = raise_at_pause;
	t.fail = fail;
	snprintf(name, sizeof(name), "%s-%s%s", workload,
		 tracker == GW_DIRTY_KVM_LOG ? "kvm-log" : "kvm-ring", fail ? "-refused" : "");
	pair(&t.ps, &vm_end);
	t.src = new_vm(false, vm_end, 1);
	pair(&t.pd, &vm_end);
	t.dst = new_vm(true, vm_end, fail ? 0 : 1);
	atomic_store(&t.cur, t.ps);
	TEST_ASSERT(vmm_kvm.start(t.src) == 0, "%s: start", name);

	t.src_ops = *vmm_kvm.engine_ops;
	t.src_ops.pause = src_pause;
	t.src_ops.save_state = src_save_state;
	t.src_ops.resume = resume;
	t.dst_ops = *vmm_kvm.engine_ops;
	t.dst_ops.resume = resume;
	t.dst_ops.load_state = dst_load_state;
	ss = gw_session_new(GW_ROLE_SOURCE, vmm_kvm.info(t.src), &t.src_ops, t.src);
	ds = gw_session_new(GW_ROLE_DEST, &none, &t.dst_ops, t.dst);
	TEST_ASSERT(ss && ds, "sessions");
	vmm_kvm.set_session(t.src, ss);

	TEST_ASSERT(pthread_create(&net_thr, NULL, network_main, NULL) == 0, "network thread");
	t0 = now_ns();
	while (atomic_load(&t.back) < MIGRATE_AT && now_ns() - t0 < WAIT_NS)
		kvm_test_sleep_ms(1);
	TEST_ASSERT(atomic_load(&t.back) >= MIGRATE_AT, "%s: frames do not flow (%u back, %u bad)",
		    name, atomic_load(&t.back), atomic_load(&t.bad));
	t.back_at_start = atomic_load(&t.back);
	printf("%s: %u frames back in %.2f s before the migration\n", name, t.back_at_start,
	       (now_ns() - t0) / 1e9);
	migrate(name, ss, ds);
	pthread_join(net_thr, NULL);	/* the rest of the frames, after the migration */
	vmm_kvm.set_session(t.src, NULL);
	if (!fail)
		vmm_kvm.set_postmigrate(t.src);

	check_frames(name);
	check_guest(name);
	printf("%s: %u frames back once each (%u at the migration's start, %u at the pause, "
	       "%u after the resume)\n", name, FRAMES, t.back_at_start, t.back_at_pause, t.back_after);
	gw_session_free(ss);
	gw_session_free(ds);
	vmm_kvm.destroy(t.src);
	vmm_kvm.destroy(t.dst);
	close(t.ps);
	close(t.pd);
}

/* 3. Either workload without a NIC is refused at creation, with a reason naming --nic. */
static void refuse_without_nic(const char *workload)
{
	struct vmm_config cfg = {
		.memory_bytes = VM_BYTES, .nr_vcpus = 1, .fill = VMM_FILL_NONE, .workload = workload,
	};
	char err[256] = "";
	struct vmm *vm = vmm_kvm_create_opts(&cfg, NULL, err, sizeof(err));

	TEST_CHECK(!vm && errno == EINVAL && strstr(err, "--nic"), "%s without a NIC: %s", workload,
		   vm ? "made" : err);
	vmm_kvm.destroy(vm);
}

/*
 * 4. l2fwd between two NICs: frames into NIC 0 leave by NIC 1 with its MAC
 * as source and dst1 as destination; frames into NIC 1 leave by NIC 0 with
 * its MAC as source, back to their sender (no dst0). Payloads intact.
 */
static unsigned pair_receive(int fd, const uint8_t dst[6], const uint8_t src[6], unsigned *seen)
{
	uint8_t f[2048];
	unsigned bad = 0;
	ssize_t n;

	while ((n = recv(fd, f, sizeof(f), MSG_DONTWAIT)) > 0) {
		uint64_t seq;

		if (pgframe_check(f, (size_t)n, dst, RUN_ID, &seq) != PGFRAME_OK || seq >= PAIR_FRAMES ||
		    memcmp(f + 6, src, 6) != 0) {
			bad += !(f[12] == 0x80 && f[13] == 0x35);	/* RARPs are not ours */
			continue;
		}
		seen[seq]++;
	}
	return bad;
}

static void forward_pair(void)
{
	static const uint8_t mac0[6] = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x30 };
	static const uint8_t mac1[6] = { 0x52, 0x54, 0x00, 0x67, 0x77, 0x31 };
	static const uint8_t dst1[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x0d };
	static const uint8_t sender1[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x0b };
	struct virtio_net_nic nics[2] = { { .mac_set = true }, { .mac_set = true } };
	unsigned seen01[PAIR_FRAMES] = { 0 }, seen10[PAIR_FRAMES] = { 0 }, bad = 0, ok = 0;
	int fds[2], net[2];
	char err[256] = "";
	uint64_t t0 = now_ns();
	struct vmm *vm;

	memcpy(nics[0].mac, mac0, 6);
	memcpy(nics[1].mac, mac1, 6);
	pair(&net[0], &fds[0]);
	pair(&net[1], &fds[1]);
	struct vmm_config cfg = {
		.memory_bytes = VM_BYTES, .nr_vcpus = 2, .fill = VMM_FILL_NONE,
		.workload = "l2fwd:dst1=02:00:00:00:00:0d", .nics = nics, .nr_nics = 2, .nic_fds = fds,
	};
	vm = vmm_kvm_create_opts(&cfg, NULL, err, sizeof(err));
	TEST_ASSERT(vm && vmm_kvm.start(vm) == 0, "pair: %s", err);
	for (unsigned seq = 0; ok < 2 * PAIR_FRAMES && now_ns() - t0 < WAIT_NS; sleep_us(500)) {
		uint8_t f[FRAME_BYTES];

		if (seq < PAIR_FRAMES && seq - ok / 2 < WINDOW / 2) {
			pgframe_build(f, mac0, net_mac, sizeof(f), RUN_ID, seq);
			pgframe_seal(f, sizeof(f), now_ns());
			TEST_ASSERT(send(net[0], f, sizeof(f), 0) == sizeof(f), "send to NIC 0");
			pgframe_build(f, mac1, sender1, sizeof(f), RUN_ID, seq);
			pgframe_seal(f, sizeof(f), now_ns());
			TEST_ASSERT(send(net[1], f, sizeof(f), 0) == sizeof(f), "send to NIC 1");
			seq++;
		}
		bad += pair_receive(net[1], dst1, mac1, seen01);
		bad += pair_receive(net[0], sender1, mac0, seen10);
		ok = 0;
		for (unsigned i = 0; i < PAIR_FRAMES; i++)
			ok += (seen01[i] == 1) + (seen10[i] == 1);
	}
	TEST_CHECK(ok == 2 * PAIR_FRAMES && !bad, "pair: %u of %u frames forwarded once, %u bad", ok,
		   2 * PAIR_FRAMES, bad);
	TEST_CHECK(vmm_kvm.progress(vm) >= 2 * PAIR_FRAMES, "pair: progress %llu",
		   (unsigned long long)vmm_kvm.progress(vm));
	printf("pair: %u frames 0->1 and 1->0, MACs rewritten\n", PAIR_FRAMES);
	vmm_kvm.destroy(vm);
	close(net[0]);
	close(net[1]);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(600);
	refuse_without_nic("l2fwd");
	refuse_without_nic("echo");
	forward_pair();
	run("l2fwd", GW_DIRTY_KVM_LOG, false, false);
	run("l2fwd", GW_DIRTY_KVM_RING, false, false);
	run("echo", GW_DIRTY_KVM_LOG, true, false);
	run("echo", GW_DIRTY_KVM_RING, true, false);
	run("l2fwd", GW_DIRTY_KVM_RING, false, true);
	TEST_EXIT();
}
