/* SPDX-License-Identifier: MIT */
/*
 * Invariant: the convergence model is plain arithmetic with units.
 * expected downtime (ns) = dirty pages * wire bytes per page / rate (bytes/s)
 * * 1e9 + fixed cost; with no measured rate it is the fixed cost for at most
 * 64 KiB (one socket write) and UINT64_MAX (never fits) above;
 * with nothing dirty it is the fixed cost. Bytes in flight (sent, not yet
 * taken in by the destination) count as bytes still to send, dirty pages
 * or not, at the destination's own pace once it was measured. A round's rate weighs in
 * proportion to its length, half from 100 ms on; tiny rounds (< 64 KiB)
 * and zero-length rounds do not move it at all.
 * The verdict (gw_converge_judge): a guest dirtying 1.4 MiB/s behind a link
 * held at its 20 MiB/s cap converges at the cap, with the time until it
 * fits from the rates, however slowly the expected downtime falls per
 * round; the same link uncapped converges at the link's rate; a guest
 * dirtying as fast as the link moves does not converge (outrun), nor one
 * whose dirty set falls by less than a tenth of what three rounds sent
 * (flat); a fixed cost over the limit and an unmeasured rate say so.
 */
#include <stdint.h>
#include "source/converge.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#define MS 1000000ull
#define FIXED_NS (2 * MS)	/* gw_converge_init's fixed cost */

static bool near_ns(uint64_t a, uint64_t b, uint64_t tol)
{
	return a > b ? a - b <= tol : b - a <= tol;
}

#define MIB (1ull << 20)

static void judge_cases(void)
{
	struct gw_converge c;
	/* 4 GiB to send at 20 MiB/s: 204.8 s + 2 ms, against a 300 ms limit. */
	struct gw_converge_view v = { .dirty_pages = 1048576, .dirty_bps = 1468006 /* 1.4 MiB/s */,
				      .limit_ns = 300 * MS, .cap_bps = 20 * MIB };
	uint64_t eta_ns, exp_ns, want_ns;

	gw_converge_init(&c, 4096);
	gw_converge_round(&c, 20 * MIB, 1000 * MS, 5120);
	exp_ns = gw_converge_expected_ns(&c, v.dirty_pages);
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_CAPPED, "1.4 MiB/s behind a 20 MiB/s cap: capped");
	/* The expected downtime falls 1 - 1.4/20 ns a ns: (204.802 s - 0.3 s) / 0.93. */
	want_ns = (uint64_t)((double)(exp_ns - v.limit_ns) / (1.0 - 1468006.0 / (20.0 * MIB)));
	TEST_CHECK(near_ns(eta_ns, want_ns, MS), "eta %llu ns, want %llu", (unsigned long long)eta_ns,
		   (unsigned long long)want_ns);
	/* Three rounds sent 5100 pages, the dirty set fell by 4750: slow per round, not flat. */
	v.sent_pages = 5100;
	v.fell_pages = 4750;
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_CAPPED, "a slow fall is no flat");
	v.cap_bps = 0;
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_DRAINING && eta_ns == want_ns,
		   "uncapped: draining at the link's rate");
	v.cap_bps = 40 * MIB;
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_DRAINING, "half the cap: the link, not the cap");
	v.cap_bps = 20 * MIB;
	/* The dirty set stays: three rounds sent 5100 pages, it fell by 500. */
	v.fell_pages = 500;
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_FLAT && !eta_ns, "flat");
	v.fell_pages = 4750;
	v.dirty_bps = 20 * MIB;
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_OUTRUN && !eta_ns, "dirty = link: outrun");
	v.dirty_bps = 1468006;
	v.dirty_pages = 1000;	/* 3.9 MiB: 195 ms + 2 ms fits */
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_FITS && !eta_ns, "fits");
	v.dirty_pages = 1048576;
	c.fixed_cost_ns = 301 * MS;
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_FIXED_COST, "fixed cost over the limit");
	gw_converge_init(&c, 4096);
	TEST_CHECK(gw_converge_judge(&c, &v, &eta_ns) == GW_CONVERGE_UNKNOWN, "no rate: unknown");
	TEST_CHECK(gw_converging(GW_CONVERGE_CAPPED) && gw_converging(GW_CONVERGE_UNKNOWN) &&
		   !gw_converging(GW_CONVERGE_OUTRUN) && !gw_converging(GW_CONVERGE_FLAT), "converging states");
}

int main(void)
{
	struct gw_converge c;
	uint64_t e;

	/* No rate yet. */
	gw_converge_init(&c, 4096);
	TEST_CHECK(c.rate_bps == 0 && c.wire_bytes_per_page == 4096.0, "init");
	TEST_CHECK(gw_converge_expected_ns(&c, 17) == UINT64_MAX, "no rate, 68 KiB -> unknown");
	TEST_CHECK(!gw_converge_fits(&c, 17, 600000000), "unknown never fits");
	TEST_CHECK(gw_converge_expected_ns(&c, 16) == c.fixed_cost_ns, "no rate, 64 KiB: one socket write");
	TEST_CHECK(gw_converge_fits(&c, 2, 2000), "no rate, 2 pages fit 2 ms");
	TEST_CHECK(gw_converge_expected_ns(&c, 0) == c.fixed_cost_ns, "nothing dirty -> fixed cost");
	TEST_CHECK(c.fixed_cost_ns == FIXED_NS, "fixed cost %llu", (unsigned long long)c.fixed_cost_ns);
	TEST_CHECK(gw_converge_fits(&c, 0, 2000), "nothing dirty fits 2 ms");
	TEST_CHECK(!gw_converge_fits(&c, 0, 1999), "nothing dirty does not fit 1.999 ms");

	/* 1 GB/s: 244141 full pages (1000001536 bytes) in exactly that many ns. */
	gw_converge_round(&c, 4096ull * 244141, 4096ull * 244141, 244141);
	TEST_CHECK(c.rate_bps == 1000000000ull, "rate %llu", (unsigned long long)c.rate_bps);
	TEST_CHECK(c.wire_bytes_per_page == 4096.0, "bytes/page %f", c.wire_bytes_per_page);

	/* 256 MiB dirty at 1 GB/s: 268.435456 ms + 2 ms. */
	e = gw_converge_expected_ns(&c, 65536);
	TEST_CHECK(near_ns(e, 268435456ull + FIXED_NS, 1000), "256 MiB -> %llu ns", (unsigned long long)e);
	TEST_CHECK(gw_converge_fits(&c, 65536, 300000), "fits 300 ms");
	TEST_CHECK(gw_converge_fits(&c, 65536, 270436), "fits 270.436 ms");
	TEST_CHECK(!gw_converge_fits(&c, 65536, 270000), "does not fit 270 ms");
	TEST_CHECK(!gw_converge_fits(&c, 65536, 250000), "does not fit 250 ms");
	/* Linear in dirty pages. */
	e = gw_converge_expected_ns(&c, 1);
	TEST_CHECK(near_ns(e, 4096 + FIXED_NS, 2), "one page -> %llu ns", (unsigned long long)e);
	TEST_CHECK(gw_converge_expected_ns(&c, 0) == FIXED_NS, "zero dirty with a rate");
	/* In flight: 40 MB at 1 GB/s is 40 ms, with or without dirty pages. */
	{
		struct gw_converge f = c;

		f.in_flight_bytes = 40000000;
		e = gw_converge_expected_ns(&f, 0);
		TEST_CHECK(near_ns(e, 40 * MS + FIXED_NS, 1000), "40 MB in flight -> %llu ns", (unsigned long long)e);
		e = gw_converge_expected_ns(&f, 65536);
		TEST_CHECK(near_ns(e, 268435456ull + 40 * MS + FIXED_NS, 1000), "256 MiB + 40 MB -> %llu ns",
			   (unsigned long long)e);
		TEST_CHECK(!gw_converge_fits(&f, 65536, 300000), "no longer fits 300 ms");
		TEST_CHECK(!gw_converge_fits(&f, 0, 30000), "in flight alone over 30 ms");
		/* The destination's own pace for what it holds: 40 MB at 0.5 GB/s is 80 ms. */
		f.in_flight_rate_bps = 500000000;
		e = gw_converge_expected_ns(&f, 0);
		TEST_CHECK(near_ns(e, 80 * MS + FIXED_NS, 1000), "40 MB at its own pace -> %llu ns",
			   (unsigned long long)e);
		e = gw_converge_expected_ns(&f, 65536);
		TEST_CHECK(near_ns(e, 268435456ull + 80 * MS + FIXED_NS, 1000), "256 MiB + 40 MB at its pace -> %llu ns",
			   (unsigned long long)e);
		f.in_flight_rate_bps = 0;
		f.rate_bps = 0;
		TEST_CHECK(gw_converge_expected_ns(&f, 0) == UINT64_MAX, "40 MB in flight, no rate -> unknown");
	}

	/* Rounds at 2 GB/s: 1 ms weighs 1/200, 10 ms 1/20, 100 ms and more 1/2. */
	{
		struct gw_converge s = c, m = c, l = c, xl = c;

		gw_converge_round(&s, 2000000, 1 * MS, 488);
		gw_converge_round(&m, 20000000, 10 * MS, 4882);
		gw_converge_round(&l, 200000000, 100 * MS, 48828);
		gw_converge_round(&xl, 2000000000, 1000 * MS, 488281);
		TEST_CHECK(near_ns(s.rate_bps, 1005000000ull, 10), "1 ms round -> %llu", (unsigned long long)s.rate_bps);
		TEST_CHECK(near_ns(m.rate_bps, 1050000000ull, 10), "10 ms round -> %llu", (unsigned long long)m.rate_bps);
		TEST_CHECK(near_ns(l.rate_bps, 1500000000ull, 10), "100 ms round -> %llu", (unsigned long long)l.rate_bps);
		TEST_CHECK(xl.rate_bps == l.rate_bps, "1 s round weighs as 100 ms: %llu", (unsigned long long)xl.rate_bps);
	}
	/* Rounds too small or instantaneous say nothing about the rate. */
	{
		struct gw_converge t = c;

		gw_converge_round(&t, 65535, 1000, 16);
		TEST_CHECK(t.rate_bps == c.rate_bps, "< 64 KiB ignored for the rate");
		TEST_CHECK(t.wire_bytes_per_page > 4095 && t.wire_bytes_per_page < 4096, "but bytes/page updated");
		t = c;
		gw_converge_round(&t, 1 << 30, 0, 100);
		TEST_CHECK(t.rate_bps == c.rate_bps, "0 ns ignored");
		t = c;
		gw_converge_round(&t, 0, 10 * MS, 0);
		TEST_CHECK(t.rate_bps == c.rate_bps && t.wire_bytes_per_page == 4096.0, "empty round ignored");
	}

	/* Zero pages cost an 8-byte entry (plus framing): bytes/page falls. */
	{
		struct gw_converge z = c;

		/* 10000 zero pages sent as 80000 bytes of entries + 10 frames of 48 bytes. */
		gw_converge_round(&z, 80480, 100 * MS, 10000);
		TEST_CHECK(z.wire_bytes_per_page > 8 && z.wire_bytes_per_page < 9, "zero pages -> %f B/page",
			   z.wire_bytes_per_page);
		/* That round (100 ms) also ran at 0.8048 MB/s: the rate halves towards it. */
		TEST_CHECK(z.rate_bps == (1000000000ull + 804800) / 2, "rate %llu", (unsigned long long)z.rate_bps);
		/* 65536 * 8.048 bytes at 500.4024 MB/s = 1.054018 ms, + 2 ms. */
		e = gw_converge_expected_ns(&z, 65536);
		TEST_CHECK(near_ns(e, 3054018, 1000), "256 MiB of zero pages -> %llu ns", (unsigned long long)e);
		TEST_CHECK(gw_converge_fits(&z, 65536, 3100), "fits 3.1 ms");
		TEST_CHECK(!gw_converge_fits(&z, 65536, 3000), "does not fit 3 ms");
	}

	/* Slow link: 8 MiB/s, 4 MiB dirty -> 500 ms + 2 ms. */
	gw_converge_init(&c, 4096);
	gw_converge_round(&c, 8ull << 20, 1000 * MS, 2048);
	TEST_CHECK(c.rate_bps == 8ull << 20, "8 MiB/s: %llu", (unsigned long long)c.rate_bps);
	e = gw_converge_expected_ns(&c, 1024);
	TEST_CHECK(near_ns(e, 500 * MS + FIXED_NS, 1000), "4 MiB at 8 MiB/s -> %llu", (unsigned long long)e);
	/* 1 MiB in 10^6 s: 1 B/s (integer). Large counts stay finite and monotonic. */
	gw_converge_init(&c, 4096);
	gw_converge_round(&c, 1ull << 20, 1000000ull * 1000 * MS, 256);
	TEST_CHECK(c.rate_bps == 1, "slowest rate %llu", (unsigned long long)c.rate_bps);
	TEST_CHECK(gw_converge_expected_ns(&c, 1ull << 20) != UINT64_MAX, "finite");
	TEST_CHECK(gw_converge_expected_ns(&c, 1ull << 20) > gw_converge_expected_ns(&c, 1ull << 10), "monotonic");
	judge_cases();
	TEST_EXIT();
}
