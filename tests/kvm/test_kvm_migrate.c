/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a live migration between two KVM VMs in one process, through
 * the engine (source and destination sessions), moves a running verify
 * guest so that after resume every page of its working set holds what the
 * guest could have written (the destination VMM checks page by page, and
 * the guest re-checks its own slice and reports through the PV port), the
 * RAM digests agree, the guest keeps making progress on the destination,
 * and the source never runs again. Holds with the kvm-log tracker (on RAM
 * populated, and on RAM mostly holes, where it starts with INITIALLY_SET and
 * most of the working set is first written after round 0), with the kvm-ring
 * tracker, over unix: and tcp:, and with local migration (RAM fds passed:
 * the destination maps the source's memfds; no digest to compare there).
 * The idle guest's LAPIC timers keep ticking after migration. Bandwidth is capped so that round 0 lasts
 * about a second while the guest writes (at a rate: convergence never
 * depends on this machine's speed).
 */
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
	bool local;
	const char *workload;
	const char *backend;		/* the tracker the engine must pick ("": none, local) */
	enum vmm_fill fill;		/* the source's RAM before the guest runs */
	int initially_set;		/* kvm-log: the mode it must start in (-1: not checked) */
};

static const struct config configs[] = {
	{ "verify kvm-log unix", KVM_DIRTY_MODE_LOG, "unix", false, "verify:ws=2M,rate=300", "kvm-log",
	  VMM_FILL_MIX, 0 },
	/* RAM mostly holes: most of the working set is first written after round 0 read it */
	{ "verify kvm-log sparse", KVM_DIRTY_MODE_LOG, "unix", false, "verify:ws=8M,rate=3000", "kvm-log",
	  VMM_FILL_NONE, 1 },
	{ "verify kvm-ring unix", KVM_DIRTY_MODE_RING, "unix", false, "verify:ws=2M,rate=300", "kvm-ring",
	  VMM_FILL_MIX, -1 },
	{ "verify kvm-log tcp", KVM_DIRTY_MODE_LOG, "tcp", false, "verify:ws=2M,rate=300", "kvm-log",
	  VMM_FILL_MIX, -1 },
	{ "verify local", KVM_DIRTY_MODE_LOG, "unix", true, "verify:ws=2M,rate=300", "", VMM_FILL_MIX, -1 },
	{ "idle kvm-ring unix", KVM_DIRTY_MODE_RING, "unix", false, "idle", "kvm-ring", VMM_FILL_MIX, -1 },
};

static void set_param(struct gw_session *s, enum gw_param p, int64_t v)
{
	TEST_ASSERT(gw_session_set(s, p, v) == 0, "set %s = %lld", gw_param_info(p)->name, (long long)v);
}

static void check_destination(const struct config *c, struct vmm *dst, uint64_t progress_at_pause)
{
	struct kvm_guest_report rep;
	char msg[256] = "";
	int r;

	TEST_CHECK(vmm_kvm.state(dst) == VMM_RUNNING, "%s: destination %s", c->name,
		   vmm_state_name(vmm_kvm.state(dst)));
	kvm_test_wait_progress(dst, progress_at_pause + 50);	/* the guest runs there */
	if (strncmp(c->workload, "verify", 6))
		return;
	while ((r = vmm_kvm.post_migration_check(dst, msg, sizeof(msg))) == 0)
		kvm_test_sleep_ms(10);
	TEST_CHECK(r == 1, "%s: destination check after resume: %s", c->name, msg);
	do {			/* every vCPU re-checks its slice once after the migration */
		vmm_kvm_guest_report(dst, &rep);
		kvm_test_sleep_ms(10);
	} while (rep.guest_checks_ok + rep.guest_checks_bad < 2);
	TEST_CHECK(rep.guest_checks_bad == 0 && rep.panics == 0, "%s: guest re-check failed", c->name);
	TEST_CHECK(vmm_kvm.check(dst, msg, sizeof(msg)) == 0, "%s: check while running: %s", c->name, msg);
}

static void run(const struct config *c)
{
	struct kvm_vm_opts opts = { .dirty = c->mode, .guest_recheck = -1, .tick_ns = 2000000 };
	struct vmm *src = kvm_test_vm(32 << 20, 2, c->workload, c->fill, &opts);
	const char *mode = c->initially_set == 1 ? "initially_set=1" : "initially_set=0";
	unsigned mode_logs = kvm_test_log_count(mode);
	struct vmm *dst = kvm_test_vm(0, 2, NULL, VMM_FILL_NONE, &opts);
	struct gw_vm_info none = { .size = sizeof(none), .nr_blocks = 0, .kvm_vm_fd = -1 };
	struct gw_session *ss, *ds;
	struct gw_stats st_src = { .size = sizeof(st_src) }, st_dst = { .size = sizeof(st_dst) };
	char url[128], err[256];
	int sret, dret;

	TEST_ASSERT(vmm_kvm.start(src) == 0, "%s: start", c->name);
	kvm_test_wait_progress(src, 100);
	ds = gw_session_new(GW_ROLE_DEST, &none, vmm_kvm.engine_ops, dst);
	ss = gw_session_new(GW_ROLE_SOURCE, vmm_kvm.info(src), vmm_kvm.engine_ops, src);
	TEST_ASSERT(ds && ss, "sessions");
	if (!strcmp(c->transport, "unix"))
		snprintf(url, sizeof(url), "unix:/tmp/gw-kvm-migrate-%d.sock", (int)getpid());
	else
		snprintf(url, sizeof(url), "tcp:127.0.0.1:0");
	TEST_ASSERT(gw_incoming_start(ds, url) == 0, "%s: incoming %s", c->name, url);
	snprintf(url, sizeof(url), "%s", gw_incoming_url(ds));
	set_param(ss, GW_PARAM_VERIFY, 1);
	set_param(ss, GW_PARAM_LOCAL, c->local);
	set_param(ss, GW_PARAM_DOWNTIME_LIMIT_US, 200000);
	set_param(ss, GW_PARAM_CONVERGE_TIMEOUT_MS, 20000);
	set_param(ss, GW_PARAM_CONVERGE_POLICY, GW_CONVERGE_FORCE);
	/* Round 0 lasts about a second: the guest dirties pages while it runs. */
	set_param(ss, GW_PARAM_MAX_BANDWIDTH_BPS, 24 << 20);
	TEST_ASSERT(gw_migrate_start(ss, url) == 0, "%s: migrate to %s", c->name, url);
	sret = gw_session_wait(ss);
	dret = gw_session_wait(ds);
	gw_session_stats(ss, &st_src);
	gw_session_stats(ds, &st_dst);
	TEST_ASSERT(sret == 0 && dret == 0, "%s: source %d (%s), destination %d (%s)", c->name, sret,
		    gw_session_error(ss, err, sizeof(err)), dret, st_dst.error);
	/* A local migration shares the RAM: main's engine has no digest to compare then. */
	TEST_CHECK(c->local || st_src.verified, "%s: RAM digest not verified", c->name);
	TEST_CHECK(!strcmp(st_src.dirty_backend, c->backend), "%s: tracker %s, expected %s", c->name,
		   st_src.dirty_backend, c->backend);
	if (c->initially_set >= 0)
		TEST_CHECK(kvm_test_log_count(mode) == mode_logs + 1, "%s: kvm-log did not start with %s",
			   c->name, mode);
	vmm_kvm.set_postmigrate(src);
	check_destination(c, dst, vmm_kvm.progress(src));
	TEST_CHECK(vmm_kvm.engine_ops->resume(src) == -EPERM, "%s: source resumed after migration", c->name);
	printf("%s: %u rounds, %.1f ms total, %.1f ms downtime, %llu pages sent\n", c->name,
	       st_src.rounds, st_src.total_time_ns / 1e6, st_src.downtime_ns / 1e6,
	       (unsigned long long)(st_src.normal_pages + st_src.duplicate_pages));
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
