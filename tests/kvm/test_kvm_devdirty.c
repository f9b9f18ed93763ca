/* SPDX-License-Identifier: MIT */
/*
 * Invariant: KVM's trackers (kvm-log, kvm-ring) see vCPU writes only; a
 * "device" that writes guest RAM from a host thread through the VMM's
 * mapping (as a virtio I/O thread fills receive buffers) reaches the
 * destination when it reports with gw_session_mark_dirty, and only then.
 * The device rewrites 48 pages of the guest's RAM block (which the idle
 * guest never touches) while precopy runs, and once more in the VM's pause
 * hook after the vCPUs stopped (completing its in-flight work, before the
 * final harvest). Reporting: the RAM digests match and the device's pages
 * are equal on both sides. Reporting off (the test's knob): the digests
 * mismatch and the device's pages are stale on the destination.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "kvm_test.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define DEV_FIRST 1000u			/* pages DEV_FIRST + 3 * i of the guest RAM block */
#define DEV_PAGES 48u

/* The device: one per test process, as the VM ops' opaque is the VMM's. */
static struct {
	struct vmm *vm;			/* set before the session starts */
	struct gw_session *s;
	bool report;			/* the knob */
	uint64_t gen;			/* device thread, then the pause hook (after stop) */
	int stop, stopped;		/* atomics: the pause hook's handshake */
	int mark_err;			/* atomic */
	pthread_t thr;
} dev;

static uint64_t dev_gpa(unsigned i)
{
	return GW_GUEST_RAM_GPA + (uint64_t)(DEV_FIRST + 3 * i) * GW_GUEST_PAGE_BYTES;
}

/* One write of device page @i through the VMM's mapping (KVM never sees it), then its report. */
static void dev_write(unsigned i)
{
	uint64_t *p = vmm_kvm_gpa_to_host(dev.vm, dev_gpa(i), GW_GUEST_PAGE_BYTES);
	int ret;

	TEST_ASSERT(p, "device page %u", i);
	dev.gen++;
	for (unsigned k = 0; k < GW_GUEST_PAGE_BYTES / 8; k++)
		p[k] = dev.gen << 16 | i;
	if (!dev.report)
		return;
	ret = gw_session_mark_dirty(dev.s, dev_gpa(i), GW_GUEST_PAGE_BYTES);
	if (ret)
		__atomic_store_n(&dev.mark_err, ret, __ATOMIC_RELAXED);
}

static void *dev_main(void *arg)
{
	unsigned i = 0;

	(void)arg;
	while (!__atomic_load_n(&dev.stop, __ATOMIC_ACQUIRE)) {
		dev_write(i++ % DEV_PAGES);
		usleep(500);
	}
	__atomic_store_n(&dev.stopped, 1, __ATOMIC_RELEASE);
	return NULL;
}

static struct gw_vm_ops ops;		/* the KVM VMM's, with dev_pause */

/* The VMM's pause: vCPUs, then the device, which completes its work and reports it. */
static int dev_pause(void *opaque)
{
	int ret = vmm_kvm.engine_ops->pause(opaque);

	if (ret)
		return ret;
	__atomic_store_n(&dev.stop, 1, __ATOMIC_RELEASE);
	pthread_join(dev.thr, NULL);
	for (unsigned i = 0; i < DEV_PAGES; i++)
		dev_write(i);
	return 0;
}

static unsigned stale_pages(struct vmm *src, struct vmm *dst)
{
	unsigned n = 0;

	for (unsigned i = 0; i < DEV_PAGES; i++) {
		const void *a = vmm_kvm_gpa_to_host(src, dev_gpa(i), GW_GUEST_PAGE_BYTES);
		const void *b = vmm_kvm_gpa_to_host(dst, dev_gpa(i), GW_GUEST_PAGE_BYTES);

		TEST_ASSERT(a && b, "device page %u on both sides", i);
		n += memcmp(a, b, GW_GUEST_PAGE_BYTES) != 0;
	}
	return n;
}

static void run(enum kvm_dirty_mode mode, const char *backend, bool report)
{
	struct kvm_vm_opts opts = { .dirty = mode, .guest_recheck = -1, .tick_ns = 2000000 };
	struct vmm *src = kvm_test_vm(32 << 20, 2, "idle", VMM_FILL_MIX, &opts);
	struct vmm *dst = kvm_test_vm(0, 2, NULL, VMM_FILL_NONE, &opts);
	struct gw_vm_info none = { .size = sizeof(none), .nr_blocks = 0, .kvm_vm_fd = -1 };
	struct gw_stats st = { .size = sizeof(st) }, dt = { .size = sizeof(dt) };
	struct gw_session *ss, *ds;
	char url[128];
	unsigned stale;

	TEST_ASSERT(vmm_kvm.start(src) == 0, "start");
	kvm_test_wait_progress(src, 10);
	ops = *vmm_kvm.engine_ops;
	ops.pause = dev_pause;
	ds = gw_session_new(GW_ROLE_DEST, &none, vmm_kvm.engine_ops, dst);
	ss = gw_session_new(GW_ROLE_SOURCE, vmm_kvm.info(src), &ops, src);
	TEST_ASSERT(ds && ss, "sessions");
	memset(&dev, 0, sizeof(dev));
	dev.vm = src;
	dev.s = ss;
	dev.report = report;
	snprintf(url, sizeof(url), "unix:/tmp/gw-kvm-devdirty-%d.sock", (int)getpid());
	TEST_ASSERT(gw_incoming_start(ds, url) == 0, "incoming %s", url);
	TEST_ASSERT(gw_session_set(ss, GW_PARAM_VERIFY, 1) == 0, "verify");
	/* Round 0 lasts about a second while the device writes. */
	TEST_ASSERT(gw_session_set(ss, GW_PARAM_MAX_BANDWIDTH_BPS, 24 << 20) == 0, "bandwidth");
	TEST_ASSERT(pthread_create(&dev.thr, NULL, dev_main, NULL) == 0, "device thread");
	TEST_ASSERT(gw_migrate_start(ss, gw_incoming_url(ds)) == 0, "migrate");
	gw_session_wait(ss);
	gw_session_wait(ds);
	gw_session_stats(ss, &st);
	gw_session_stats(ds, &dt);
	stale = stale_pages(src, dst);
	TEST_CHECK(!strcmp(st.dirty_backend, backend), "tracker %s, expected %s", st.dirty_backend, backend);
	TEST_CHECK(__atomic_load_n(&dev.stopped, __ATOMIC_ACQUIRE), "%s: the pause did not stop the device", backend);
	TEST_CHECK(dev.mark_err == 0, "%s: a mark failed: %d", backend, dev.mark_err);
	if (report) {
		TEST_CHECK(st.status == GW_STATUS_COMPLETED && dt.status == GW_STATUS_COMPLETED,
			   "%s: completed (src %s: %s, dst %s: %s)", backend, gw_status_name(st.status), st.error,
			   gw_status_name(dt.status), dt.error);
		TEST_CHECK(st.verify == GW_VERIFY_OK, "%s reported: digest %s", backend, gw_verify_name(st.verify));
		TEST_CHECK(stale == 0, "%s reported: %u device pages stale", backend, stale);
	} else {
		TEST_CHECK(st.verify == GW_VERIFY_MISMATCH, "%s not reported: digest %s, want a mismatch", backend,
			   gw_verify_name(st.verify));
		TEST_CHECK(stale == DEV_PAGES, "%s not reported: %u of %u device pages stale", backend, stale,
			   DEV_PAGES);
	}
	printf("%-8s reported=%d: %s/%s verify=%s rounds=%u device_writes=%llu stale_device_pages=%u\n", backend,
	       report, gw_status_name(st.status), gw_status_name(dt.status), gw_verify_name(st.verify), st.rounds,
	       (unsigned long long)dev.gen, stale);
	if (!__atomic_load_n(&dev.stopped, __ATOMIC_ACQUIRE)) {	/* the pause never came */
		__atomic_store_n(&dev.stop, 1, __ATOMIC_RELEASE);
		pthread_join(dev.thr, NULL);
	}
	gw_session_free(ss);
	gw_session_free(ds);
	vmm_kvm.destroy(src);
	vmm_kvm.destroy(dst);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(200);
	run(KVM_DIRTY_MODE_LOG, "kvm-log", true);
	run(KVM_DIRTY_MODE_LOG, "kvm-log", false);
	run(KVM_DIRTY_MODE_RING, "kvm-ring", true);
	run(KVM_DIRTY_MODE_RING, "kvm-ring", false);
	TEST_EXIT();
}
