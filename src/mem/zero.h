/* SPDX-License-Identifier: MIT */
/*
 * Zero-page detection. Variants: portable, sse2, avx2, avx512 (each in its
 * own file compiled with its own target flags). The best one the CPU has is
 * chosen once (gw_zero_init, also done lazily by gw_is_zero) from a
 * preference table; tests and the micro-benchmark iterate every variant.
 */
#ifndef GW_ZERO_H
#define GW_ZERO_H

#include <stdbool.h>
#include <stddef.h>

struct gw_zero_variant {
	const char *name;			/* "avx512", "avx2", "sse2", "portable" */
	bool (*cpu_has)(void);			/* usable on this CPU */
	bool (*is_zero)(const void *buf, size_t len_bytes);	/* any alignment, any length */
};

/* Preference order, NULL-terminated. */
extern const struct gw_zero_variant *const gw_zero_variants[];

void gw_zero_init(void);
const struct gw_zero_variant *gw_zero_selected(void);
bool gw_is_zero(const void *buf, size_t len_bytes);

#endif
