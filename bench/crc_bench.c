/* SPDX-License-Identifier: MIT */
/*
 * gw_crc32c throughput over 4 MiB buffers (random data), rotating through
 * several buffers so the working set (64 MiB) exceeds the caches; best of N
 * passes. Usage: crc_bench [repeats]
 */
#include "util/crc32c.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BUF_BYTES (4u << 20)
#define NR_BUFS 16

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
	int repeats = argc > 1 ? atoi(argv[1]) : 5;
	unsigned char *bufs = malloc((size_t)NR_BUFS * BUF_BYTES);
	uint64_t x = 0x2545f4914f6cdd1dull, best_ns = UINT64_MAX;
	uint32_t sink = 0;

	if (!bufs || repeats < 1) {
		fprintf(stderr, "crc_bench: bad repeats or out of memory\n");
		return 1;
	}
	for (size_t i = 0; i < (size_t)NR_BUFS * BUF_BYTES; i += 8) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t w = x * 0x2545f4914f6cdd1dull;
		memcpy(bufs + i, &w, sizeof(w));
	}
	for (int r = 0; r < repeats; r++) {
		uint64_t t0 = now_ns();

		for (int b = 0; b < NR_BUFS; b++)
			sink ^= gw_crc32c(0, bufs + (size_t)b * BUF_BYTES, BUF_BYTES);
		uint64_t dt_ns = now_ns() - t0;

		if (dt_ns < best_ns)
			best_ns = dt_ns;
	}
	printf("crc32c buf_bytes=%u nr_bufs=%d repeats=%d gibps=%.2f (xor of crcs %#x)\n",
	       BUF_BYTES, NR_BUFS, repeats,
	       (double)NR_BUFS * BUF_BYTES / (double)(1ull << 30) / ((double)best_ns / 1e9), sink);
	free(bufs);
	return 0;
}
