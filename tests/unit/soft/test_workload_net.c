/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the l2fwd and echo specs (vmm/workload.h) parse into what
 * they say, print canonically, and the canonical spec parses back to the
 * same workload (a destination takes the source's spec from its state);
 * every bad option is refused with a reason; both need a NIC.
 */
#include <string.h>
#include "test_util.h"
#include "workload.h"

TEST_DEFINE_FAILURES;

static void canonical(const char *spec, const char *want)
{
	struct vmm_workload wl, again;
	char err[128] = "", buf[VMM_WORKLOAD_SPEC_MAX], buf2[VMM_WORKLOAD_SPEC_MAX];

	TEST_ASSERT(vmm_workload_parse(spec, &wl, err, sizeof(err)) == 0, "%s: %s", spec, err);
	vmm_workload_format(&wl, vmm_workload_ws_pages(&wl, 1024), buf, sizeof(buf));
	TEST_CHECK(!strcmp(buf, want), "%s: canonical '%s', expected '%s'", spec, buf, want);
	TEST_ASSERT(vmm_workload_parse(buf, &again, err, sizeof(err)) == 0, "%s: %s", buf, err);
	vmm_workload_format(&again, vmm_workload_ws_pages(&again, 1024), buf2, sizeof(buf2));
	TEST_CHECK(!strcmp(buf, buf2) && !memcmp(wl.dst_mac, again.dst_mac, sizeof(wl.dst_mac)) &&
		   !memcmp(wl.dst_set, again.dst_set, sizeof(wl.dst_set)) &&
		   wl.budget_frames == again.budget_frames, "%s: does not parse back", buf);
	TEST_CHECK(vmm_workload_needs_nic(&wl) && !vmm_workload_checkable(&wl) &&
		   vmm_workload_ws_pages(&wl, 1024) == 0, "%s: needs a NIC, no working set", spec);
	TEST_CHECK(vmm_workload_check_nics(&wl, 0, err, sizeof(err)) == -EINVAL &&
		   strstr(err, "--nic") && vmm_workload_check_nics(&wl, 1, err, sizeof(err)) == 0,
		   "%s: the NIC check (%s)", spec, err);
}

static void refused(const char *spec, const char *reason_has)
{
	struct vmm_workload wl;
	char err[128] = "";

	TEST_CHECK(vmm_workload_parse(spec, &wl, err, sizeof(err)) == -EINVAL && strstr(err, reason_has),
		   "%s: not refused with '%s' (%s)", spec, reason_has, err);
}

int main(void)
{
	struct vmm_workload wl;
	char err[128];

	canonical("l2fwd", "l2fwd:budget=32");
	canonical("echo", "echo");
	canonical("l2fwd:dst1=02:00:00:00:00:B1,budget=8", "l2fwd:budget=8,dst1=02:00:00:00:00:b1");
	canonical("l2fwd:dst0=0a:0b:0c:0d:0e:0f,dst1=01:02:03:04:05:06,dst2=11:12:13:14:15:16,"
		  "dst3=21:22:23:24:25:26,budget=64",
		  "l2fwd:budget=64,dst0=0a:0b:0c:0d:0e:0f,dst1=01:02:03:04:05:06,"
		  "dst2=11:12:13:14:15:16,dst3=21:22:23:24:25:26");
	refused("l2fwd:budget=0", "bad budget");
	refused("l2fwd:budget=65", "bad budget");
	refused("l2fwd:dst4=02:00:00:00:00:01", "unknown option");
	refused("l2fwd:dst0=02:00:00:00:00", "bad MAC");
	refused("l2fwd:dst0=02:00:00:00:00:01:02", "bad MAC");
	refused("l2fwd:dst0=02-00-00-00-00-01", "bad MAC");
	refused("l2fwd:dst0=0x:00:00:00:00:01", "bad MAC");
	refused("l2fwd:ws=1M", "unknown option");
	refused("l2fwd:rate=10", "unknown option");
	refused("echo:budget=4", "unknown option");
	refused("l2fwd:budget", "needs a value");
	refused("forward", "l2fwd, echo");
	TEST_CHECK(vmm_workload_parse("verify", &wl, err, sizeof(err)) == 0 && !vmm_workload_needs_nic(&wl) &&
		   vmm_workload_check_nics(&wl, 0, err, sizeof(err)) == 0, "verify needs no NIC");
	TEST_EXIT();
}
