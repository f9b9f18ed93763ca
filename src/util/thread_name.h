/* SPDX-License-Identifier: MIT */
/*
 * Thread names, for operators: `top -H`, `perf report --sort comm`,
 * /proc/PID/task/TID/comm and gdb show which of godwit's threads spends
 * the CPU (the channel's prep thread or its sender, the fault handler, a
 * digest worker) instead of a column of identical process names. The
 * kernel keeps 15 characters; every name here fits (the longest, "gw-src-ch63-tx").
 * A name is set by the thread that creates the thread, right after
 * pthread_create; failing to set one changes nothing else.
 */
#ifndef GW_UTIL_THREAD_NAME_H
#define GW_UTIL_THREAD_NAME_H

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>

__attribute__((format(printf, 2, 3)))
static inline void gw_thread_name(pthread_t t, const char *fmt, ...)
{
	char name[16];	/* TASK_COMM_LEN */
	va_list ap;

	va_start(ap, fmt);
	(void)vsnprintf(name, sizeof(name), fmt, ap);	/* truncated, never longer */
	va_end(ap);
	(void)pthread_setname_np(t, name);
}

#endif
