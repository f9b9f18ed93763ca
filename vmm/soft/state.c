/* SPDX-License-Identifier: MIT */
/*
 * The soft VM's state section "soft-vcpus", version 2, little-endian, exactly
 *
 *   u32 nr_vcpus (1..64)   u32 spec_len (1..127)   u32 fill (wire: 0 none,
 *   1 zero, 2 mix, 3 random, 4 text)   u32 flags (bit 0: initial content
 *   unknown)   u64 seed   u64 ram_pages
 *   spec_len bytes of canonical workload spec (no NUL)
 *   nr_vcpus x { u64 cursor, u64 gen, u64 progress,
 *                u32 phase, u32 zero, u64 churn, u64 churn_gen }
 *
 * Version 1 (records of the first three fields only, phase 0) is still
 * read: a destination may run a newer godwit than its source.
 *
 * The destination recomputes the slices from the spec, its RAM size and
 * nr_vcpus, and refuses anything that does not fit: the section is input
 * from another host, every field is checked before anything is applied.
 *
 * Threads: called by the base's engine callbacks (vm_ops.c) under the VM's
 * ctl, with the vCPUs parked (save) or not started (load); the base marks
 * the VM loaded when the load succeeds.
 */
#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <godwit/buf.h>
#include <godwit/log.h>
#include "soft/soft_internal.h"

#define STATE_SECTION "soft-vcpus"
#define STATE_VERSION 2u
#define STATE_HEADER_BYTES 32u
#define STATE_VCPU_BYTES 48u
#define STATE_V1_VCPU_BYTES 24u
#define STATE_FLAG_INIT_UNKNOWN 1u
#define STATE_GEN_MAX (1ull << 62)	/* far beyond any run; keeps gen + 1 from wrapping */

int soft_state_save(const struct soft_vm *vm, struct gw_state *st)
{
	size_t spec_len = strlen(vm->base.spec);
	size_t len = STATE_HEADER_BYTES + spec_len + (size_t)STATE_VCPU_BYTES * vm->base.nr_vcpus;
	uint8_t *buf = malloc(len);
	struct gw_wbuf w;
	int ret;

	if (!buf)
		return -ENOMEM;
	gw_wbuf_init(&w, buf, len);
	gw_put_le32(&w, vm->base.nr_vcpus);
	gw_put_le32(&w, (uint32_t)spec_len);
	gw_put_le32(&w, vmm_fill_to_wire(vm->init_fill));
	gw_put_le32(&w, vm->init_known ? 0 : STATE_FLAG_INIT_UNKNOWN);
	gw_put_le64(&w, vm->init_seed);
	gw_put_le64(&w, vm->base.ram_pages);
	gw_put_bytes(&w, vm->base.spec, spec_len);
	for (unsigned i = 0; i < vm->base.nr_vcpus; i++) {
		const struct soft_vcpu *v = &vm->vcpus[i];

		gw_put_le64(&w, v->cursor);
		gw_put_le64(&w, v->gen);
		gw_put_le64(&w, atomic_load(&v->progress));
		gw_put_le32(&w, v->phase);
		gw_put_le32(&w, 0);
		gw_put_le64(&w, v->churn);
		gw_put_le64(&w, v->churn_gen);
	}
	ret = gw_wbuf_done(&w);
	assert(ret == 0 && w.len == len);	/* the sizes above are the layout's */
	ret = gw_state_add(st, STATE_SECTION, STATE_VERSION, buf, len);
	free(buf);
	return ret;
}

/* The section as read, every field checked (load_header, load_vcpus). */
struct loaded {
	const uint8_t *recs;		/* the vCPU records, vcpu_bytes each */
	uint32_t nr_vcpus, spec_len, fill_wire, flags;
	uint64_t seed, ram_pages;
	size_t vcpu_bytes;		/* one vCPU record, by version */
	enum vmm_fill fill;
	struct vmm_workload wl;
	char spec[VMM_WORKLOAD_SPEC_MAX];
	uint64_t progress;		/* sum over the vCPUs */
};

/* The fixed header, in wire order (its size is checked before). */
static void header_read(struct gw_rbuf *r, struct loaded *l)
{
	l->nr_vcpus = gw_get_le32(r);
	l->spec_len = gw_get_le32(r);
	l->fill_wire = gw_get_le32(r);
	l->flags = gw_get_le32(r);
	l->seed = gw_get_le64(r);
	l->ram_pages = gw_get_le64(r);
}

/* The section's header and spec. 0 or gw_state_reject's value. */
static int load_header(const struct soft_vm *vm, struct gw_state *st, struct loaded *l)
{
	char why[SOFT_MSG_MAX] = "";
	const void *data;
	struct gw_rbuf r;
	uint32_t version;
	size_t len;

	data = gw_state_find(st, STATE_SECTION, &version, &len);
	if (!data)
		return gw_state_reject(st, -EINVAL, "section %s missing", STATE_SECTION);
	if (version != STATE_VERSION && version != 1)
		return gw_state_reject(st, -EINVAL, "section %s version %u unsupported (want 1..%u)",
				       STATE_SECTION, version, STATE_VERSION);
	l->vcpu_bytes = version == 1 ? STATE_V1_VCPU_BYTES : STATE_VCPU_BYTES;
	if (len < STATE_HEADER_BYTES)
		return gw_state_reject(st, -EINVAL, "section %s too short: %zu bytes",
				       STATE_SECTION, len);
	gw_rbuf_init(&r, data, len);
	header_read(&r, l);
	if (l->nr_vcpus < 1 || l->nr_vcpus > SOFT_MAX_VCPUS)
		return gw_state_reject(st, -EINVAL, "bad vCPU count %u", l->nr_vcpus);
	if (l->spec_len < 1 || l->spec_len >= VMM_WORKLOAD_SPEC_MAX)
		return gw_state_reject(st, -EINVAL, "bad workload spec length %u", l->spec_len);
	if (len != STATE_HEADER_BYTES + l->spec_len + l->vcpu_bytes * l->nr_vcpus)
		return gw_state_reject(st, -EINVAL, "section %s is %zu bytes, expected %zu",
				       STATE_SECTION, len, STATE_HEADER_BYTES + l->spec_len +
				       l->vcpu_bytes * l->nr_vcpus);
	if (vmm_fill_from_wire(l->fill_wire, &l->fill) < 0 || (l->flags & ~STATE_FLAG_INIT_UNKNOWN))
		return gw_state_reject(st, -EINVAL, "bad fill %u or flags %#x",
				       l->fill_wire, l->flags);
	if (l->ram_pages != vm->base.ram_pages)
		return gw_state_reject(st, -EINVAL, "source has %" PRIu64 " pages of RAM, here %"
				       PRIu64, l->ram_pages, vm->base.ram_pages);
	gw_get_copy(&r, l->spec, l->spec_len);
	l->spec[l->spec_len] = '\0';
	l->recs = gw_get_bytes(&r, l->vcpu_bytes * l->nr_vcpus);
	assert(l->recs && gw_rbuf_done(&r) == 0);	/* the length is checked above */
	if (strlen(l->spec) != l->spec_len)
		return gw_state_reject(st, -EINVAL, "NUL inside the workload spec");
	if (vmm_workload_parse(l->spec, &l->wl, why, sizeof(why)) < 0)
		return gw_state_reject(st, -EINVAL, "workload '%s': %s", l->spec, why);
	return 0;
}

/* One vCPU record as read; version 1 records leave phase, churn, churn_gen at 0, 0, 2. */
struct vcpu_rec {
	uint64_t cursor, gen, progress;
	uint32_t phase, zero;
	uint64_t churn, churn_gen;
};

static void rec_read(const struct loaded *l, unsigned i, struct vcpu_rec *r)
{
	struct gw_rbuf b;

	gw_rbuf_init(&b, l->recs + l->vcpu_bytes * i, l->vcpu_bytes);
	*r = (struct vcpu_rec){ .churn_gen = 2 };
	r->cursor = gw_get_le64(&b);
	r->gen = gw_get_le64(&b);
	r->progress = gw_get_le64(&b);
	if (l->vcpu_bytes < STATE_VCPU_BYTES)
		return;
	r->phase = gw_get_le32(&b);
	r->zero = gw_get_le32(&b);
	r->churn = gw_get_le64(&b);
	r->churn_gen = gw_get_le64(&b);
}

/* Record @r against its vCPU's slice @sl here. NULL when it fits, else what is wrong. */
static const char *rec_misfit(bool balloon, const struct soft_slice *sl, const struct vcpu_rec *r)
{
	uint64_t cur_end = r->phase == 1 ? sl->keep_pages : sl->nr_pages;
	uint64_t freed = sl->nr_pages - sl->keep_pages;

	if (r->zero)
		return "reserved field not zero";
	if (r->phase > 1 || (r->phase == 1 && !balloon))
		return "bad phase";
	if (cur_end ? r->cursor >= cur_end : r->cursor != 0)
		return "cursor outside its slice";
	if (r->gen < 1 || r->gen > STATE_GEN_MAX || (r->phase == 1 && r->gen < 2))
		return "bad generation";
	if (r->phase == 0 && (r->churn || r->churn_gen != 2))
		return "churn fields set before the balloon's phase 1";
	if (freed ? r->churn >= freed : r->churn != 0)
		return "churn outside the freed part";
	if (r->churn_gen < 2 || r->churn_gen > STATE_GEN_MAX)
		return "bad churn generation";
	return NULL;
}

/* Each vCPU's record against its slice here. 0 or gw_state_reject's. */
static int load_vcpus(const struct soft_vm *vm, struct gw_state *st, struct loaded *l)
{
	uint64_t ws_pages = vmm_workload_ws_pages(&l->wl, vm->base.ram_pages);
	int ret = 0;

	if (l->wl.kind != VMM_WL_IDLE && l->wl.ws_given && ws_pages * SOFT_PAGE_BYTES != l->wl.ws_bytes)
		return gw_state_reject(st, -EINVAL, "workload '%s' does not fit %" PRIu64 " pages",
				       l->spec, vm->base.ram_pages);
	l->progress = 0;
	for (unsigned i = 0; i < l->nr_vcpus && ret == 0; i++) {
		struct soft_slice sl;
		struct vcpu_rec r;
		const char *bad;

		/* The slice this host gives vCPU i (soft_run_layout does the same). */
		soft_run_slice(&l->wl, ws_pages, l->nr_vcpus, i, &sl);
		rec_read(l, i, &r);
		bad = rec_misfit(l->wl.kind == VMM_WL_BALLOON, &sl, &r);
		if (bad)
			ret = gw_state_reject(st, -EINVAL, "vCPU %u: %s (phase %u cursor %" PRIu64
					      " gen %" PRIu64 " churn %" PRIu64 " churn_gen %" PRIu64
					      ", slice of %" PRIu64 " pages)", i, bad, r.phase,
					      r.cursor, r.gen, r.churn, r.churn_gen,
					      sl.nr_pages);
		else if (r.progress > UINT64_MAX - l->progress)
			ret = gw_state_reject(st, -EINVAL, "vCPU %u: progress overflows", i);
		else
			l->progress += r.progress;
	}
	return ret;
}

int soft_state_load(struct soft_vm *vm, struct gw_state *st)
{
	struct loaded l;
	int ret;

	if (!vm->base.info.nr_blocks)
		return gw_state_reject(st, -EINVAL, "soft VM has no RAM yet");
	ret = load_header(vm, st, &l);
	if (ret == 0)
		ret = load_vcpus(vm, st, &l);
	if (ret)
		return ret;

	vm->base.wl = l.wl;
	vm->base.nr_vcpus = l.nr_vcpus;
	soft_run_layout(vm);
	for (unsigned i = 0; i < l.nr_vcpus; i++) {
		struct soft_vcpu *v = &vm->vcpus[i];
		struct vcpu_rec r;

		rec_read(&l, i, &r);
		v->cursor = r.cursor;
		v->gen = r.gen;
		atomic_store(&v->progress, r.progress);
		v->phase = r.phase;
		v->churn = r.churn;
		v->churn_gen = r.churn_gen;
	}
	vm->init_fill = l.fill;
	vm->init_seed = l.seed;
	vm->init_known = !(l.flags & STATE_FLAG_INIT_UNKNOWN);
	{
		char esc[GW_LOG_STR_MAX(VMM_WORKLOAD_SPEC_MAX)];	/* the source's words */

		gw_log(GW_LOG_INFO, "soft", "state_loaded", "workload=\"%s\" vcpus=%u progress=%" PRIu64,
		       gw_log_str(esc, sizeof(esc), vm->base.spec), l.nr_vcpus, l.progress);
	}
	return 0;
}
