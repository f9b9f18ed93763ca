/* SPDX-License-Identifier: MIT */
/*
 * The computation of the `compute` guest, shared with the tests that check
 * its result on the host: a state of integer words in memory and registers
 * plus a double accumulator the compiler keeps in an SSE register, so that
 * a save/load that lost general registers, memory or FPU/SSE state ends
 * with another result. Deterministic: SSE2 double arithmetic is IEEE 754
 * on the host and in the guest alike.
 */
#ifndef GW_COMPUTE_ALGO_H
#define GW_COMPUTE_ALGO_H

#include <stdint.h>
#include "content.h"

#define COMPUTE_WORDS 64

struct compute_state {
	uint64_t words[COMPUTE_WORDS];
	uint64_t x;
	double acc;
	uint64_t done;			/* iterations done */
};

static inline void compute_init(struct compute_state *s, uint64_t seed)
{
	for (unsigned i = 0; i < COMPUTE_WORDS; i++)
		s->words[i] = vmm_mix64(seed + i);
	s->x = seed;
	s->acc = 1.0;
	s->done = 0;
}

/* @iters more steps; x and acc stay in registers across the loop. */
static inline void compute_steps(struct compute_state *s, uint64_t iters)
{
	uint64_t x = s->x, done = s->done;
	double acc = s->acc;

	for (uint64_t i = 0; i < iters; i++, done++) {
		x = vmm_mix64(x + done);
		s->words[x % COMPUTE_WORDS] ^= x;
		acc = acc * 0.999999 + (double)(x & 0xffff) * 1e-6;
	}
	s->x = x;
	s->acc = acc;
	s->done = done;
}

static inline uint64_t compute_result(const struct compute_state *s)
{
	uint64_t h = s->x;
	union { double d; uint64_t u; } a = { .d = s->acc };

	for (unsigned i = 0; i < COMPUTE_WORDS; i++)
		h = vmm_mix64(h ^ s->words[i]);
	return h ^ a.u;
}

#endif
