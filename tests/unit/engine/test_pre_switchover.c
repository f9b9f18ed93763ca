/* SPDX-License-Identifier: MIT */
/*
 * Invariant: with GW_PARAM_PAUSE_BEFORE_SWITCHOVER the source pauses the VM
 * once and reports GW_STATUS_PRE_SWITCHOVER before the final round, and
 * nothing goes on until gw_session_continue(): the destination is not
 * resumed meanwhile. After the continue the migration completes, and the
 * downtime counts from that pause (so it holds the time waited, at least
 * the test's 50 ms). A gw_session_cancel() there ends it cancelled with the
 * source VM resumed (paused once, resumed once) and the destination never
 * resumed. gw_session_continue() with no migration waiting is -EINVAL.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <godwit/godwit.h>
#include "test_util.h"
#include "test_vm.h"

TEST_DEFINE_FAILURES;

#define RAM_BYTES (8u << 20)
#define WAIT_US 50000u

static enum gw_status status_of(struct gw_session *s)
{
	struct gw_stats st = { .size = sizeof(st) };

	gw_session_stats(s, &st);
	return st.status;
}

static void run(bool cancel)
{
	struct test_ram sram, dram;
	struct test_vm svm = { 0 }, dvm = { 0 };
	struct gw_vm_info si, di;
	struct gw_session *src, *dst;
	struct gw_stats ss = { .size = sizeof(ss) };
	enum gw_status st;
	unsigned polls;

	TEST_ASSERT(test_ram_create(&sram, "ps-src", RAM_BYTES, 0) == 0, "source RAM");
	TEST_ASSERT(test_ram_create(&dram, "ps-dst", RAM_BYTES, 0) == 0, "destination RAM");
	memset(sram.host, 0x5a, RAM_BYTES);
	test_vm_info_one(&si, &sram, "ram0");
	test_vm_info_one(&di, &dram, "ram0");
	dst = gw_session_new(GW_ROLE_DEST, &di, &test_vm_ops, &dvm);
	src = gw_session_new(GW_ROLE_SOURCE, &si, &test_vm_ops, &svm);
	TEST_ASSERT(src && dst, "sessions");
	TEST_CHECK(gw_session_continue(src) == -EINVAL, "continue with nothing waiting: -EINVAL");
	TEST_ASSERT(gw_session_set(src, GW_PARAM_PAUSE_BEFORE_SWITCHOVER, 1) == 0, "pause-before-switchover");
	TEST_ASSERT(gw_incoming_start(dst, "tcp:127.0.0.1:0") == 0, "incoming");
	TEST_ASSERT(gw_migrate_start(src, gw_incoming_url(dst)) == 0, "migrate");
	/* A hang guard only: the wait ends on the status, however fast the run. */
	for (polls = 0; (st = status_of(src)) != GW_STATUS_PRE_SWITCHOVER && polls < 60000; polls++) {
		if (st == GW_STATUS_FAILED || st == GW_STATUS_COMPLETED)
			break;
		usleep(1000);
	}
	TEST_ASSERT(st == GW_STATUS_PRE_SWITCHOVER, "source at pre-switchover (%s)", gw_status_name(st));
	usleep(WAIT_US);
	TEST_CHECK(test_vm_load(&svm.pause_calls) == 1 && test_vm_load(&svm.resume_calls) == 0,
		   "source paused once while waiting");
	TEST_CHECK(test_vm_load(&dvm.resume_calls) == 0, "destination not resumed while the source waits");
	TEST_CHECK(status_of(src) == GW_STATUS_PRE_SWITCHOVER, "still waiting without a continue");
	if (cancel) {
		TEST_CHECK(gw_session_cancel(src) == 0, "cancel at pre-switchover accepted");
	} else {
		TEST_CHECK(gw_session_continue(src) == 0, "continue accepted");
		TEST_CHECK(gw_session_continue(src) == -EINVAL, "a second continue: -EINVAL");
	}
	gw_session_wait(src);
	gw_session_wait(dst);
	gw_session_stats(src, &ss);
	if (cancel) {
		TEST_CHECK(ss.status == GW_STATUS_CANCELLED, "cancelled (%s)", gw_status_name(ss.status));
		TEST_CHECK(test_vm_load(&svm.resume_calls) == 1, "source VM resumed after the cancel");
		TEST_CHECK(test_vm_load(&dvm.resume_calls) == 0, "destination never resumed");
	} else {
		TEST_CHECK(ss.status == GW_STATUS_COMPLETED, "completed (%s)", gw_status_name(ss.status));
		TEST_CHECK(ss.downtime_ns >= (uint64_t)WAIT_US * 1000, "downtime %llu ns holds the %u us waited",
			   (unsigned long long)ss.downtime_ns, WAIT_US);
		TEST_CHECK(test_vm_load(&dvm.resume_calls) == 1 && test_vm_load(&svm.resume_calls) == 0,
			   "destination resumed, source stays paused");
	}
	gw_session_free(src);
	gw_session_free(dst);
	test_ram_destroy(&sram);
	test_ram_destroy(&dram);
}

int main(void)
{
	run(false);
	run(true);
	TEST_EXIT();
}
