/* SPDX-License-Identifier: MIT */
/*
 * vCPU and VM state to and from KVM, as the sections of kvm_state_codec.h.
 *
 * Save (source, every vCPU parked after a KVM_RUN with immediate_exit, so no
 * I/O exit is left half done): per vCPU regs, sregs2 (or sregs), XSAVE2 (or
 * XSAVE), XCRs, the MSRs probed at creation (TSC included), LAPIC, events,
 * MP state, debug registers; then kvmclock, PIC and IOAPIC, PIT.
 *
 * Load (destination, no vCPU yet): decode and check everything first
 * (compatibility with this host: kvm_compat_check) and refuse with a reason;
 * only then create the vCPUs with the source's CPUID and apply, in the
 * order KVM needs: clock, irqchip, PIT; per vCPU sregs, MSRs, XCRs, XSAVE,
 * LAPIC, events, MP state, debug registers, regs (the selftests' order;
 * LAPIC after sregs so that x2APIC mode is already known).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <godwit/log.h>
#include "kvm/kvm_internal.h"
#include "kvm/kvm_state_codec.h"

struct msr_buf {
	struct kvm_msrs h;
	struct kvm_msr_entry e[KVM_COMPAT_MAX_MSRS];
};

/* One ioctl of a chain: nothing after the first failure; names it. */
static int step(int ret, int fd, unsigned long req, void *arg, const char *name,
		const char **failed)
{
	if (ret)
		return ret;
	if (ioctl(fd, req, arg) < 0) {
		*failed = name;
		return -errno;
	}
	return 0;
}

static int get_msrs(struct kvm_vm *vm, struct kvm_vcpu *v, struct kvm_vcpu_state *s)
{
	struct msr_buf *m = calloc(1, sizeof(*m));
	int n;

	if (!m)
		return -ENOMEM;
	m->h.nmsrs = vm->nr_msrs;
	for (uint32_t i = 0; i < vm->nr_msrs; i++)
		m->e[i].index = vm->msrs[i];
	n = ioctl(v->fd, KVM_GET_MSRS, m);
	if (n == (int)vm->nr_msrs) {
		s->nr_msrs = vm->nr_msrs;
		memcpy(s->msrs, m->e, vm->nr_msrs * sizeof(m->e[0]));
	}
	free(m);
	return n < 0 ? -errno : n == (int)vm->nr_msrs ? 0 : -EIO;
}

static int vcpu_get(struct kvm_vm *vm, struct kvm_vcpu *v, struct kvm_vcpu_state *s,
		    const char **failed)
{
	uint32_t caps = vm->caps.compat;
	int ret = 0;

	memset(s, 0, sizeof(*s));
	s->index = v->index;
	s->has_sregs2 = caps & KVM_COMPAT_SREGS2;
	s->has_xcrs = caps & KVM_COMPAT_XCRS;
	s->has_events = caps & KVM_COMPAT_VCPU_EVENTS;
	s->has_debugregs = caps & KVM_COMPAT_DEBUGREGS;
	s->xsave_bytes = vm->caps.xsave_bytes;
	s->xsave = calloc(1, s->xsave_bytes);
	if (!s->xsave)
		return -ENOMEM;
	ret = step(ret, v->fd, KVM_GET_REGS, &s->regs, "KVM_GET_REGS", failed);
	if (s->has_sregs2)
		ret = step(ret, v->fd, KVM_GET_SREGS2, &s->sregs2, "KVM_GET_SREGS2", failed);
	else
		ret = step(ret, v->fd, KVM_GET_SREGS, &s->sregs, "KVM_GET_SREGS", failed);
	if (caps & KVM_COMPAT_XSAVE2)
		ret = step(ret, v->fd, KVM_GET_XSAVE2, s->xsave, "KVM_GET_XSAVE2", failed);
	else
		ret = step(ret, v->fd, KVM_GET_XSAVE, s->xsave, "KVM_GET_XSAVE", failed);
	if (s->has_xcrs)
		ret = step(ret, v->fd, KVM_GET_XCRS, &s->xcrs, "KVM_GET_XCRS", failed);
	ret = step(ret, v->fd, KVM_GET_LAPIC, &s->lapic, "KVM_GET_LAPIC", failed);
	if (s->has_events)
		ret = step(ret, v->fd, KVM_GET_VCPU_EVENTS, &s->events, "KVM_GET_VCPU_EVENTS", failed);
	ret = step(ret, v->fd, KVM_GET_MP_STATE, &s->mp, "KVM_GET_MP_STATE", failed);
	if (s->has_debugregs)
		ret = step(ret, v->fd, KVM_GET_DEBUGREGS, &s->debugregs, "KVM_GET_DEBUGREGS", failed);
	if (!ret && (ret = get_msrs(vm, v, s)) != 0)
		*failed = "KVM_GET_MSRS";
	return ret;
}

static int vcpu_set(struct kvm_vcpu *v, const struct kvm_vcpu_state *s, const char **failed)
{
	struct msr_buf *m = calloc(1, sizeof(*m));
	int ret = 0, n;

	if (!m)
		return -ENOMEM;
	if (s->has_sregs2)
		ret = step(ret, v->fd, KVM_SET_SREGS2, (void *)&s->sregs2, "KVM_SET_SREGS2", failed);
	else
		ret = step(ret, v->fd, KVM_SET_SREGS, (void *)&s->sregs, "KVM_SET_SREGS", failed);
	if (!ret) {
		m->h.nmsrs = s->nr_msrs;
		memcpy(m->e, s->msrs, s->nr_msrs * sizeof(m->e[0]));
		n = ioctl(v->fd, KVM_SET_MSRS, m);
		if (n != (int)s->nr_msrs) {
			*failed = "KVM_SET_MSRS";
			ret = n < 0 ? -errno : -EIO;
		}
	}
	if (s->has_xcrs)
		ret = step(ret, v->fd, KVM_SET_XCRS, (void *)&s->xcrs, "KVM_SET_XCRS", failed);
	/* KVM_SET_XSAVE takes as many bytes as KVM_CAP_XSAVE2 says (>= ours: checked). */
	ret = step(ret, v->fd, KVM_SET_XSAVE, s->xsave, "KVM_SET_XSAVE", failed);
	ret = step(ret, v->fd, KVM_SET_LAPIC, (void *)&s->lapic, "KVM_SET_LAPIC", failed);
	if (s->has_events)
		ret = step(ret, v->fd, KVM_SET_VCPU_EVENTS, (void *)&s->events, "KVM_SET_VCPU_EVENTS",
			   failed);
	ret = step(ret, v->fd, KVM_SET_MP_STATE, (void *)&s->mp, "KVM_SET_MP_STATE", failed);
	if (s->has_debugregs)
		ret = step(ret, v->fd, KVM_SET_DEBUGREGS, (void *)&s->debugregs, "KVM_SET_DEBUGREGS",
			   failed);
	ret = step(ret, v->fd, KVM_SET_REGS, (void *)&s->regs, "KVM_SET_REGS", failed);
	free(m);
	return ret;
}

/* ---- VM-level state ---- */

static int vm_get(struct kvm_vm *vm, struct kvm_clock_state *clk, struct kvm_irqchip_state *chip,
		  struct kvm_pit_state2 *pit, const char **failed)
{
	struct kvm_clock_data cd;
	struct kvm_irqchip ic;
	int ret = 0;

	memset(&cd, 0, sizeof(cd));
	ret = step(ret, vm->vm_fd, KVM_GET_CLOCK, &cd, "KVM_GET_CLOCK", failed);
	clk->clock_ns = cd.clock;
	clk->flags = cd.flags;
	clk->realtime_ns = cd.realtime;
	clk->host_tsc = cd.host_tsc;
	for (unsigned i = 0; i < 3 && !ret; i++) {
		memset(&ic, 0, sizeof(ic));
		ic.chip_id = i;		/* KVM_IRQCHIP_PIC_MASTER, _SLAVE, _IOAPIC */
		ret = step(ret, vm->vm_fd, KVM_GET_IRQCHIP, &ic, "KVM_GET_IRQCHIP", failed);
		if (i < 2)
			chip->pic[i] = ic.chip.pic;
		else
			chip->ioapic = ic.chip.ioapic;
	}
	if (vm->has_pit)
		ret = step(ret, vm->vm_fd, KVM_GET_PIT2, pit, "KVM_GET_PIT2", failed);
	return ret;
}

static int vm_set(struct kvm_vm *vm, const struct kvm_clock_state *clk,
		  const struct kvm_irqchip_state *chip, const struct kvm_pit_state2 *pit,
		  const char **failed)
{
	struct kvm_clock_data cd;
	struct kvm_irqchip ic;
	int ret = 0;

	/* KVM_CLOCK_REALTIME: KVM advances the clock by the real time since the save. */
	memset(&cd, 0, sizeof(cd));
	cd.clock = clk->clock_ns;
	cd.flags = clk->flags & KVM_CLOCK_REALTIME;
	cd.realtime = clk->realtime_ns;
	ret = step(ret, vm->vm_fd, KVM_SET_CLOCK, &cd, "KVM_SET_CLOCK", failed);
	for (unsigned i = 0; i < 3; i++) {
		memset(&ic, 0, sizeof(ic));
		ic.chip_id = i;
		if (i < 2)
			ic.chip.pic = chip->pic[i];
		else
			ic.chip.ioapic = chip->ioapic;
		ret = step(ret, vm->vm_fd, KVM_SET_IRQCHIP, &ic, "KVM_SET_IRQCHIP", failed);
	}
	if (pit)
		ret = step(ret, vm->vm_fd, KVM_SET_PIT2, (void *)pit, "KVM_SET_PIT2", failed);
	return ret;
}

int kvm_host_compat_probe(struct kvm_vm *vm)
{
	struct kvm_compat *c = calloc(1, sizeof(*c));
	int ret;

	if (!c)
		return -ENOMEM;
	kvm_host_compat(vm, c);
	ret = kvm_probe_msrs_tmp(vm->kvm_fd, c->cpuid, c->nr_cpuid, c->msrs, &c->nr_msrs);
	if (ret) {
		free(c);
		return ret;
	}
	vm->host_compat = c;
	return 0;
}

void kvm_host_compat(const struct kvm_vm *vm, struct kvm_compat *out)
{
	uint32_t n = 0;
	struct kvm_cpuid_entry2 *e = kvm_supported_cpuid(vm->kvm_fd, &n);

	memset(out, 0, sizeof(*out));
	out->caps = vm->caps.compat;
	out->xsave_bytes = vm->caps.xsave_bytes;
	out->max_vcpus = vm->caps.max_vcpus < KVM_MAX_VCPUS ? vm->caps.max_vcpus : KVM_MAX_VCPUS;
	if (e) {
		out->nr_cpuid = n < KVM_COMPAT_MAX_CPUID ? n : KVM_COMPAT_MAX_CPUID;
		memcpy(out->cpuid, e, out->nr_cpuid * sizeof(*e));
		free(e);
	}
}

#define ADD_SECTION(st, name, fn, arg) do {					\
	size_t len_;								\
	uint8_t *buf_ = KVM_ENCODE_ALLOC(fn, arg, &len_);			\
	if (!buf_) {								\
		ret = -ENOMEM;							\
		goto out;							\
	}									\
	ret = gw_state_add(st, name, KVM_SEC_VERSION, buf_, len_);		\
	free(buf_);								\
	if (ret)								\
		goto out;							\
} while (0)

static void vm_state_of(const struct kvm_vm *vm, struct kvm_vm_state *vs)
{
	memset(vs, 0, sizeof(*vs));
	vs->nr_vcpus = vm->base.nr_vcpus;
	vs->has_pit = vm->has_pit;
	vs->compat.caps = vm->caps.compat;
	vs->compat.xsave_bytes = vm->caps.xsave_bytes;
	vs->compat.max_vcpus = vm->base.nr_vcpus;
	vs->compat.nr_cpuid = vm->nr_cpuid < KVM_COMPAT_MAX_CPUID ? vm->nr_cpuid : KVM_COMPAT_MAX_CPUID;
	memcpy(vs->compat.cpuid, vm->cpuid, vs->compat.nr_cpuid * sizeof(vm->cpuid[0]));
	vs->compat.nr_msrs = vm->nr_msrs;
	memcpy(vs->compat.msrs, vm->msrs, vm->nr_msrs * sizeof(vm->msrs[0]));
}

static void workload_state_of(const struct kvm_vm *vm, struct kvm_workload_state *ws)
{
	memset(ws, 0, sizeof(*ws));
	ws->fill_wire = vmm_fill_to_wire(vm->init_fill);
	ws->init_unknown = !vm->init_known;
	ws->seed = vm->init_seed;
	ws->ram_pages = vm->base.ram_pages;
	snprintf(ws->spec, sizeof(ws->spec), "%s", vm->base.spec);
	snprintf(ws->guest, sizeof(ws->guest), "%s", vm->guest);
	ws->migrations = vm->migrations;
}

/* The per-vCPU job of a save (kvm_pause_run_parked): each item writes only its own slot. */
struct save_job {
	struct kvm_vm *vm;
	struct kvm_vcpu_state *cs;	/* nr_vcpus */
	int ret[KVM_MAX_VCPUS];
	const char *failed[KVM_MAX_VCPUS];
	uint8_t *sec[KVM_MAX_VCPUS];	/* the encoded sections (malloc) */
	size_t sec_bytes[KVM_MAX_VCPUS];
};

/* Job item: read vCPU @i's state and encode its section. */
static void vcpu_get_item(void *opaque, unsigned i)
{
	struct save_job *j = opaque;

	j->ret[i] = vcpu_get(j->vm, &j->vm->vcpus[i], &j->cs[i], &j->failed[i]);
	if (!j->ret[i]) {
		j->sec[i] = KVM_ENCODE_ALLOC(kvm_enc_vcpu, &j->cs[i], &j->sec_bytes[i]);
		j->ret[i] = j->sec[i] ? 0 : -ENOMEM;
	}
}

int kvm_state_save(struct kvm_vm *vm, struct gw_state *st)
{
	struct kvm_vm_state *vs = calloc(1, sizeof(*vs));
	struct kvm_vcpu_state *cs = calloc(vm->base.nr_vcpus ? vm->base.nr_vcpus : 1, sizeof(*cs));
	struct save_job *job = calloc(1, sizeof(*job));
	struct kvm_workload_state ws;
	struct kvm_clock_state clk;
	struct kvm_irqchip_state chip;
	struct kvm_pit_state2 pit;
	const char *failed = NULL;
	char name[GW_SECTION_NAME_MAX];
	uint64_t t0 = gw_now_ns();
	int ret = -ENOMEM;

	if (!vs || !cs || !job)
		goto out;
	vm_state_of(vm, vs);
	workload_state_of(vm, &ws);
	ADD_SECTION(st, KVM_SEC_VM, kvm_enc_vm, vs);
	ADD_SECTION(st, KVM_SEC_WORKLOAD, kvm_enc_workload, &ws);
	ret = vm_get(vm, &clk, &chip, &pit, &failed);
	if (ret)
		goto out;
	ADD_SECTION(st, KVM_SEC_CLOCK, kvm_enc_clock, &clk);
	ADD_SECTION(st, KVM_SEC_IRQCHIP, kvm_enc_irqchip, &chip);
	if (vm->has_pit)
		ADD_SECTION(st, KVM_SEC_PIT, kvm_enc_pit, &pit);
	/* Every vCPU thread is parked: they read vCPUs too, two at a time on two cores. */
	*job = (struct save_job){ .vm = vm, .cs = cs };
	kvm_pause_run_parked(&vm->pause, vcpu_get_item, job, vm->base.nr_vcpus);
	for (unsigned i = 0; i < vm->base.nr_vcpus; i++) {
		ret = job->ret[i];
		failed = job->failed[i];
		if (ret)
			goto out;
		snprintf(name, sizeof(name), KVM_SEC_VCPU_FMT, i);
		ret = gw_state_add(st, name, KVM_SEC_VERSION, job->sec[i], job->sec_bytes[i]);
		if (ret)
			goto out;
	}
	gw_log(GW_LOG_INFO, "kvm", "state_saved", "vcpus=%u sections=%u us=%.1f", vm->base.nr_vcpus,
	       gw_state_count(st), (gw_now_ns() - t0) / 1e3);
out:
	if (ret)
		gw_log(GW_LOG_ERROR, "kvm", "state_save_failed", "err=%d ioctl=%s", ret,
		       failed ? failed : "-");
	for (unsigned i = 0; cs && i < vm->base.nr_vcpus; i++)
		free(cs[i].xsave);
	for (unsigned i = 0; job && i < vm->base.nr_vcpus; i++)
		free(job->sec[i]);
	free(cs);
	free(job);
	free(vs);
	return ret;
}

/*
 * Everything decoded from the sections, before anything is applied. A
 * destination makes it ahead (kvm_state_load_ahead): its memory is touched
 * then, not inside the downtime.
 */
struct kvm_load_ctx {
	struct kvm_vm_state vs;
	struct kvm_compat host;
	struct kvm_workload_state ws;
	struct vmm_workload wl;
	struct kvm_clock_state clk;
	struct kvm_irqchip_state chip;
	struct kvm_pit_state2 pit;
	bool has_pit;
	uint64_t decoded_ns, created_ns;	/* stamps for the state_loaded line */
	/* The per-vCPU job (kvm_pause_run_parked): each item writes only its own slot. */
	struct kvm_vm *vm;
	int vcpu_ret[KVM_MAX_VCPUS];
	const char *vcpu_failed[KVM_MAX_VCPUS];
	uint8_t *xsave_ahead[KVM_MAX_VCPUS];	/* host-size XSAVE areas made ahead (ours to free) */
	unsigned nr_slots;		/* vcpu[0..nr_slots-1] are initialised; the others untouched */
	struct kvm_vcpu_state vcpu[KVM_MAX_VCPUS];	/* last, see nr_slots */
};

/*
 * A load context (zeroed) whose first @nr_ahead vCPU slots have their
 * host-size XSAVE area. Written with memset, not calloc: a large calloc is
 * fresh mappings that fault on first touch (10-20 us a page here).
 */
static struct kvm_load_ctx *load_ctx_new(const struct kvm_vm *vm, unsigned nr_ahead)
{
	struct kvm_load_ctx *c = malloc(sizeof(*c));

	if (!c)
		return NULL;
	memset(c, 0, offsetof(struct kvm_load_ctx, vcpu) + nr_ahead * sizeof(c->vcpu[0]));
	c->nr_slots = nr_ahead;
	for (unsigned i = 0; i < nr_ahead; i++) {
		c->xsave_ahead[i] = malloc(vm->caps.xsave_bytes);
		if (!c->xsave_ahead[i])
			break;
		memset(c->xsave_ahead[i], 0, vm->caps.xsave_bytes);
	}
	return c;
}

static void load_ctx_free(struct kvm_load_ctx *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < KVM_MAX_VCPUS; i++) {
		if (i < c->nr_slots && c->vcpu[i].xsave != c->xsave_ahead[i])
			free(c->vcpu[i].xsave);
		free(c->xsave_ahead[i]);
	}
	free(c);
}

int kvm_state_load_ahead(struct kvm_vm *vm, unsigned nr_vcpus)
{
	load_ctx_free(vm->load_ahead);
	vm->load_ahead = load_ctx_new(vm, nr_vcpus < KVM_MAX_VCPUS ? nr_vcpus : KVM_MAX_VCPUS);
	return vm->load_ahead ? 0 : -ENOMEM;
}

void kvm_state_load_ahead_free(struct kvm_vm *vm)
{
	load_ctx_free(vm->load_ahead);
	vm->load_ahead = NULL;
}

/* Job item: apply vCPU @i's state. */
static void vcpu_set_item(void *opaque, unsigned i)
{
	struct kvm_load_ctx *c = opaque;

	c->vcpu_ret[i] = vcpu_set(&c->vm->vcpus[i], &c->vcpu[i], &c->vcpu_failed[i]);
}

static const void *find(struct gw_state *st, const char *name, size_t *len, int *ret)
{
	uint32_t version;
	const void *p = gw_state_find(st, name, &version, len);

	if (!p)
		*ret = gw_state_reject(st, -EINVAL, "section %s missing", name);
	else if (version != KVM_SEC_VERSION)
		*ret = gw_state_reject(st, -EINVAL, "section %s version %u unsupported (want %u)",
				       name, version, KVM_SEC_VERSION);
	return *ret ? NULL : p;
}

/* kvm-vm and this host's ability to load it. */
static int load_check_vm(struct kvm_vm *vm, struct gw_state *st, struct kvm_load_ctx *c)
{
	char why[KVM_MSG_MAX];
	const void *p;
	size_t len;
	int ret = 0;

	p = find(st, KVM_SEC_VM, &len, &ret);
	if (!p)
		return ret;
	if (kvm_dec_vm(p, len, &c->vs, why, sizeof(why)))
		return gw_state_reject(st, -EINVAL, "%s", why);
	if (c->vs.nr_vcpus < 1 || c->vs.nr_vcpus > KVM_MAX_VCPUS)
		return gw_state_reject(st, -EINVAL, "%u vCPUs (1..%u)", c->vs.nr_vcpus, KVM_MAX_VCPUS);
	if (vm->host_compat && vm->host_compat->nr_cpuid == c->vs.compat.nr_cpuid &&
	    !memcmp(vm->host_compat->cpuid, c->vs.compat.cpuid,
		    c->vs.compat.nr_cpuid * sizeof(c->vs.compat.cpuid[0]))) {
		c->host = *vm->host_compat;	/* probed at creation with this very CPUID */
	} else {
		kvm_host_compat(vm, &c->host);
		ret = kvm_probe_msrs_tmp(vm->kvm_fd, c->vs.compat.cpuid, c->vs.compat.nr_cpuid,
					 c->host.msrs, &c->host.nr_msrs);
		if (ret)
			return gw_state_reject(st, ret, "probing MSRs with the source's CPUID: %s",
					       strerror(-ret));
	}
	if (kvm_compat_check(&c->vs.compat, &c->host, why, sizeof(why)))
		return gw_state_reject(st, -EOPNOTSUPP, "this host cannot run the guest: %s", why);
	if (c->vs.has_pit && !vm->has_pit)
		return gw_state_reject(st, -EOPNOTSUPP, "the source VM has a PIT, this one has none");
	return 0;
}

static int load_decode_devices(struct kvm_vm *vm, struct gw_state *st, struct kvm_load_ctx *c)
{
	char why[KVM_MSG_MAX];
	const void *p;
	size_t len;
	int ret = 0;

	if (!(p = find(st, KVM_SEC_WORKLOAD, &len, &ret)))
		return ret;
	if (kvm_dec_workload(p, len, &c->ws, why, sizeof(why)))
		return gw_state_reject(st, -EINVAL, "%s", why);
	if (c->ws.ram_pages != vm->base.ram_pages)
		return gw_state_reject(st, -EINVAL, "source has %" PRIu64 " pages of RAM, here %" PRIu64,
				       c->ws.ram_pages, vm->base.ram_pages);
	if (vmm_workload_parse(c->ws.spec, &c->wl, why, sizeof(why)))
		return gw_state_reject(st, -EINVAL, "workload '%s': %s", c->ws.spec, why);
	if (!(p = find(st, KVM_SEC_CLOCK, &len, &ret)))
		return ret;
	if (kvm_dec_clock(p, len, &c->clk, why, sizeof(why)))
		return gw_state_reject(st, -EINVAL, "%s", why);
	if (!(p = find(st, KVM_SEC_IRQCHIP, &len, &ret)))
		return ret;
	if (kvm_dec_irqchip(p, len, &c->chip, why, sizeof(why)))
		return gw_state_reject(st, -EINVAL, "%s", why);
	c->has_pit = c->vs.has_pit;
	if (c->has_pit) {
		if (!(p = find(st, KVM_SEC_PIT, &len, &ret)))
			return ret;
		if (kvm_dec_pit(p, len, &c->pit, why, sizeof(why)))
			return gw_state_reject(st, -EINVAL, "%s", why);
	}
	return 0;
}

static int load_decode_vcpus(struct kvm_vm *vm, struct gw_state *st, struct kvm_load_ctx *c)
{
	char why[KVM_MSG_MAX], name[GW_SECTION_NAME_MAX];
	const void *p;
	size_t len;
	int ret = 0;

	for (unsigned i = 0; i < c->vs.nr_vcpus; i++) {
		struct kvm_vcpu_state *s = &c->vcpu[i];
		uint8_t *x;

		snprintf(name, sizeof(name), KVM_SEC_VCPU_FMT, i);
		if (!(p = find(st, name, &len, &ret)))
			return ret;
		if (i >= c->nr_slots) {	/* more vCPUs than made ahead */
			memset(s, 0, sizeof(*s));
			c->nr_slots = i + 1;
		}
		ret = kvm_dec_vcpu_into(p, len, c->vs.compat.caps, s, c->xsave_ahead[i],
					c->xsave_ahead[i] ? vm->caps.xsave_bytes : 0, why, sizeof(why));
		if (ret)
			return gw_state_reject(st, ret, "%s: %s", name, why);
		if (s->index != i || s->xsave_bytes != c->vs.compat.xsave_bytes)
			return gw_state_reject(st, -EINVAL, "%s: index %u, XSAVE %u bytes (kvm-vm says %u)",
					       name, s->index, s->xsave_bytes, c->vs.compat.xsave_bytes);
		/* KVM_SET_XSAVE reads this host's full size: pad the source's area. */
		if (s->xsave == c->xsave_ahead[i]) {	/* decoded into the host-size area made ahead */
			memset(s->xsave + s->xsave_bytes, 0, vm->caps.xsave_bytes - s->xsave_bytes);
			continue;
		}
		x = calloc(1, vm->caps.xsave_bytes);
		if (!x)
			return -ENOMEM;
		memcpy(x, s->xsave, s->xsave_bytes);
		if (s->xsave != c->xsave_ahead[i])
			free(s->xsave);
		s->xsave = x;
	}
	return 0;
}

/* Apply a checked state: vCPUs with the source's CPUID, devices, then each vCPU. */
static int load_apply(struct kvm_vm *vm, struct gw_state *st, struct kvm_load_ctx *c)
{
	const char *failed = NULL;
	char why[KVM_MSG_MAX];
	int ret;

	vm->nr_msrs = c->vs.compat.nr_msrs;	/* checked restorable by load_check_vm */
	memcpy(vm->msrs, c->vs.compat.msrs, vm->nr_msrs * sizeof(vm->msrs[0]));
	c->decoded_ns = gw_now_ns();
	ret = kvm_vcpus_create(vm, c->vs.nr_vcpus, c->vs.compat.cpuid, c->vs.compat.nr_cpuid,
			       false, why, sizeof(why));
	if (ret)
		return gw_state_reject(st, ret, "%s", why);
	c->created_ns = gw_now_ns();
	ret = vm_set(vm, &c->clk, &c->chip, c->has_pit ? &c->pit : NULL, &failed);
	if (!ret) {
		/* The vCPU threads made ahead are parked: they take vCPUs too. */
		c->vm = vm;
		kvm_pause_run_parked(&vm->pause, vcpu_set_item, c, c->vs.nr_vcpus);
		for (unsigned i = 0; i < c->vs.nr_vcpus && !ret; i++) {
			ret = c->vcpu_ret[i];
			failed = c->vcpu_failed[i];
		}
	}
	if (ret)
		return gw_state_reject(st, ret, "%s: %s", failed ? failed : "?", strerror(-ret));
	vm->base.wl = c->wl;
	kvm_layout_workload(vm);
	vm->pace_rate_pps = kvm_pace_per_vcpu(vm->base.wl.rate_pps, vm->base.nr_vcpus);
	snprintf(vm->guest, sizeof(vm->guest), "%s", c->ws.guest);
	if (vmm_fill_from_wire(c->ws.fill_wire, &vm->init_fill))
		vm->init_fill = VMM_FILL_NONE;	/* the decoder refused unknown numbers */
	vm->init_seed = c->ws.seed;
	vm->init_known = !c->ws.init_unknown;
	vm->migrations = c->ws.migrations + 1;
	return 0;
}

int kvm_state_load(struct kvm_vm *vm, struct gw_state *st)
{
	uint64_t t0 = gw_now_ns();
	struct kvm_load_ctx *c = vm->load_ahead ? vm->load_ahead : load_ctx_new(vm, 0);
	int ret;

	vm->load_ahead = NULL;	/* one load per context: a refused one leaves stale slots */
	if (!c)
		return gw_state_reject(st, -ENOMEM, "no memory for the state");
	ret = load_check_vm(vm, st, c);
	if (!ret)
		ret = load_decode_devices(vm, st, c);
	if (!ret)
		ret = load_decode_vcpus(vm, st, c);
	if (!ret)
		ret = load_apply(vm, st, c);
	if (!ret)
		gw_log(GW_LOG_INFO, "kvm", "state_loaded",
		       "vcpus=%u workload=%s guest=%s us=%.1f check_decode_us=%.1f create_us=%.1f set_us=%.1f",
		       vm->base.nr_vcpus, vm->base.spec, vm->guest, (gw_now_ns() - t0) / 1e3, (c->decoded_ns - t0) / 1e3,
		       (c->created_ns - c->decoded_ns) / 1e3, (gw_now_ns() - c->created_ns) / 1e3);
	load_ctx_free(c);
	return ret;
}
