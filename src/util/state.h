/* SPDX-License-Identifier: MIT */
/* Internal layout of struct gw_state (opaque to VMMs). */
#ifndef GW_STATE_H
#define GW_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <godwit/vm.h>

#define GW_STATE_MAX_SECTIONS 256
#define GW_STATE_MAX_BYTES (8u << 20)	/* all sections together; wire limit too */

struct gw_section {
	char name[GW_SECTION_NAME_MAX];
	uint32_t version;
	size_t len_bytes;
	void *data;			/* malloc'd, owned by the gw_state */
};

struct gw_state {
	unsigned nr_sections;
	size_t total_bytes;
	struct gw_section sections[GW_STATE_MAX_SECTIONS];
	char reject_reason[200];	/* set once by gw_state_reject */
};

void gw_state_init(struct gw_state *st);
void gw_state_release(struct gw_state *st);	/* frees sections, re-inits */

#endif
