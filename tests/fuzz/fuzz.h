/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer harnesses (tests/fuzz/fuzz_*.c), one entry point each. Built two
 * ways: with clang and -fsanitize=fuzzer (`make fuzz`), and with the
 * regular build and standalone.c's main(), which replays inputs (the
 * generated seeds and tests/fuzz/regress/<harness>/) as unit tests.
 * Every harness treats its input as a wire peer would send it and asserts
 * an invariant with fuzz_check(), which aborts (a crash libFuzzer keeps).
 */
#ifndef GW_FUZZ_H
#define GW_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define fuzz_check(cond, what) do {						\
	if (!(cond)) {								\
		fprintf(stderr, "fuzz invariant broken: %s (%s:%d)\n", what,	\
			__FILE__, __LINE__);					\
		abort();							\
	}									\
} while (0)

/* Quiet the engine's log (fuzzers run millions of inputs). */
void fuzz_quiet_log(void);

#endif
