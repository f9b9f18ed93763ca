/* SPDX-License-Identifier: MIT */
/* MMIO regions and their dispatch (mmio_bus.h). */
#include <errno.h>
#include <string.h>
#include "dev/mmio_bus.h"

int vmm_mmio_register(struct vmm_mmio_bus *bus, uint64_t base_gpa, uint64_t len_bytes,
		      vmm_mmio_fn fn, void *opaque)
{
	if (!len_bytes || !fn || base_gpa + len_bytes < base_gpa)
		return -EINVAL;
	for (unsigned i = 0; i < bus->nr; i++) {
		const struct vmm_mmio_region *r = &bus->regions[i];

		if (base_gpa < r->base_gpa + r->len_bytes && r->base_gpa < base_gpa + len_bytes)
			return -EEXIST;
	}
	if (bus->nr >= VMM_MMIO_MAX_REGIONS)
		return -ENOSPC;
	bus->regions[bus->nr++] = (struct vmm_mmio_region){ base_gpa, len_bytes, fn, opaque };
	return 0;
}

bool vmm_mmio_access(const struct vmm_mmio_bus *bus, uint64_t gpa, void *data, uint32_t len,
		     bool is_write)
{
	if (len == 0 || len > VMM_MMIO_MAX_ACCESS_BYTES)
		return false;
	for (unsigned i = 0; bus && i < bus->nr; i++) {
		const struct vmm_mmio_region *r = &bus->regions[i];

		if (gpa >= r->base_gpa && gpa - r->base_gpa < r->len_bytes &&
		    len <= r->len_bytes - (gpa - r->base_gpa)) {
			r->fn(r->opaque, gpa - r->base_gpa, data, len, is_write);
			return true;
		}
	}
	if (!is_write)
		memset(data, 0xff, len);
	return false;
}
