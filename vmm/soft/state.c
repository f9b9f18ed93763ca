/* SPDX-License-Identifier: MIT */
/*
 * The soft VM's state section "soft-vcpus", version 1, little-endian, exactly
 *
 *   u32 nr_vcpus (1..64)   u32 spec_len (1..127)   u32 fill (wire: 0 none,
 *   1 zero, 2 mix, 3 random, 4 text)   u32 flags (bit 0: initial content
 *   unknown)   u64 seed   u64 ram_pages
 *   spec_len bytes of canonical workload spec (no NUL)
 *   nr_vcpus x { u64 cursor, u64 gen, u64 progress }
 *
 * The destination recomputes the slices from the spec, its RAM size and
 * nr_vcpus, and refuses anything that does not fit: the section is input
 * from another host, every field is checked before anything is applied.
 *
 * Threads: called by the engine callbacks under the VM's ctl, with the
 * vCPUs parked (save) or not started (load).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/log.h>
#include "soft/soft_internal.h"

#define STATE_SECTION "soft-vcpus"
#define STATE_VERSION 1u
#define STATE_HEADER_BYTES 32u
#define STATE_VCPU_BYTES 24u
#define STATE_FLAG_INIT_UNKNOWN 1u

/*
 * Little-endian fields of the section. The one place they are written and
 * read here; <godwit/buf.h> will replace them once it is public.
 */
static void put_u32(uint8_t *p, uint32_t v)
{
	for (unsigned i = 0; i < 4; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
	for (unsigned i = 0; i < 8; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_u32(const uint8_t *p)
{
	uint32_t v = 0;

	for (unsigned i = 0; i < 4; i++)
		v |= (uint32_t)p[i] << (8 * i);
	return v;
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v = 0;

	for (unsigned i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Fill wire numbers are fixed; the enum may change. */
static uint32_t fill_to_wire(enum vmm_fill f)
{
	switch (f) {
	case VMM_FILL_ZERO: return 1;
	case VMM_FILL_MIX: return 2;
	case VMM_FILL_RANDOM: return 3;
	case VMM_FILL_TEXT: return 4;
	default: return 0;
	}
}

static int fill_from_wire(uint32_t w, enum vmm_fill *f)
{
	static const enum vmm_fill map[] = {
		VMM_FILL_NONE, VMM_FILL_ZERO, VMM_FILL_MIX, VMM_FILL_RANDOM, VMM_FILL_TEXT,
	};

	if (w >= sizeof(map) / sizeof(map[0]))
		return -EINVAL;
	*f = map[w];
	return 0;
}

int soft_state_save(const struct soft_vm *vm, struct gw_state *st)
{
	size_t spec_len = strlen(vm->spec);
	size_t len = STATE_HEADER_BYTES + spec_len + (size_t)STATE_VCPU_BYTES * vm->nr_vcpus;
	uint8_t *buf = calloc(1, len), *p;
	int ret;

	if (!buf)
		return -ENOMEM;
	put_u32(buf, vm->nr_vcpus);
	put_u32(buf + 4, (uint32_t)spec_len);
	put_u32(buf + 8, fill_to_wire(vm->init_fill));
	put_u32(buf + 12, vm->init_known ? 0 : STATE_FLAG_INIT_UNKNOWN);
	put_u64(buf + 16, vm->init_seed);
	put_u64(buf + 24, vm->ram_pages);
	memcpy(buf + STATE_HEADER_BYTES, vm->spec, spec_len);
	p = buf + STATE_HEADER_BYTES + spec_len;
	for (unsigned i = 0; i < vm->nr_vcpus; i++, p += STATE_VCPU_BYTES) {
		put_u64(p, vm->vcpus[i].cursor);
		put_u64(p + 8, vm->vcpus[i].gen);
		put_u64(p + 16, atomic_load(&vm->vcpus[i].progress));
	}
	ret = gw_state_add(st, STATE_SECTION, STATE_VERSION, buf, len);
	free(buf);
	return ret;
}

/* The section as read, every field checked (load_header, load_vcpus). */
struct loaded {
	const uint8_t *data;		/* the section */
	uint32_t nr_vcpus, spec_len, flags;
	enum vmm_fill fill;
	struct vmm_workload wl;
	char spec[VMM_WORKLOAD_SPEC_MAX];
	uint64_t progress;		/* sum over the vCPUs */
};

/* The section's header and spec. 0 or gw_state_reject's value. */
static int load_header(const struct soft_vm *vm, struct gw_state *st, struct loaded *l)
{
	char why[SOFT_MSG_MAX] = "";
	uint32_t version;
	uint64_t ram_pages;
	size_t len;

	l->data = gw_state_find(st, STATE_SECTION, &version, &len);
	if (!l->data)
		return gw_state_reject(st, -EINVAL, "section %s missing", STATE_SECTION);
	if (version != STATE_VERSION)
		return gw_state_reject(st, -EINVAL, "section %s version %u unsupported (want %u)",
				       STATE_SECTION, version, STATE_VERSION);
	if (len < STATE_HEADER_BYTES)
		return gw_state_reject(st, -EINVAL, "section %s too short: %zu bytes",
				       STATE_SECTION, len);
	l->nr_vcpus = get_u32(l->data);
	l->spec_len = get_u32(l->data + 4);
	l->flags = get_u32(l->data + 12);
	ram_pages = get_u64(l->data + 24);
	if (l->nr_vcpus < 1 || l->nr_vcpus > SOFT_MAX_VCPUS)
		return gw_state_reject(st, -EINVAL, "bad vCPU count %u", l->nr_vcpus);
	if (l->spec_len < 1 || l->spec_len >= VMM_WORKLOAD_SPEC_MAX)
		return gw_state_reject(st, -EINVAL, "bad workload spec length %u", l->spec_len);
	if (len != STATE_HEADER_BYTES + l->spec_len + (size_t)STATE_VCPU_BYTES * l->nr_vcpus)
		return gw_state_reject(st, -EINVAL, "section %s is %zu bytes, expected %zu",
				       STATE_SECTION, len, STATE_HEADER_BYTES + l->spec_len +
				       (size_t)STATE_VCPU_BYTES * l->nr_vcpus);
	if (fill_from_wire(get_u32(l->data + 8), &l->fill) < 0 ||
	    (l->flags & ~STATE_FLAG_INIT_UNKNOWN))
		return gw_state_reject(st, -EINVAL, "bad fill %u or flags %#x",
				       get_u32(l->data + 8), l->flags);
	if (ram_pages != vm->ram_pages)
		return gw_state_reject(st, -EINVAL, "source has %" PRIu64 " pages of RAM, here %"
				       PRIu64, ram_pages, vm->ram_pages);
	memcpy(l->spec, l->data + STATE_HEADER_BYTES, l->spec_len);
	l->spec[l->spec_len] = '\0';
	if (strlen(l->spec) != l->spec_len)
		return gw_state_reject(st, -EINVAL, "NUL inside the workload spec");
	if (vmm_workload_parse(l->spec, &l->wl, why, sizeof(why)) < 0)
		return gw_state_reject(st, -EINVAL, "workload '%s': %s", l->spec, why);
	return 0;
}

/* Each vCPU's cursor and generation against its slice here. 0 or gw_state_reject's. */
static int load_vcpus(const struct soft_vm *vm, struct gw_state *st, struct loaded *l)
{
	uint64_t ws_pages = vmm_workload_ws_pages(&l->wl, vm->ram_pages);
	const uint8_t *p = l->data + STATE_HEADER_BYTES + l->spec_len;
	uint32_t nr = l->nr_vcpus;

	if (l->wl.kind != VMM_WL_IDLE && ws_pages * SOFT_PAGE_BYTES != l->wl.ws_bytes &&
	    l->wl.ws_given)
		return gw_state_reject(st, -EINVAL, "workload '%s' does not fit %" PRIu64 " pages",
				       l->spec, vm->ram_pages);
	l->progress = 0;
	for (unsigned i = 0; i < nr; i++, p += STATE_VCPU_BYTES) {
		uint64_t first = ws_pages * i / nr, n = ws_pages * (i + 1) / nr - first;
		uint64_t cursor = get_u64(p), gen = get_u64(p + 8), prog = get_u64(p + 16);

		if ((n && cursor >= n) || (!n && cursor) || gen < 1 || gen > (1ull << 62))
			return gw_state_reject(st, -EINVAL, "vCPU %u: cursor %" PRIu64 " gen %" PRIu64
					       " outside its slice of %" PRIu64 " pages",
					       i, cursor, gen, n);
		if (prog > UINT64_MAX - l->progress)
			return gw_state_reject(st, -EINVAL, "vCPU %u: progress overflows", i);
		l->progress += prog;
	}
	return 0;
}

int soft_state_load(struct soft_vm *vm, struct gw_state *st)
{
	struct loaded l;
	const uint8_t *p;
	int ret;

	if (!vm->info.nr_blocks)
		return gw_state_reject(st, -EINVAL, "soft VM has no RAM yet");
	ret = load_header(vm, st, &l);
	if (ret == 0)
		ret = load_vcpus(vm, st, &l);
	if (ret)
		return ret;

	vm->wl = l.wl;
	vm->nr_vcpus = l.nr_vcpus;
	soft_run_layout(vm);
	p = l.data + STATE_HEADER_BYTES + l.spec_len;
	for (unsigned i = 0; i < l.nr_vcpus; i++, p += STATE_VCPU_BYTES) {
		vm->vcpus[i].cursor = get_u64(p);
		vm->vcpus[i].gen = get_u64(p + 8);
		atomic_store(&vm->vcpus[i].progress, get_u64(p + 16));
	}
	vm->init_fill = l.fill;
	vm->init_seed = get_u64(l.data + 16);
	vm->init_known = !(l.flags & STATE_FLAG_INIT_UNKNOWN);
	vm->loaded = true;
	gw_log(GW_LOG_INFO, "soft", "state_loaded", "workload=%s vcpus=%u progress=%" PRIu64,
	       vm->spec, l.nr_vcpus, l.progress);
	return 0;
}
