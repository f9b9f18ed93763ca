/* SPDX-License-Identifier: MIT */
/*
 * Zero-detection dispatch: an explicit preference table of variants, the
 * first one whose cpu_has() is true is selected once.
 *
 * Thread ownership: `selected` is process-wide but immutable once set. It is
 * written exactly once, inside pthread_once, and published with a release
 * store; readers use an acquire load, so any thread may call gw_is_zero()
 * concurrently, including before gw_zero_init().
 */
#include "mem/zero_impl.h"

#include <pthread.h>

const struct gw_zero_variant *const gw_zero_variants[] = {
	&gw_zero_avx512, &gw_zero_avx2, &gw_zero_sse2, &gw_zero_portable, NULL,
};

static pthread_once_t select_once = PTHREAD_ONCE_INIT;
static const struct gw_zero_variant *selected;

static void select_variant(void)
{
	const struct gw_zero_variant *v = &gw_zero_portable;

	for (size_t i = 0; gw_zero_variants[i]; i++) {
		if (gw_zero_variants[i]->cpu_has()) {
			v = gw_zero_variants[i];
			break;
		}
	}
	__atomic_store_n(&selected, v, __ATOMIC_RELEASE);
}

void gw_zero_init(void)
{
	pthread_once(&select_once, select_variant);
}

const struct gw_zero_variant *gw_zero_selected(void)
{
	const struct gw_zero_variant *v = __atomic_load_n(&selected, __ATOMIC_ACQUIRE);

	if (!v) {
		gw_zero_init();
		v = __atomic_load_n(&selected, __ATOMIC_ACQUIRE);
	}
	return v;
}

bool gw_is_zero(const void *buf, size_t len_bytes)
{
	return gw_zero_selected()->is_zero(buf, len_bytes);
}
