/* SPDX-License-Identifier: MIT */
/*
 * Zero-page detection throughput, per variant the CPU has, over a buffer of
 * 4 KiB pages far larger than the caches (256 MiB by default):
 *   zero_pages_gibps     all pages zero: every byte is read (the worst case)
 *   nonzero_pages_gibps  every page holds data: the early exit after the head
 * Throughput counts the page bytes classified per second, best of N passes.
 * Usage: zero_bench [buffer_mib] [repeats]
 */
#include "mem/zero.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PAGE_BYTES 4096

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Best-of-@repeats seconds for one pass over all pages; *nr_zero_pages out. */
static double best_pass_s(const struct gw_zero_variant *v, const unsigned char *buf,
			  size_t nr_pages, int repeats, size_t *nr_zero_pages)
{
	uint64_t best_ns = UINT64_MAX;

	for (int r = 0; r < repeats; r++) {
		uint64_t t0 = now_ns();
		size_t zeros = 0;

		for (size_t i = 0; i < nr_pages; i++)
			zeros += v->is_zero(buf + i * PAGE_BYTES, PAGE_BYTES);
		uint64_t dt_ns = now_ns() - t0;

		if (dt_ns < best_ns)
			best_ns = dt_ns;
		*nr_zero_pages = zeros;
	}
	return (double)best_ns / 1e9;
}

int main(int argc, char **argv)
{
	size_t buf_mib = argc > 1 ? strtoul(argv[1], NULL, 0) : 256;
	int repeats = argc > 2 ? atoi(argv[2]) : 5;
	size_t buf_bytes = buf_mib << 20, nr_pages = buf_bytes / PAGE_BYTES;
	unsigned char *zero_buf, *data_buf;
	double gib = (double)buf_bytes / (double)(1ull << 30);
	uint64_t x = 0x9e3779b97f4a7c15ull;

	if (!nr_pages || repeats < 1) {
		fprintf(stderr, "usage: %s [buffer_mib >= 1] [repeats >= 1]\n", argv[0]);
		return 2;
	}
	zero_buf = aligned_alloc(PAGE_BYTES, buf_bytes);
	data_buf = aligned_alloc(PAGE_BYTES, buf_bytes);
	if (!zero_buf || !data_buf) {
		fprintf(stderr, "zero_bench: cannot allocate 2 x %zu MiB\n", buf_mib);
		return 1;
	}
	/* Write every byte so each page is private memory, not the shared zero page. */
	memset(zero_buf, 0, buf_bytes);
	for (size_t i = 0; i < buf_bytes; i += 8) {
		x ^= x >> 12;
		x ^= x << 25;
		x ^= x >> 27;
		uint64_t w = (x * 0x2545f4914f6cdd1dull) | 1;	/* never zero */
		memcpy(data_buf + i, &w, sizeof(w));
	}
	printf("zero-detect buffer_mib=%zu page_bytes=%d repeats=%d selected=%s\n", buf_mib,
	       PAGE_BYTES, repeats, gw_zero_selected()->name);
	for (size_t i = 0; gw_zero_variants[i]; i++) {
		const struct gw_zero_variant *v = gw_zero_variants[i];
		size_t zeros_z = 0, zeros_d = 0;

		if (!v->cpu_has()) {
			printf("zero-detect variant=%s unavailable\n", v->name);
			continue;
		}
		double zero_s = best_pass_s(v, zero_buf, nr_pages, repeats, &zeros_z);
		double data_s = best_pass_s(v, data_buf, nr_pages, repeats, &zeros_d);

		if (zeros_z != nr_pages || zeros_d != 0) {
			fprintf(stderr, "zero-detect variant=%s WRONG: %zu/%zu zero pages seen as "
				"zero, %zu data pages seen as zero\n", v->name, zeros_z, nr_pages,
				zeros_d);
			return 1;
		}
		printf("zero-detect variant=%s zero_pages_gibps=%.2f nonzero_pages_gibps=%.2f\n",
		       v->name, gib / zero_s, gib / data_s);
		fflush(stdout);
	}
	free(zero_buf);
	free(data_buf);
	return 0;
}
