/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the postcopy fault account adds up: a vCPU's blocktime is the
 * sum of its waits (local faults included), postcopy-blocktime is the time
 * every vCPU waited at once, waits still running count up to "now", a
 * placement completes exactly the waiters of its pages, and the latency
 * quantiles come out of the histogram within its resolution (1 us below
 * 1 ms, 1/64 above).
 */
#include <stdint.h>
#include "postcopy/faults.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define US 1000ull
#define MS 1000000ull

static void test_histogram(void)
{
	uint64_t vals[] = { 0, 1, 999, 1023, 1024, 1500, 2047, 2048, 65535, 1000000, 1ull << 40 };

	for (unsigned i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		uint64_t v = vals[i], lo = gw_pc_hist_value(gw_pc_hist_bucket(v));

		TEST_CHECK(gw_pc_hist_bucket(v) < GW_PC_HIST_BUCKETS, "bucket in range for %llu", (unsigned long long)v);
		TEST_CHECK(lo <= v, "lower bound %llu <= %llu", (unsigned long long)lo, (unsigned long long)v);
		TEST_CHECK(v < 1024 ? lo == v : v - lo <= v / 64, "resolution at %llu: %llu", (unsigned long long)v,
			   (unsigned long long)lo);
	}
	for (unsigned b = 1; b < GW_PC_HIST_BUCKETS; b++)
		TEST_CHECK(gw_pc_hist_value(b) > gw_pc_hist_value(b - 1), "buckets increase at %u", b);
}

static void test_blocktime(void)
{
	struct gw_pc_faults f;
	struct gw_msg_pc_stats st;

	gw_pc_faults_init(&f, 2);
	/* vCPU 0 waits 10..30 ms on page 5, vCPU 1 waits 20..50 ms on page 9: both at 20..30. */
	TEST_CHECK(gw_pc_faults_wait(&f, 0, 0, 5, 10 * MS), "wait 0");
	TEST_CHECK(gw_pc_faults_wait(&f, 1, 0, 9, 20 * MS), "wait 1");
	TEST_CHECK(gw_pc_faults_wait(&f, -1, 0, 9, 21 * MS), "a non-vCPU thread waits too");
	TEST_CHECK(gw_pc_faults_waiting(&f, 0, 9), "page 9 has waiters");
	TEST_CHECK(gw_pc_faults_oldest_ns(&f, 25 * MS) == 15 * MS, "oldest waits 15 ms");
	gw_pc_faults_figures(&f, 25 * MS, &st);
	TEST_CHECK(st.blocktime_ns == 5 * MS, "all blocked so far 5 ms, got %llu", (unsigned long long)st.blocktime_ns);
	TEST_CHECK(st.vcpu_blocktime_ns[0] == 15 * MS && st.vcpu_blocktime_ns[1] == 5 * MS, "running waits count");
	TEST_CHECK(gw_pc_faults_placed(&f, 0, 0, 6, 30 * MS) == 1, "pages 0..5 placed: one waiter done");
	TEST_CHECK(gw_pc_faults_placed(&f, 0, 6, 1, 31 * MS) == 0, "page 6: nobody waits");
	TEST_CHECK(gw_pc_faults_placed(&f, 0, 9, 1, 50 * MS) == 2, "page 9: two waiters done");
	TEST_CHECK(!gw_pc_faults_waiting(&f, 0, 9) && gw_pc_faults_oldest_ns(&f, 60 * MS) == 0, "nobody waits");
	gw_pc_faults_local(&f, 0, 60 * MS, 60 * MS + 20 * US);
	gw_pc_faults_figures(&f, 100 * MS, &st);
	TEST_CHECK(st.blocktime_ns == 10 * MS, "postcopy-blocktime 10 ms, got %llu", (unsigned long long)st.blocktime_ns);
	TEST_CHECK(st.vcpu_blocktime_ns[0] == 20 * MS + 20 * US, "vCPU 0: 20 ms + a local fault");
	TEST_CHECK(st.vcpu_blocktime_ns[1] == 30 * MS, "vCPU 1: 30 ms");
	TEST_CHECK(st.vcpu_blocktime_total_ns == 50 * MS + 20 * US, "total is the sum");
	TEST_CHECK(st.faults == 4 && st.local_faults == 1 && st.latency_samples == 3, "counts");
	TEST_CHECK(st.latency_max_ns == 30 * MS, "max latency 30 ms");
	/* The median wait is 29 ms; buckets there are 256 us wide. */
	TEST_CHECK(st.latency_p50_ns > 28 * MS && st.latency_p50_ns <= 29 * MS, "p50 ~ 29 ms, got %llu",
		   (unsigned long long)st.latency_p50_ns);
	gw_pc_faults_destroy(&f);
}

static void test_quantiles(void)
{
	struct gw_pc_faults f;
	struct gw_msg_pc_stats st;

	gw_pc_faults_init(&f, 1);
	/* 1000 faults: latency i us for i = 1..1000. */
	for (uint64_t i = 1; i <= 1000; i++) {
		TEST_ASSERT(gw_pc_faults_wait(&f, -1, 0, i, 0), "wait");
		gw_pc_faults_placed(&f, 0, i, 1, i * US);
	}
	gw_pc_faults_figures(&f, 2 * MS, &st);
	TEST_CHECK(st.latency_p50_ns == 501 * US, "p50 501 us, got %llu", (unsigned long long)st.latency_p50_ns);
	TEST_CHECK(st.latency_p99_ns == 991 * US, "p99 991 us, got %llu", (unsigned long long)st.latency_p99_ns);
	TEST_CHECK(st.latency_max_ns == 1000 * US, "max 1000 us");
	TEST_CHECK(st.vcpu_blocktime_ns[0] == 0, "threads that are no vCPU add no blocktime");
	gw_pc_faults_destroy(&f);
}

int main(void)
{
	test_histogram();
	test_blocktime();
	test_quantiles();
	TEST_EXIT();
}
