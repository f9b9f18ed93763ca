/* SPDX-License-Identifier: MIT */
/*
 * Wire form of the KVM VMM's "kvm-vcpu<i>" sections (kvm_state_codec.h):
 * the register sets as tagged records, each with its fixed size checked on
 * decode, and which records a source's capabilities require. The VM-wide
 * sections are in kvm_state_codec.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "kvm/kvm_state_codec.h"

#define REGS_BYTES (18u * 8)
#define SEG_BYTES 23u
#define DT_BYTES 10u
#define SYS_COMMON_BYTES (8u * SEG_BYTES + 2u * DT_BYTES + 7u * 8)
#define SREGS_BYTES (SYS_COMMON_BYTES + 4u * 8)
#define SREGS2_BYTES (SYS_COMMON_BYTES + 8u + 4u * 8)
#define XCR_BYTES 12u
#define MSR_BYTES 12u
#define EVENTS_BYTES 37u
#define DEBUGREGS_BYTES (7u * 8)

/* ---- pieces ---- */

static void enc_regs(struct kvm_le_w *w, const struct kvm_regs *r)
{
	const uint64_t v[18] = {
		r->rax, r->rbx, r->rcx, r->rdx, r->rsi, r->rdi, r->rsp, r->rbp,
		r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15, r->rip, r->rflags,
	};

	for (unsigned i = 0; i < 18; i++)
		kvm_le_put_u64(w, v[i]);
}

static void dec_regs(struct kvm_le_r *r, struct kvm_regs *g)
{
	uint64_t *v[18] = {
		(uint64_t *)&g->rax, (uint64_t *)&g->rbx, (uint64_t *)&g->rcx, (uint64_t *)&g->rdx,
		(uint64_t *)&g->rsi, (uint64_t *)&g->rdi, (uint64_t *)&g->rsp, (uint64_t *)&g->rbp,
		(uint64_t *)&g->r8, (uint64_t *)&g->r9, (uint64_t *)&g->r10, (uint64_t *)&g->r11,
		(uint64_t *)&g->r12, (uint64_t *)&g->r13, (uint64_t *)&g->r14, (uint64_t *)&g->r15,
		(uint64_t *)&g->rip, (uint64_t *)&g->rflags,
	};

	memset(g, 0, sizeof(*g));
	for (unsigned i = 0; i < 18; i++)
		*v[i] = kvm_le_get_u64(r);
}

static void enc_seg(struct kvm_le_w *w, const struct kvm_segment *s)
{
	kvm_le_put_u64(w, s->base);
	kvm_le_put_u32(w, s->limit);
	kvm_le_put_u16(w, s->selector);
	kvm_le_put_u8(w, s->type);
	kvm_le_put_u8(w, s->present);
	kvm_le_put_u8(w, s->dpl);
	kvm_le_put_u8(w, s->db);
	kvm_le_put_u8(w, s->s);
	kvm_le_put_u8(w, s->l);
	kvm_le_put_u8(w, s->g);
	kvm_le_put_u8(w, s->avl);
	kvm_le_put_u8(w, s->unusable);
}

static void dec_seg(struct kvm_le_r *r, struct kvm_segment *s)
{
	memset(s, 0, sizeof(*s));
	s->base = kvm_le_get_u64(r);
	s->limit = kvm_le_get_u32(r);
	s->selector = kvm_le_get_u16(r);
	s->type = kvm_le_get_u8(r);
	s->present = kvm_le_get_u8(r);
	s->dpl = kvm_le_get_u8(r);
	s->db = kvm_le_get_u8(r);
	s->s = kvm_le_get_u8(r);
	s->l = kvm_le_get_u8(r);
	s->g = kvm_le_get_u8(r);
	s->avl = kvm_le_get_u8(r);
	s->unusable = kvm_le_get_u8(r);
}

static void enc_dt(struct kvm_le_w *w, const struct kvm_dtable *d)
{
	kvm_le_put_u64(w, d->base);
	kvm_le_put_u16(w, d->limit);
}

static void dec_dt(struct kvm_le_r *r, struct kvm_dtable *d)
{
	memset(d, 0, sizeof(*d));
	d->base = kvm_le_get_u64(r);
	d->limit = kvm_le_get_u16(r);
}

/*
 * The part kvm_sregs and kvm_sregs2 share: same member names, so one macro
 * body serves both (segments, tables, control registers).
 */
#define ENC_SYS_COMMON(w, s) do {						\
	const struct kvm_segment *segs_[8] = { &(s)->cs, &(s)->ds, &(s)->es,	\
		&(s)->fs, &(s)->gs, &(s)->ss, &(s)->tr, &(s)->ldt };		\
	for (unsigned i_ = 0; i_ < 8; i_++)					\
		enc_seg(w, segs_[i_]);						\
	enc_dt(w, &(s)->gdt);							\
	enc_dt(w, &(s)->idt);							\
	kvm_le_put_u64(w, (s)->cr0); kvm_le_put_u64(w, (s)->cr2);		\
	kvm_le_put_u64(w, (s)->cr3); kvm_le_put_u64(w, (s)->cr4);		\
	kvm_le_put_u64(w, (s)->cr8); kvm_le_put_u64(w, (s)->efer);		\
	kvm_le_put_u64(w, (s)->apic_base);					\
} while (0)

#define DEC_SYS_COMMON(r, s) do {						\
	struct kvm_segment *segs_[8] = { &(s)->cs, &(s)->ds, &(s)->es,		\
		&(s)->fs, &(s)->gs, &(s)->ss, &(s)->tr, &(s)->ldt };		\
	for (unsigned i_ = 0; i_ < 8; i_++)					\
		dec_seg(r, segs_[i_]);						\
	dec_dt(r, &(s)->gdt);							\
	dec_dt(r, &(s)->idt);							\
	(s)->cr0 = kvm_le_get_u64(r); (s)->cr2 = kvm_le_get_u64(r);		\
	(s)->cr3 = kvm_le_get_u64(r); (s)->cr4 = kvm_le_get_u64(r);		\
	(s)->cr8 = kvm_le_get_u64(r); (s)->efer = kvm_le_get_u64(r);		\
	(s)->apic_base = kvm_le_get_u64(r);					\
} while (0)

static void enc_sregs(struct kvm_le_w *w, const struct kvm_sregs *s)
{
	ENC_SYS_COMMON(w, s);
	for (unsigned i = 0; i < 4; i++)
		kvm_le_put_u64(w, s->interrupt_bitmap[i]);
}

static void dec_sregs(struct kvm_le_r *r, struct kvm_sregs *s)
{
	memset(s, 0, sizeof(*s));
	DEC_SYS_COMMON(r, s);
	for (unsigned i = 0; i < 4; i++)
		s->interrupt_bitmap[i] = kvm_le_get_u64(r);
}

static void enc_sregs2(struct kvm_le_w *w, const struct kvm_sregs2 *s)
{
	ENC_SYS_COMMON(w, s);
	kvm_le_put_u64(w, s->flags);
	for (unsigned i = 0; i < 4; i++)
		kvm_le_put_u64(w, s->pdptrs[i]);
}

static void dec_sregs2(struct kvm_le_r *r, struct kvm_sregs2 *s)
{
	memset(s, 0, sizeof(*s));
	DEC_SYS_COMMON(r, s);
	s->flags = kvm_le_get_u64(r);
	for (unsigned i = 0; i < 4; i++)
		s->pdptrs[i] = kvm_le_get_u64(r);
}

static void enc_events(struct kvm_le_w *w, const struct kvm_vcpu_events *e)
{
	kvm_le_put_u8(w, e->exception.injected);
	kvm_le_put_u8(w, e->exception.nr);
	kvm_le_put_u8(w, e->exception.has_error_code);
	kvm_le_put_u8(w, e->exception.pending);
	kvm_le_put_u32(w, e->exception.error_code);
	kvm_le_put_u8(w, e->interrupt.injected);
	kvm_le_put_u8(w, e->interrupt.nr);
	kvm_le_put_u8(w, e->interrupt.soft);
	kvm_le_put_u8(w, e->interrupt.shadow);
	kvm_le_put_u8(w, e->nmi.injected);
	kvm_le_put_u8(w, e->nmi.pending);
	kvm_le_put_u8(w, e->nmi.masked);
	kvm_le_put_u32(w, e->sipi_vector);
	kvm_le_put_u32(w, e->flags);
	kvm_le_put_u8(w, e->smi.smm);
	kvm_le_put_u8(w, e->smi.pending);
	kvm_le_put_u8(w, e->smi.smm_inside_nmi);
	kvm_le_put_u8(w, e->smi.latched_init);
	kvm_le_put_u8(w, e->triple_fault.pending);
	kvm_le_put_u8(w, e->exception_has_payload);
	kvm_le_put_u64(w, e->exception_payload);
}

static void dec_events(struct kvm_le_r *r, struct kvm_vcpu_events *e)
{
	memset(e, 0, sizeof(*e));
	e->exception.injected = kvm_le_get_u8(r);
	e->exception.nr = kvm_le_get_u8(r);
	e->exception.has_error_code = kvm_le_get_u8(r);
	e->exception.pending = kvm_le_get_u8(r);
	e->exception.error_code = kvm_le_get_u32(r);
	e->interrupt.injected = kvm_le_get_u8(r);
	e->interrupt.nr = kvm_le_get_u8(r);
	e->interrupt.soft = kvm_le_get_u8(r);
	e->interrupt.shadow = kvm_le_get_u8(r);
	e->nmi.injected = kvm_le_get_u8(r);
	e->nmi.pending = kvm_le_get_u8(r);
	e->nmi.masked = kvm_le_get_u8(r);
	e->sipi_vector = kvm_le_get_u32(r);
	e->flags = kvm_le_get_u32(r);
	e->smi.smm = kvm_le_get_u8(r);
	e->smi.pending = kvm_le_get_u8(r);
	e->smi.smm_inside_nmi = kvm_le_get_u8(r);
	e->smi.latched_init = kvm_le_get_u8(r);
	e->triple_fault.pending = kvm_le_get_u8(r);
	e->exception_has_payload = kvm_le_get_u8(r);
	e->exception_payload = kvm_le_get_u64(r);
}

static void enc_debugregs(struct kvm_le_w *w, const struct kvm_debugregs *d)
{
	for (unsigned i = 0; i < 4; i++)
		kvm_le_put_u64(w, d->db[i]);
	kvm_le_put_u64(w, d->dr6);
	kvm_le_put_u64(w, d->dr7);
	kvm_le_put_u64(w, d->flags);
}

static void dec_debugregs(struct kvm_le_r *r, struct kvm_debugregs *d)
{
	memset(d, 0, sizeof(*d));
	for (unsigned i = 0; i < 4; i++)
		d->db[i] = kvm_le_get_u64(r);
	d->dr6 = kvm_le_get_u64(r);
	d->dr7 = kvm_le_get_u64(r);
	d->flags = kvm_le_get_u64(r);
}

static void enc_xcrs(struct kvm_le_w *w, const struct kvm_xcrs *x)
{
	uint32_t n = x->nr_xcrs <= KVM_MAX_XCRS ? x->nr_xcrs : KVM_MAX_XCRS;

	kvm_le_put_u32(w, n);
	kvm_le_put_u32(w, x->flags);
	for (uint32_t i = 0; i < n; i++) {
		kvm_le_put_u32(w, x->xcrs[i].xcr);
		kvm_le_put_u64(w, x->xcrs[i].value);
	}
}

static void enc_msrs(struct kvm_le_w *w, const struct kvm_vcpu_state *s)
{
	uint32_t n = s->nr_msrs <= KVM_COMPAT_MAX_MSRS ? s->nr_msrs : KVM_COMPAT_MAX_MSRS;

	kvm_le_put_u32(w, n);
	for (uint32_t i = 0; i < n; i++) {
		kvm_le_put_u32(w, s->msrs[i].index);
		kvm_le_put_u64(w, s->msrs[i].data);
	}
}

/* ---- kvm-vcpu<i> ---- */

/* One record: tag, length patched after the payload. */
#define REC(w, tag, body) do {							\
	size_t at_;								\
	kvm_le_put_u32(w, tag);							\
	at_ = kvm_le_put_u32_later(w);						\
	size_t start_ = (w)->len_bytes;						\
	body;									\
	kvm_le_patch_u32(w, at_, (uint32_t)((w)->len_bytes - start_));		\
	nr++;									\
} while (0)

void kvm_enc_vcpu(struct kvm_le_w *w, const struct kvm_vcpu_state *s)
{
	size_t nr_at;
	uint32_t nr = 0;

	kvm_le_put_u32(w, s->index);
	nr_at = kvm_le_put_u32_later(w);
	REC(w, KVM_REC_REGS, enc_regs(w, &s->regs));
	if (s->has_sregs2)
		REC(w, KVM_REC_SREGS2, enc_sregs2(w, &s->sregs2));
	else
		REC(w, KVM_REC_SREGS, enc_sregs(w, &s->sregs));
	REC(w, KVM_REC_XSAVE, kvm_le_put_bytes(w, s->xsave, s->xsave_bytes));
	if (s->has_xcrs)
		REC(w, KVM_REC_XCRS, enc_xcrs(w, &s->xcrs));
	REC(w, KVM_REC_MSRS, enc_msrs(w, s));
	REC(w, KVM_REC_LAPIC, kvm_le_put_bytes(w, s->lapic.regs, sizeof(s->lapic.regs)));
	if (s->has_events)
		REC(w, KVM_REC_EVENTS, enc_events(w, &s->events));
	REC(w, KVM_REC_MP_STATE, kvm_le_put_u32(w, s->mp.mp_state));
	if (s->has_debugregs)
		REC(w, KVM_REC_DEBUGREGS, enc_debugregs(w, &s->debugregs));
	kvm_le_patch_u32(w, nr_at, nr);
}

static int dec_xcrs(struct kvm_le_r *r, struct kvm_xcrs *x, char *why, size_t why_len)
{
	uint32_t n = kvm_le_get_u32(r);

	memset(x, 0, sizeof(*x));
	if (n > KVM_MAX_XCRS || kvm_le_left(r) != 4 + (size_t)n * XCR_BYTES)
		return kvm_dec_bad(why, why_len, "XCRS record: %u entries do not fit its length", n);
	x->nr_xcrs = n;
	x->flags = kvm_le_get_u32(r);
	for (uint32_t i = 0; i < n; i++) {
		x->xcrs[i].xcr = kvm_le_get_u32(r);
		x->xcrs[i].value = kvm_le_get_u64(r);
	}
	return 0;
}

static int dec_msrs(struct kvm_le_r *r, struct kvm_vcpu_state *s, char *why, size_t why_len)
{
	uint32_t n = kvm_le_get_u32(r);

	if (n > KVM_COMPAT_MAX_MSRS || kvm_le_left(r) != (size_t)n * MSR_BYTES)
		return kvm_dec_bad(why, why_len, "MSRS record: %u entries do not fit its length", n);
	s->nr_msrs = n;
	for (uint32_t i = 0; i < n; i++) {
		memset(&s->msrs[i], 0, sizeof(s->msrs[i]));
		s->msrs[i].index = kvm_le_get_u32(r);
		s->msrs[i].data = kvm_le_get_u64(r);
	}
	return 0;
}

/* Fixed record sizes; 0 = variable (checked by the record's decoder). */
static const uint32_t rec_bytes[KVM_REC__MAX + 1] = {
	[KVM_REC_REGS] = REGS_BYTES, [KVM_REC_SREGS] = SREGS_BYTES,
	[KVM_REC_SREGS2] = SREGS2_BYTES, [KVM_REC_LAPIC] = KVM_APIC_REG_SIZE,
	[KVM_REC_EVENTS] = EVENTS_BYTES, [KVM_REC_MP_STATE] = 4,
	[KVM_REC_DEBUGREGS] = DEBUGREGS_BYTES,
};

static int dec_record(uint32_t tag, struct kvm_le_r *p, struct kvm_vcpu_state *s,
		      uint32_t xsave_cap_bytes, char *why, size_t why_len)
{
	size_t n = kvm_le_left(p);

	switch (tag) {
	case KVM_REC_REGS: dec_regs(p, &s->regs); break;
	case KVM_REC_SREGS: dec_sregs(p, &s->sregs); break;
	case KVM_REC_SREGS2: dec_sregs2(p, &s->sregs2); s->has_sregs2 = true; break;
	case KVM_REC_XSAVE:
		if (n < 512 + 64 || n > KVM_XSAVE_MAX_BYTES || n % 4)
			return kvm_dec_bad(why, why_len, "XSAVE record of %zu bytes", n);
		if (!s->xsave || xsave_cap_bytes < n)
			s->xsave = calloc(1, n);	/* kvm_dec_vcpu_into frees it on failure */
		if (!s->xsave)
			return -ENOMEM;
		s->xsave_bytes = (uint32_t)n;
		kvm_le_get_bytes(p, s->xsave, n);
		break;
	case KVM_REC_XCRS: s->has_xcrs = true; return dec_xcrs(p, &s->xcrs, why, why_len);
	case KVM_REC_MSRS: return dec_msrs(p, s, why, why_len);
	case KVM_REC_LAPIC: kvm_le_get_bytes(p, s->lapic.regs, sizeof(s->lapic.regs)); break;
	case KVM_REC_EVENTS: dec_events(p, &s->events); s->has_events = true; break;
	case KVM_REC_MP_STATE: s->mp.mp_state = kvm_le_get_u32(p); break;
	case KVM_REC_DEBUGREGS: dec_debugregs(p, &s->debugregs); s->has_debugregs = true; break;
	default:
		return kvm_dec_bad(why, why_len, "unknown vCPU record %u", tag);
	}
	return 0;
}

static int check_records(uint32_t seen, uint32_t caps, char *why, size_t why_len)
{
	static const struct { uint32_t tag, cap; const char *name; } need[] = {
		{ KVM_REC_REGS, 0, "REGS" }, { KVM_REC_XSAVE, 0, "XSAVE" },
		{ KVM_REC_MSRS, 0, "MSRS" }, { KVM_REC_LAPIC, 0, "LAPIC" },
		{ KVM_REC_MP_STATE, 0, "MP_STATE" }, { KVM_REC_XCRS, KVM_COMPAT_XCRS, "XCRS" },
		{ KVM_REC_EVENTS, KVM_COMPAT_VCPU_EVENTS, "EVENTS" },
		{ KVM_REC_DEBUGREGS, KVM_COMPAT_DEBUGREGS, "DEBUGREGS" },
	};
	bool sregs = seen & (1u << KVM_REC_SREGS), sregs2 = seen & (1u << KVM_REC_SREGS2);

	if (sregs == sregs2)
		return kvm_dec_bad(why, why_len, "vCPU state needs exactly one of SREGS and SREGS2");
	if (sregs2 != !!(caps & KVM_COMPAT_SREGS2))
		return kvm_dec_bad(why, why_len, "SREGS2 record and capability bits disagree");
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if ((!need[i].cap || (caps & need[i].cap)) && !(seen & (1u << need[i].tag)))
			return kvm_dec_bad(why, why_len, "vCPU record %s missing", need[i].name);
	return 0;
}

int kvm_dec_vcpu(const void *buf, size_t len, uint32_t caps, struct kvm_vcpu_state *s,
		 char *why, size_t why_len)
{
	return kvm_dec_vcpu_into(buf, len, caps, s, NULL, 0, why, why_len);
}

int kvm_dec_vcpu_into(const void *buf, size_t len, uint32_t caps, struct kvm_vcpu_state *s,
		      uint8_t *xsave, uint32_t xsave_cap_bytes, char *why, size_t why_len)
{
	struct kvm_le_r r;
	uint32_t nr, seen = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	s->xsave = xsave;
	kvm_le_r_init(&r, buf, len);
	s->index = kvm_le_get_u32(&r);
	nr = kvm_le_get_u32(&r);
	if (kvm_le_r_err(&r) || nr > KVM_REC__MAX)
		return kvm_dec_bad(why, why_len, "vCPU section header bad (%zu bytes, %u records)", len, nr);
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t tag = kvm_le_get_u32(&r), n = kvm_le_get_u32(&r);
		struct kvm_le_r p = kvm_le_sub(&r, n);

		if (kvm_le_r_err(&p))
			ret = kvm_dec_bad(why, why_len, "vCPU record %u: %u bytes past the section end", tag, n);
		else if (tag == 0 || tag > KVM_REC__MAX || (seen & (1u << tag)))
			ret = kvm_dec_bad(why, why_len, "vCPU record %u unknown or repeated", tag);
		else if (rec_bytes[tag] && n != rec_bytes[tag])
			ret = kvm_dec_bad(why, why_len, "vCPU record %u is %u bytes, expected %u",
				  tag, n, rec_bytes[tag]);
		else
			ret = 0;
		if (ret)
			goto fail;	/* frees what an earlier record allocated */
		seen |= 1u << tag;
		ret = dec_record(tag, &p, s, xsave_cap_bytes, why, why_len);
		if (!ret && kvm_le_r_done(&p))
			ret = kvm_dec_bad(why, why_len, "vCPU record %u: length and content disagree", tag);
		if (ret)
			goto fail;
	}
	ret = kvm_le_r_done(&r) ? kvm_dec_bad(why, why_len, "bytes after the last vCPU record") :
				  check_records(seen, caps, why, why_len);
	if (!ret)
		return 0;
fail:
	if (s->xsave != xsave)
		free(s->xsave);
	s->xsave = NULL;
	return ret;
}
