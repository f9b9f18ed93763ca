/* SPDX-License-Identifier: MIT */
/*
 * The machine's limits for the page pipeline, measured beside the
 * migrations of the same run (bench.py --groups datapath): per core, over
 * 256 MiB of mix-like pages (a quarter zero) in a memfd mapped here, so
 * that the working set is far over the caches:
 *
 *   memcpy         mapped pages into a 512 KiB buffer (one batch at a time)
 *   pread          the memfd into that buffer (the copy path's read)
 *   read+crc       zero check + CRC32C of each page, as classify does on
 *                  mapped pages (the live send path's user work)
 *   crc-hot        CRC32C of a 512 KiB buffer already in cache
 *   zero           zero detection over zero pages (the full scan)
 *   classify       what classify does on the copy path, page by page: zero
 *                  check, then copy into the batch buffer and CRC32C of the
 *                  copy for a non-zero page
 *   classify+pf    the same, asking for every line of the page two ahead
 *                  first, as src/pages_out.c does (PREFETCH_AHEAD_PAGES)
 *
 * Best of N passes, GB/s (1e9 bytes per second). One JSON object on the
 * last line for the runner. Usage: limits_bench [passes]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
#include "mem/zero.h"
#include "util/crc32c.h"

#define RAM_BYTES (256u << 20)
#define PAGE 4096u
#define BATCH_BYTES (512u << 10)
#define NR_LIMITS 7
#define PREFETCH_AHEAD_PAGES 2
#define CACHE_LINE_BYTES 64

/* Classify's user work over RAM_BYTES at @ram, prefetching @ahead pages ahead (0: none). */
static uint32_t classify_pass(const uint8_t *ram, uint8_t *buf, unsigned ahead)
{
	uint32_t crc = 0;

	for (size_t p = 0; p < RAM_BYTES / PAGE; p++) {
		const uint8_t *pg = ram + p * PAGE;
		uint8_t *slot = buf + p % (BATCH_BYTES / PAGE) * PAGE;

		if (ahead && p + ahead < RAM_BYTES / PAGE)
			for (unsigned off = 0; off < PAGE; off += CACHE_LINE_BYTES)
				__builtin_prefetch(pg + (size_t)ahead * PAGE + off);
		if (gw_is_zero(pg, PAGE))
			continue;
		memcpy(slot, pg, PAGE);
		crc ^= gw_crc32c(0, slot, PAGE);
	}
	return crc;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double gbps(uint64_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0;
}

int main(int argc, char **argv)
{
	int passes = argc > 1 ? atoi(argv[1]) : 3;
	int fd = memfd_create("limits", 0);
	uint8_t *ram, *buf = aligned_alloc(4096, BATCH_BYTES);
	uint64_t best[NR_LIMITS];
	uint64_t x = 0x9e3779b97f4a7c15ull, zero_bytes = 0;
	volatile uint32_t sink = 0;
	static const char *const names[NR_LIMITS] = { "memcpy", "pread", "read+crc", "crc-hot", "zero",
						      "classify", "classify+pf" };

	for (int i = 0; i < NR_LIMITS; i++)
		best[i] = UINT64_MAX;
	if (fd < 0 || ftruncate(fd, RAM_BYTES) || !buf || passes < 1) {
		fprintf(stderr, "limits_bench: setup failed\n");
		return 1;
	}
	ram = mmap(NULL, RAM_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ram == MAP_FAILED) {
		fprintf(stderr, "limits_bench: mmap failed\n");
		return 1;
	}
	for (size_t p = 0; p < RAM_BYTES / PAGE; p++) {
		uint8_t *pg = ram + p * PAGE;

		if (p % 4 == 0) {
			memset(pg, 0, PAGE);
			continue;
		}
		for (unsigned i = 0; i < PAGE; i += 8) {
			x = x * 6364136223846793005ull + 1442695040888963407ull;
			memcpy(pg + i, p % 2 ? "godwit  " : (const char *)&x, 8);
		}
	}
	for (int r = 0; r < passes; r++) {
		uint64_t t0, t;

		t0 = now_ns();
		for (size_t o = 0; o < RAM_BYTES; o += BATCH_BYTES)
			memcpy(buf, ram + o, BATCH_BYTES);
		t = now_ns() - t0;
		best[0] = t < best[0] ? t : best[0];
		t0 = now_ns();
		for (size_t o = 0; o < RAM_BYTES; o += BATCH_BYTES)
			if (pread(fd, buf, BATCH_BYTES, (off_t)o) != (ssize_t)BATCH_BYTES)
				return 1;
		t = now_ns() - t0;
		best[1] = t < best[1] ? t : best[1];
		t0 = now_ns();
		for (size_t o = 0; o < RAM_BYTES; o += PAGE)
			if (!gw_is_zero(ram + o, PAGE))
				sink ^= gw_crc32c(0, ram + o, PAGE);
		t = now_ns() - t0;
		best[2] = t < best[2] ? t : best[2];
		t0 = now_ns();
		for (size_t o = 0; o < RAM_BYTES; o += BATCH_BYTES)
			sink ^= gw_crc32c(0, buf, BATCH_BYTES);
		t = now_ns() - t0;
		best[3] = t < best[3] ? t : best[3];
		t0 = now_ns();
		zero_bytes = 0;
		for (size_t o = 0; o < RAM_BYTES; o += 4 * PAGE) {
			sink ^= gw_is_zero(ram + o, PAGE);
			zero_bytes += PAGE;
		}
		t = now_ns() - t0;
		best[4] = t < best[4] ? t : best[4];
		for (int k = 0; k < 2; k++) {
			t0 = now_ns();
			sink ^= classify_pass(ram, buf, k ? PREFETCH_AHEAD_PAGES : 0);
			t = now_ns() - t0;
			best[5 + k] = t < best[5 + k] ? t : best[5 + k];
		}
	}
	for (int i = 0; i < NR_LIMITS; i++)
		printf("%-9s %6.2f GB/s\n", names[i], gbps(i == 4 ? zero_bytes : RAM_BYTES, best[i]));
	printf("{\"memcpy-gbps\":%.3f,\"pread-gbps\":%.3f,\"read-crc-gbps\":%.3f,\"crc-hot-gbps\":%.3f,"
	       "\"zero-gbps\":%.3f,\"classify-gbps\":%.3f,\"classify-prefetch-gbps\":%.3f}\n",
	       gbps(RAM_BYTES, best[0]), gbps(RAM_BYTES, best[1]), gbps(RAM_BYTES, best[2]),
	       gbps(RAM_BYTES, best[3]), gbps(zero_bytes, best[4]), gbps(RAM_BYTES, best[5]),
	       gbps(RAM_BYTES, best[6]));
	return (int)(sink & 0);
}
