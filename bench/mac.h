/* SPDX-License-Identifier: MIT */
/* The network benchmarks' MAC argument: "aa:bb:cc:dd:ee:ff", nothing after it. */
#ifndef GW_BENCH_MAC_H
#define GW_BENCH_MAC_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

/* 0, or -EINVAL for anything but six hex bytes separated by colons. */
static inline int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char tail;

	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &tail) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -EINVAL;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

#endif
