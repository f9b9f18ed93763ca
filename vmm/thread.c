/* SPDX-License-Identifier: MIT */
/* The VMM's threads (thread.h). */
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include "thread.h"

void vmm_thread_attr_normal(pthread_attr_t *attr)
{
	pthread_attr_init(attr);
	pthread_attr_setinheritsched(attr, PTHREAD_EXPLICIT_SCHED);
	pthread_attr_setschedpolicy(attr, SCHED_OTHER);
	pthread_attr_setschedparam(attr, &(struct sched_param){ .sched_priority = 0 });
}

int vmm_thread_start(pthread_t *t, void *(*fn)(void *), void *arg)
{
	pthread_attr_t attr;
	int ret;

	vmm_thread_attr_normal(&attr);
	ret = pthread_create(t, &attr, fn, arg);
	pthread_attr_destroy(&attr);
	return ret;
}

void vmm_thread_name(pthread_t t, const char *fmt, ...)
{
	char name[16];	/* TASK_COMM_LEN */
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(name, sizeof(name), fmt, ap);
	va_end(ap);
	(void)pthread_setname_np(t, name);
}
