/* SPDX-License-Identifier: MIT */
/*
 * KVM-selftests-style helpers. TEST_ASSERT prints the expression, file:line,
 * errno and a message, then exits 1; after 20 failing checks of TEST_CHECK
 * further reports are capped. A missing capability: test_skip() exits 77.
 */
#ifndef GW_TEST_UTIL_H
#define GW_TEST_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KSFT_SKIP 77

#define TEST_ASSERT(cond, fmt, ...) do {					\
	if (!(cond)) {								\
		int __e = errno;						\
		fprintf(stderr, "==== Test Assertion Failure ====\n"		\
			"  %s:%d: %s\n  errno=%d (%s)\n  " fmt "\n",		\
			__FILE__, __LINE__, #cond, __e, strerror(__e),		\
			##__VA_ARGS__);						\
		exit(1);							\
	}									\
} while (0)

/* Non-fatal check: counts failures, reports at most 20. */
extern int test_failures;
#define TEST_CHECK(cond, fmt, ...) do {						\
	if (!(cond)) {								\
		if (++test_failures <= 20)					\
			fprintf(stderr, "%s:%d: check failed: %s: " fmt "\n",	\
				__FILE__, __LINE__, #cond, ##__VA_ARGS__);	\
		else if (test_failures == 21)					\
			fprintf(stderr, "(further failures not shown)\n");	\
	}									\
} while (0)
#define TEST_DEFINE_FAILURES int test_failures
#define TEST_EXIT() do {							\
	if (test_failures)							\
		fprintf(stderr, "%d check(s) failed\n", test_failures);	\
	return test_failures ? 1 : 0;						\
} while (0)

#define test_skip(fmt, ...) do {						\
	printf("SKIP: " fmt "\n", ##__VA_ARGS__);				\
	exit(KSFT_SKIP);							\
} while (0)

#endif
