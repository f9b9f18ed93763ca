/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a migration of a running KVM guest that switches to postcopy
 * (after one precopy round, or at once on gw_session_start_postcopy)
 * completes: the destination resumes with pages missing, its vCPUs reach
 * them through the memslots' host mappings (KVM's own accesses fault into
 * the engine's userfaultfd and wait for the page), every page arrives, the
 * postcopy RAM digests agree, the destination's verify check (deferred
 * until every page is there) and the guest's own re-check pass, the guest
 * keeps making progress, and the source stays in postmigrate. With the
 * kvm-log and kvm-ring trackers, over unix: and tcp:, the verify and the
 * dirty guests. Bandwidth is capped so that postcopy lasts a while; the
 * counts of faults and pages are printed, never pass criteria.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "kvm_test.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

struct config {
	const char *name;
	enum kvm_dirty_mode mode;
	const char *transport;		/* "unix" or "tcp" */
	const char *workload;
	bool start_now;			/* gw_session_start_postcopy as round 0 starts, else after round 1 */
};

static const struct config configs[] = {
	{ "verify kvm-log unix after-round", KVM_DIRTY_MODE_LOG, "unix", "verify:ws=2M,rate=300", false },
	{ "verify kvm-ring tcp start-now", KVM_DIRTY_MODE_RING, "tcp", "verify:ws=2M,rate=300", true },
	{ "dirty kvm-log unix start-now", KVM_DIRTY_MODE_LOG, "unix", "dirty:ws=2M,rate=300", true },
};

static void set_param(struct gw_session *s, enum gw_param p, int64_t v)
{
	TEST_ASSERT(gw_session_set(s, p, v) == 0, "set %s = %lld", gw_param_info(p)->name, (long long)v);
}

/*
 * start_now: asked from the source's event callback as round 0 starts, on
 * the migration thread: the request is in before precopy could end,
 * whatever the speed (asked once the test saw "active", a precopy that
 * finished first left nothing to switch).
 */
struct start_now {
	struct gw_session *src;
	bool asked;
	int ret;
};

static void start_now_event(void *opaque, const struct gw_event *ev)
{
	struct start_now *sn = opaque;

	if (ev->type != GW_EVENT_ROUND || ev->round != 0 || sn->asked)
		return;
	sn->asked = true;
	sn->ret = gw_session_start_postcopy(sn->src);
}

static void check_destination(const struct config *c, struct vmm *dst, uint64_t progress_at_pause)
{
	struct kvm_guest_report rep;
	char msg[256] = "";
	int r;

	TEST_CHECK(vmm_kvm.state(dst) == VMM_RUNNING, "%s: destination %s", c->name,
		   vmm_state_name(vmm_kvm.state(dst)));
	kvm_test_wait_progress(dst, progress_at_pause + 50);	/* the guest runs there */
	vmm_kvm_guest_report(dst, &rep);
	TEST_CHECK(rep.panics == 0, "%s: %llu guest panics", c->name, (unsigned long long)rep.panics);
	if (strncmp(c->workload, "verify", 6))
		return;
	/* postcopy_ram(true) ran the check before the session ended. */
	r = vmm_kvm.post_migration_check(dst, msg, sizeof(msg));
	TEST_CHECK(r == 1, "%s: destination check once every page arrived (%d): %s", c->name, r, msg);
	do {			/* every vCPU re-checks its slice once after the migration */
		vmm_kvm_guest_report(dst, &rep);
		kvm_test_sleep_ms(10);
	} while (rep.guest_checks_ok + rep.guest_checks_bad < 2);
	TEST_CHECK(rep.guest_checks_bad == 0 && rep.panics == 0, "%s: guest re-check failed", c->name);
	TEST_CHECK(vmm_kvm.check(dst, msg, sizeof(msg)) == 0, "%s: check while running: %s", c->name, msg);
}

static void run(const struct config *c)
{
	struct kvm_vm_opts opts = { .dirty = c->mode, .guest_recheck = -1 };
	struct vmm *src = kvm_test_vm(32 << 20, 2, c->workload, VMM_FILL_MIX, &opts);
	struct vmm *dst = kvm_test_vm(0, 2, NULL, VMM_FILL_NONE, &opts);
	struct gw_vm_info none = { .size = sizeof(none), .nr_blocks = 0, .kvm_vm_fd = -1 };
	struct gw_session *ss, *ds;
	struct gw_stats st_src = { .size = sizeof(st_src) }, st_dst = { .size = sizeof(st_dst) };
	struct start_now sn = { 0 };
	char url[128], err[256];
	int sret, dret;

	TEST_ASSERT(vmm_kvm.start(src) == 0, "%s: start", c->name);
	kvm_test_wait_progress(src, 100);
	ds = gw_session_new(GW_ROLE_DEST, &none, vmm_kvm.engine_ops, dst);
	ss = gw_session_new(GW_ROLE_SOURCE, vmm_kvm.info(src), vmm_kvm.engine_ops, src);
	TEST_ASSERT(ds && ss, "sessions");
	sn.src = ss;
	if (c->start_now)
		TEST_ASSERT(gw_session_set_event_fn(ss, start_now_event, &sn) == 0, "%s: event callback", c->name);
	if (!strcmp(c->transport, "unix"))
		snprintf(url, sizeof(url), "unix:/tmp/gw-kvm-postcopy-%d.sock", (int)getpid());
	else
		snprintf(url, sizeof(url), "tcp:127.0.0.1:0");
	TEST_ASSERT(gw_incoming_start(ds, url) == 0, "%s: incoming %s", c->name, url);
	snprintf(url, sizeof(url), "%s", gw_incoming_url(ds));
	set_param(ss, GW_PARAM_VERIFY, 1);
	set_param(ss, GW_PARAM_POSTCOPY, 1);
	set_param(ss, GW_PARAM_DOWNTIME_LIMIT_US, 1000);	/* precopy never converges */
	set_param(ss, GW_PARAM_MAX_BANDWIDTH_BPS, 24 << 20);	/* postcopy lasts a while */
	if (!c->start_now)
		set_param(ss, GW_PARAM_POSTCOPY_AFTER_ROUNDS, 1);
	TEST_ASSERT(gw_migrate_start(ss, url) == 0, "%s: migrate to %s", c->name, url);
	sret = gw_session_wait(ss);
	if (c->start_now)
		TEST_CHECK(sn.asked && sn.ret == 0, "%s: start postcopy (%d)", c->name, sn.ret);
	dret = gw_session_wait(ds);
	gw_session_stats(ss, &st_src);
	gw_session_stats(ds, &st_dst);
	TEST_ASSERT(sret == 0 && dret == 0, "%s: source %d (%s), destination %d (%s)", c->name, sret,
		    gw_session_error(ss, err, sizeof(err)), dret, st_dst.error);
	TEST_CHECK(st_src.postcopy && st_dst.postcopy, "%s: switched to postcopy", c->name);
	TEST_CHECK(st_dst.postcopy_remaining_pages == 0, "%s: %llu pages missing", c->name,
		   (unsigned long long)st_dst.postcopy_remaining_pages);
	TEST_CHECK(st_src.postcopy_pages == st_dst.postcopy_pages, "%s: %llu pages after the switch, "
		   "destination %llu", c->name, (unsigned long long)st_src.postcopy_pages,
		   (unsigned long long)st_dst.postcopy_pages);
	TEST_CHECK(st_src.verified, "%s: RAM digest not verified", c->name);
	TEST_CHECK(st_dst.postcopy_nr_vcpus == 2, "%s: postcopy_ram said %u vCPUs", c->name,
		   st_dst.postcopy_nr_vcpus);
	{	/* the per-vCPU rows add up to the total, on both sides (the source has the last report) */
		struct gw_vcpu_stats v = { .size = sizeof(v) };
		uint64_t dsum = 0, ssum = 0;
		unsigned n = 0;

		for (; gw_session_vcpu(ds, n, &v) == 0; n++)
			dsum += v.postcopy_blocktime_ns;
		TEST_CHECK(n == st_dst.postcopy_nr_vcpus && dsum == st_dst.postcopy_vcpu_blocktime_total_ns,
			   "%s: %u vCPU rows summing %llu ns, total %llu", c->name, n, (unsigned long long)dsum,
			   (unsigned long long)st_dst.postcopy_vcpu_blocktime_total_ns);
		for (n = 0; gw_session_vcpu(ss, n, &v) == 0; n++)
			ssum += v.postcopy_blocktime_ns;
		TEST_CHECK(n == st_src.postcopy_nr_vcpus && ssum == st_src.postcopy_vcpu_blocktime_total_ns,
			   "%s: source: %u vCPU rows summing %llu ns, total %llu", c->name, n,
			   (unsigned long long)ssum, (unsigned long long)st_src.postcopy_vcpu_blocktime_total_ns);
	}
	vmm_kvm.set_postmigrate(src);
	TEST_CHECK(vmm_kvm.state(src) == VMM_POSTMIGRATE, "%s: source %s", c->name,
		   vmm_state_name(vmm_kvm.state(src)));
	check_destination(c, dst, vmm_kvm.progress(src));
	TEST_CHECK(vmm_kvm.engine_ops->resume(src) == -EPERM, "%s: source resumed after migration", c->name);
	printf("%s: %u rounds, %llu postcopy pages (%llu requested, %llu pushed), %llu faults, "
	       "vCPU blocktime %.1f ms, %.1f ms postcopy\n", c->name, st_src.rounds,
	       (unsigned long long)st_dst.postcopy_pages, (unsigned long long)st_dst.postcopy_placed_requested,
	       (unsigned long long)st_dst.postcopy_placed_pushed, (unsigned long long)st_dst.postcopy_faults,
	       st_dst.postcopy_vcpu_blocktime_total_ns / 1e6, st_dst.postcopy_time_ns / 1e6);
	gw_session_free(ss);
	gw_session_free(ds);
	vmm_kvm.destroy(src);
	vmm_kvm.destroy(dst);
}

int main(void)
{
	kvm_test_require();
	kvm_test_time_bound(280);
	for (size_t i = 0; i < sizeof(configs) / sizeof(configs[0]); i++)
		run(&configs[i]);
	TEST_EXIT();
}
