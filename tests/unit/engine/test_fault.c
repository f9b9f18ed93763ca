/* SPDX-License-Identifier: MIT */
/*
 * Invariant: a fault point fires by its rule and nowhere else, and a
 * release build holds none of it. Built twice: against gw_engine_fi
 * (test_fault_fi, GW_FAULT_INJECTION) each point armed through GW_FAULT
 * fires only at its own site and only when the value passed reaches the
 * argument as its rule says (at least, exactly the n-th and never 0, round
 * 0 only, always); a dying point kills the process with SIGKILL and an
 * undue one does not. Against the release engine (test_fault) no point
 * fires and no argument of the macros is evaluated.
 */
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "core/session_int.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

#ifdef GW_FAULT_INJECTION
static void arm(struct gw_session *s, const char *spec)
{
	setenv("GW_FAULT", spec, 1);
	gw_fault_init(s);
	s->round = 0;
}

/* Only @point may fire, with any value. */
static void check_only(struct gw_session *s, enum gw_fault_point point)
{
	for (unsigned p = 1; p < GW_FAULT__COUNT; p++)
		if (p != point)
			TEST_CHECK(!GW_FAULT_DUE(s, (enum gw_fault_point)p, UINT64_MAX), "point %u fired", p);
}

/* In a child: reach @point with @v; true when the child was killed by SIGKILL. */
static bool dies(struct gw_session *s, enum gw_fault_point point, uint64_t v)
{
	int status;
	pid_t pid = fork();

	TEST_ASSERT(pid >= 0, "fork");
	if (!pid) {
		GW_FAULT_POINT(s, point, v);
		_exit(0);
	}
	TEST_ASSERT(waitpid(pid, &status, 0) == pid, "waitpid");
	return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

int main(void)
{
	struct gw_session *s = calloc(1, sizeof(*s));
	struct gw_conn conn = { .fd = -1 };

	TEST_ASSERT(s, "calloc");
	arm(s, "src-corrupt:3");
	TEST_CHECK(s->fault_point == GW_FAULT_SRC_CORRUPT && s->fault_arg == 3, "armed %d", s->fault_point);
	TEST_CHECK(!GW_FAULT_DUE(s, GW_FAULT_SRC_CORRUPT, 2), "2nd frame");
	TEST_CHECK(GW_FAULT_DUE(s, GW_FAULT_SRC_CORRUPT, 3), "3rd frame");
	TEST_CHECK(!GW_FAULT_DUE(s, GW_FAULT_SRC_CORRUPT, 4), "4th frame");
	check_only(s, GW_FAULT_SRC_CORRUPT);
	GW_FAULT_CORRUPT_NEXT(s, &conn, 2);
	TEST_CHECK(!conn.fault_corrupt_next, "corrupted at the 2nd frame");
	GW_FAULT_CORRUPT_NEXT(s, &conn, 3);
	TEST_CHECK(conn.fault_corrupt_next, "not corrupted at the 3rd frame");
	arm(s, "src-corrupt:0");	/* 0 = a frame without data: never */
	TEST_CHECK(!GW_FAULT_DUE(s, GW_FAULT_SRC_CORRUPT, 0), "frame without data");

	arm(s, "src-pc-cut:100");
	TEST_CHECK(!GW_FAULT_DUE(s, GW_FAULT_SRC_PC_CUT, 99), "99 pushed");
	TEST_CHECK(GW_FAULT_DUE(s, GW_FAULT_SRC_PC_CUT, 100) && GW_FAULT_DUE(s, GW_FAULT_SRC_PC_CUT, 101),
		   "100, 101 pushed");
	check_only(s, GW_FAULT_SRC_PC_CUT);

	arm(s, "dst-refuse-state");
	TEST_CHECK(GW_FAULT_DUE(s, GW_FAULT_DST_REFUSE_STATE, 0), "always");
	check_only(s, GW_FAULT_DST_REFUSE_STATE);

	arm(s, "no-such-point:1");
	TEST_CHECK(s->fault_point == GW_FAULT_NONE, "unknown name armed %d", s->fault_point);
	check_only(s, GW_FAULT_NONE);

	arm(s, "dst-round0:4096");
	TEST_CHECK(!dies(s, GW_FAULT_DST_ROUND0, 4095), "died below the bytes");
	TEST_CHECK(dies(s, GW_FAULT_DST_ROUND0, 4096), "lived at the bytes");
	TEST_CHECK(!dies(s, GW_FAULT_DST_FINAL, 0), "another point died");
	s->round = 1;
	TEST_CHECK(!dies(s, GW_FAULT_DST_ROUND0, 1 << 20), "died in round 1");
	arm(s, "dst-round-n:2");
	TEST_CHECK(!dies(s, GW_FAULT_DST_ROUND_N, 1) && dies(s, GW_FAULT_DST_ROUND_N, 2), "round-n");
	arm(s, "dst-after-go");
	TEST_CHECK(dies(s, GW_FAULT_DST_AFTER_GO, 0), "after-go lived");
	free(s);
	TEST_EXIT();
}
#else
int main(void)
{
	struct gw_session *s = NULL;	/* never dereferenced: nothing is evaluated */
	struct gw_conn *conn = NULL;
	int evals = 0;

	setenv("GW_FAULT", "dst-slow:1000000", 1);
	gw_fault_init(s);
	GW_FAULT_POINT(s, GW_FAULT_DST_FINAL, (uint64_t)++evals);
	GW_FAULT_POINT(s, GW_FAULT_DST_SLOW, (uint64_t)++evals);
	GW_FAULT_CORRUPT_NEXT(s, conn, (uint64_t)++evals);
	TEST_CHECK(!GW_FAULT_DUE(s, GW_FAULT_DST_REFUSE_STATE, (uint64_t)++evals), "fired in a release build");
	TEST_CHECK(evals == 0, "%d argument(s) evaluated", evals);
	TEST_EXIT();
}
#endif
