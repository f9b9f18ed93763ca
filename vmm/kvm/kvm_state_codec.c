/* SPDX-License-Identifier: MIT */
/*
 * Wire form of the KVM VMM's VM-wide state sections (kvm_state_codec.h):
 * kvm-vm, kvm-workload, kvm-clock, kvm-irqchip, kvm-pit, and the decoders'
 * reason helper. The vCPU sections are in kvm_vcpu_codec.c.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvm/kvm_state_codec.h"

#define CPUID_BYTES 28u
#define PIT_CHANNEL_BYTES 24u

int kvm_dec_bad(char *why, size_t why_len, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return -EBADMSG;
}

/* ---- kvm-vm ---- */

void kvm_enc_vm(struct gw_wbuf *w, const struct kvm_vm_state *s)
{
	const struct kvm_compat *c = &s->compat;
	uint32_t nc = c->nr_cpuid <= KVM_COMPAT_MAX_CPUID ? c->nr_cpuid : KVM_COMPAT_MAX_CPUID;
	uint32_t nm = c->nr_msrs <= KVM_COMPAT_MAX_MSRS ? c->nr_msrs : KVM_COMPAT_MAX_MSRS;

	gw_put_le32(w, s->nr_vcpus);
	gw_put_le32(w, c->caps);
	gw_put_le32(w, c->xsave_bytes);
	gw_put_le32(w, s->has_pit ? 1 : 0);
	gw_put_le32(w, nc);
	for (uint32_t i = 0; i < nc; i++) {
		const struct kvm_cpuid_entry2 *e = &c->cpuid[i];

		gw_put_le32(w, e->function);
		gw_put_le32(w, e->index);
		gw_put_le32(w, e->flags);
		gw_put_le32(w, e->eax);
		gw_put_le32(w, e->ebx);
		gw_put_le32(w, e->ecx);
		gw_put_le32(w, e->edx);
	}
	gw_put_le32(w, nm);
	for (uint32_t i = 0; i < nm; i++)
		gw_put_le32(w, c->msrs[i]);
}

int kvm_dec_vm(const void *buf, size_t len, struct kvm_vm_state *s, char *why, size_t why_len)
{
	struct kvm_compat *c = &s->compat;
	struct gw_rbuf r;
	uint32_t flags;

	memset(s, 0, sizeof(*s));
	gw_rbuf_init(&r, buf, len);
	s->nr_vcpus = gw_get_le32(&r);
	c->caps = gw_get_le32(&r);
	c->xsave_bytes = gw_get_le32(&r);
	flags = gw_get_le32(&r);
	c->nr_cpuid = gw_get_le32(&r);
	if (gw_rbuf_err(&r))
		return kvm_dec_bad(why, why_len, "%s: %zu bytes, too short", KVM_SEC_VM, len);
	if (flags & ~1u)
		return kvm_dec_bad(why, why_len, "%s: unknown flags %#x", KVM_SEC_VM, flags);
	s->has_pit = flags & 1;
	if (c->nr_cpuid > KVM_COMPAT_MAX_CPUID || gw_rbuf_left(&r) < (size_t)c->nr_cpuid * CPUID_BYTES)
		return kvm_dec_bad(why, why_len, "%s: %u CPUID entries", KVM_SEC_VM, c->nr_cpuid);
	for (uint32_t i = 0; i < c->nr_cpuid; i++) {
		struct kvm_cpuid_entry2 *e = &c->cpuid[i];

		e->function = gw_get_le32(&r);
		e->index = gw_get_le32(&r);
		e->flags = gw_get_le32(&r);
		e->eax = gw_get_le32(&r);
		e->ebx = gw_get_le32(&r);
		e->ecx = gw_get_le32(&r);
		e->edx = gw_get_le32(&r);
	}
	c->nr_msrs = gw_get_le32(&r);
	if (c->nr_msrs > KVM_COMPAT_MAX_MSRS || gw_rbuf_left(&r) != (size_t)c->nr_msrs * 4)
		return kvm_dec_bad(why, why_len, "%s: %u MSR indices do not fit", KVM_SEC_VM, c->nr_msrs);
	for (uint32_t i = 0; i < c->nr_msrs; i++)
		c->msrs[i] = gw_get_le32(&r);
	c->max_vcpus = s->nr_vcpus;
	if (gw_rbuf_done(&r))
		return kvm_dec_bad(why, why_len, "%s: trailing bytes", KVM_SEC_VM);
	return 0;
}

/* ---- kvm-workload ---- */

static void enc_str(struct gw_wbuf *w, const char *s)
{
	size_t n = strlen(s);

	gw_put_le32(w, (uint32_t)n);
	gw_put_bytes(w, s, n);
}

static int dec_str(struct gw_rbuf *r, char *out, size_t cap)
{
	uint32_t n = gw_get_le32(r);

	if (gw_rbuf_err(r) || n >= cap || n > gw_rbuf_left(r))
		return -EBADMSG;
	gw_get_copy(r, out, n);
	out[n] = '\0';
	return strlen(out) == n ? 0 : -EBADMSG;	/* no NUL inside */
}

void kvm_enc_workload(struct gw_wbuf *w, const struct kvm_workload_state *s)
{
	gw_put_le32(w, s->fill_wire);
	gw_put_le32(w, s->init_unknown ? 1 : 0);
	gw_put_le64(w, s->seed);
	gw_put_le64(w, s->ram_pages);
	enc_str(w, s->spec);
	enc_str(w, s->guest);
	gw_put_le64(w, s->migrations);
}

int kvm_dec_workload(const void *buf, size_t len, struct kvm_workload_state *s,
		     char *why, size_t why_len)
{
	struct gw_rbuf r;
	uint32_t flags;

	memset(s, 0, sizeof(*s));
	gw_rbuf_init(&r, buf, len);
	s->fill_wire = gw_get_le32(&r);
	flags = gw_get_le32(&r);
	s->seed = gw_get_le64(&r);
	s->ram_pages = gw_get_le64(&r);
	if (gw_rbuf_err(&r) || s->fill_wire > 4 || (flags & ~1u))
		return kvm_dec_bad(why, why_len, "%s: bad header (fill %u, flags %#x)", KVM_SEC_WORKLOAD,
			   s->fill_wire, flags);
	s->init_unknown = flags & 1;
	if (dec_str(&r, s->spec, sizeof(s->spec)) || !s->spec[0])
		return kvm_dec_bad(why, why_len, "%s: bad workload spec", KVM_SEC_WORKLOAD);
	if (dec_str(&r, s->guest, sizeof(s->guest)) || !s->guest[0])
		return kvm_dec_bad(why, why_len, "%s: bad guest name", KVM_SEC_WORKLOAD);
	s->migrations = gw_get_le64(&r);
	if (gw_rbuf_done(&r))
		return kvm_dec_bad(why, why_len, "%s: trailing bytes", KVM_SEC_WORKLOAD);
	return 0;
}

/* ---- kvm-clock ---- */

void kvm_enc_clock(struct gw_wbuf *w, const struct kvm_clock_state *s)
{
	gw_put_le64(w, s->clock_ns);
	gw_put_le32(w, s->flags);
	gw_put_le64(w, s->realtime_ns);
	gw_put_le64(w, s->host_tsc);
}

int kvm_dec_clock(const void *buf, size_t len, struct kvm_clock_state *s, char *why, size_t why_len)
{
	struct gw_rbuf r;

	memset(s, 0, sizeof(*s));
	gw_rbuf_init(&r, buf, len);
	s->clock_ns = gw_get_le64(&r);
	s->flags = gw_get_le32(&r);
	s->realtime_ns = gw_get_le64(&r);
	s->host_tsc = gw_get_le64(&r);
	if (gw_rbuf_done(&r))
		return kvm_dec_bad(why, why_len, "%s: %zu bytes, expected 28", KVM_SEC_CLOCK, len);
	return 0;
}

/* ---- kvm-irqchip ---- */

static void enc_pic(struct gw_wbuf *w, const struct kvm_pic_state *p)
{
	const uint8_t v[16] = {
		p->last_irr, p->irr, p->imr, p->isr, p->priority_add, p->irq_base,
		p->read_reg_select, p->poll, p->special_mask, p->init_state, p->auto_eoi,
		p->rotate_on_auto_eoi, p->special_fully_nested_mode, p->init4, p->elcr,
		p->elcr_mask,
	};

	gw_put_bytes(w, v, sizeof(v));
}

static void dec_pic(struct gw_rbuf *r, struct kvm_pic_state *p)
{
	uint8_t *v[16] = {
		&p->last_irr, &p->irr, &p->imr, &p->isr, &p->priority_add, &p->irq_base,
		&p->read_reg_select, &p->poll, &p->special_mask, &p->init_state, &p->auto_eoi,
		&p->rotate_on_auto_eoi, &p->special_fully_nested_mode, &p->init4, &p->elcr,
		&p->elcr_mask,
	};

	for (unsigned i = 0; i < 16; i++)
		*v[i] = gw_get_u8(r);
}

void kvm_enc_irqchip(struct gw_wbuf *w, const struct kvm_irqchip_state *s)
{
	enc_pic(w, &s->pic[0]);
	enc_pic(w, &s->pic[1]);
	gw_put_le64(w, s->ioapic.base_address);
	gw_put_le32(w, s->ioapic.ioregsel);
	gw_put_le32(w, s->ioapic.id);
	gw_put_le32(w, s->ioapic.irr);
	for (unsigned i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		gw_put_le64(w, s->ioapic.redirtbl[i].bits);
}

int kvm_dec_irqchip(const void *buf, size_t len, struct kvm_irqchip_state *s,
		    char *why, size_t why_len)
{
	struct gw_rbuf r;

	memset(s, 0, sizeof(*s));
	gw_rbuf_init(&r, buf, len);
	dec_pic(&r, &s->pic[0]);
	dec_pic(&r, &s->pic[1]);
	s->ioapic.base_address = gw_get_le64(&r);
	s->ioapic.ioregsel = gw_get_le32(&r);
	s->ioapic.id = gw_get_le32(&r);
	s->ioapic.irr = gw_get_le32(&r);
	for (unsigned i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		s->ioapic.redirtbl[i].bits = gw_get_le64(&r);
	if (gw_rbuf_done(&r))
		return kvm_dec_bad(why, why_len, "%s: %zu bytes, expected %u", KVM_SEC_IRQCHIP, len,
			   32 + 20 + 8 * KVM_IOAPIC_NUM_PINS);
	return 0;
}

/* ---- kvm-pit ---- */

void kvm_enc_pit(struct gw_wbuf *w, const struct kvm_pit_state2 *s)
{
	for (unsigned i = 0; i < 3; i++) {
		const struct kvm_pit_channel_state *c = &s->channels[i];

		gw_put_le32(w, c->count);
		gw_put_le16(w, c->latched_count);
		gw_put_u8(w, c->count_latched);
		gw_put_u8(w, c->status_latched);
		gw_put_u8(w, c->status);
		gw_put_u8(w, c->read_state);
		gw_put_u8(w, c->write_state);
		gw_put_u8(w, c->write_latch);
		gw_put_u8(w, c->rw_mode);
		gw_put_u8(w, c->mode);
		gw_put_u8(w, c->bcd);
		gw_put_u8(w, c->gate);
		gw_put_le64(w, (uint64_t)c->count_load_time);
	}
	gw_put_le32(w, s->flags);
}

int kvm_dec_pit(const void *buf, size_t len, struct kvm_pit_state2 *s, char *why, size_t why_len)
{
	struct gw_rbuf r;

	memset(s, 0, sizeof(*s));
	gw_rbuf_init(&r, buf, len);
	for (unsigned i = 0; i < 3; i++) {
		struct kvm_pit_channel_state *c = &s->channels[i];

		c->count = gw_get_le32(&r);
		c->latched_count = gw_get_le16(&r);
		c->count_latched = gw_get_u8(&r);
		c->status_latched = gw_get_u8(&r);
		c->status = gw_get_u8(&r);
		c->read_state = gw_get_u8(&r);
		c->write_state = gw_get_u8(&r);
		c->write_latch = gw_get_u8(&r);
		c->rw_mode = gw_get_u8(&r);
		c->mode = gw_get_u8(&r);
		c->bcd = gw_get_u8(&r);
		c->gate = gw_get_u8(&r);
		c->count_load_time = (int64_t)gw_get_le64(&r);
	}
	s->flags = gw_get_le32(&r);
	if (gw_rbuf_done(&r))
		return kvm_dec_bad(why, why_len, "%s: %zu bytes, expected %u", KVM_SEC_PIT, len,
			   3 * PIT_CHANNEL_BYTES + 4);
	return 0;
}
