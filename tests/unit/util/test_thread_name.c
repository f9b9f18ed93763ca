/* SPDX-License-Identifier: MIT */
/*
 * Invariant: gw_thread_name() gives a running thread the formatted name
 * the kernel reports back (/proc/PID/task/TID/comm, pthread_getname_np),
 * whole when it fits in 15 characters (the longest the engine makes,
 * a source channel sender of 64 channels: "gw-src-ch63-tx") and cut to its
 * first 15 otherwise, never refused for its length.
 */
#include "util/thread_name.h"
#include "test_util.h"

#include <pthread.h>
#include <string.h>

TEST_DEFINE_FAILURES;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done;

static void *idle_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

static void check_name(pthread_t t, const char *want)
{
	char got[32];

	TEST_ASSERT(pthread_getname_np(t, got, sizeof(got)) == 0, "pthread_getname_np");
	TEST_CHECK(strcmp(got, want) == 0, "name \"%s\", want \"%s\"", got, want);
}

int main(void)
{
	pthread_t t;

	TEST_ASSERT(pthread_create(&t, NULL, idle_main, NULL) == 0, "pthread_create");
	gw_thread_name(t, "gw-%s-ch%u-tx", "src", 63u);
	check_name(t, "gw-src-ch63-tx");
	gw_thread_name(t, "gw-%s-%u", "a-name-of-more-than-fifteen", 7u);
	check_name(t, "gw-a-name-of-mo");
	gw_thread_name(t, "vcpu%u", 0u);
	check_name(t, "vcpu0");
	pthread_mutex_lock(&lock);
	done = 1;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	pthread_join(t, NULL);
	TEST_EXIT();
}
