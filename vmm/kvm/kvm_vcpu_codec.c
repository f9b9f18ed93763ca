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

static void enc_regs(struct gw_wbuf *w, const struct kvm_regs *r)
{
	const uint64_t v[18] = {
		r->rax, r->rbx, r->rcx, r->rdx, r->rsi, r->rdi, r->rsp, r->rbp,
		r->r8, r->r9, r->r10, r->r11, r->r12, r->r13, r->r14, r->r15, r->rip, r->rflags,
	};

	for (unsigned i = 0; i < 18; i++)
		gw_put_le64(w, v[i]);
}

static void dec_regs(struct gw_rbuf *r, struct kvm_regs *g)
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
		*v[i] = gw_get_le64(r);
}

static void enc_seg(struct gw_wbuf *w, const struct kvm_segment *s)
{
	gw_put_le64(w, s->base);
	gw_put_le32(w, s->limit);
	gw_put_le16(w, s->selector);
	gw_put_u8(w, s->type);
	gw_put_u8(w, s->present);
	gw_put_u8(w, s->dpl);
	gw_put_u8(w, s->db);
	gw_put_u8(w, s->s);
	gw_put_u8(w, s->l);
	gw_put_u8(w, s->g);
	gw_put_u8(w, s->avl);
	gw_put_u8(w, s->unusable);
}

static void dec_seg(struct gw_rbuf *r, struct kvm_segment *s)
{
	memset(s, 0, sizeof(*s));
	s->base = gw_get_le64(r);
	s->limit = gw_get_le32(r);
	s->selector = gw_get_le16(r);
	s->type = gw_get_u8(r);
	s->present = gw_get_u8(r);
	s->dpl = gw_get_u8(r);
	s->db = gw_get_u8(r);
	s->s = gw_get_u8(r);
	s->l = gw_get_u8(r);
	s->g = gw_get_u8(r);
	s->avl = gw_get_u8(r);
	s->unusable = gw_get_u8(r);
}

static void enc_dt(struct gw_wbuf *w, const struct kvm_dtable *d)
{
	gw_put_le64(w, d->base);
	gw_put_le16(w, d->limit);
}

static void dec_dt(struct gw_rbuf *r, struct kvm_dtable *d)
{
	memset(d, 0, sizeof(*d));
	d->base = gw_get_le64(r);
	d->limit = gw_get_le16(r);
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
	gw_put_le64(w, (s)->cr0); gw_put_le64(w, (s)->cr2);		\
	gw_put_le64(w, (s)->cr3); gw_put_le64(w, (s)->cr4);		\
	gw_put_le64(w, (s)->cr8); gw_put_le64(w, (s)->efer);		\
	gw_put_le64(w, (s)->apic_base);					\
} while (0)

#define DEC_SYS_COMMON(r, s) do {						\
	struct kvm_segment *segs_[8] = { &(s)->cs, &(s)->ds, &(s)->es,		\
		&(s)->fs, &(s)->gs, &(s)->ss, &(s)->tr, &(s)->ldt };		\
	for (unsigned i_ = 0; i_ < 8; i_++)					\
		dec_seg(r, segs_[i_]);						\
	dec_dt(r, &(s)->gdt);							\
	dec_dt(r, &(s)->idt);							\
	(s)->cr0 = gw_get_le64(r); (s)->cr2 = gw_get_le64(r);		\
	(s)->cr3 = gw_get_le64(r); (s)->cr4 = gw_get_le64(r);		\
	(s)->cr8 = gw_get_le64(r); (s)->efer = gw_get_le64(r);		\
	(s)->apic_base = gw_get_le64(r);					\
} while (0)

static void enc_sregs(struct gw_wbuf *w, const struct kvm_sregs *s)
{
	ENC_SYS_COMMON(w, s);
	for (unsigned i = 0; i < 4; i++)
		gw_put_le64(w, s->interrupt_bitmap[i]);
}

static void dec_sregs(struct gw_rbuf *r, struct kvm_sregs *s)
{
	memset(s, 0, sizeof(*s));
	DEC_SYS_COMMON(r, s);
	for (unsigned i = 0; i < 4; i++)
		s->interrupt_bitmap[i] = gw_get_le64(r);
}

static void enc_sregs2(struct gw_wbuf *w, const struct kvm_sregs2 *s)
{
	ENC_SYS_COMMON(w, s);
	gw_put_le64(w, s->flags);
	for (unsigned i = 0; i < 4; i++)
		gw_put_le64(w, s->pdptrs[i]);
}

static void dec_sregs2(struct gw_rbuf *r, struct kvm_sregs2 *s)
{
	memset(s, 0, sizeof(*s));
	DEC_SYS_COMMON(r, s);
	s->flags = gw_get_le64(r);
	for (unsigned i = 0; i < 4; i++)
		s->pdptrs[i] = gw_get_le64(r);
}

static void enc_events(struct gw_wbuf *w, const struct kvm_vcpu_events *e)
{
	gw_put_u8(w, e->exception.injected);
	gw_put_u8(w, e->exception.nr);
	gw_put_u8(w, e->exception.has_error_code);
	gw_put_u8(w, e->exception.pending);
	gw_put_le32(w, e->exception.error_code);
	gw_put_u8(w, e->interrupt.injected);
	gw_put_u8(w, e->interrupt.nr);
	gw_put_u8(w, e->interrupt.soft);
	gw_put_u8(w, e->interrupt.shadow);
	gw_put_u8(w, e->nmi.injected);
	gw_put_u8(w, e->nmi.pending);
	gw_put_u8(w, e->nmi.masked);
	gw_put_le32(w, e->sipi_vector);
	gw_put_le32(w, e->flags);
	gw_put_u8(w, e->smi.smm);
	gw_put_u8(w, e->smi.pending);
	gw_put_u8(w, e->smi.smm_inside_nmi);
	gw_put_u8(w, e->smi.latched_init);
	gw_put_u8(w, e->triple_fault.pending);
	gw_put_u8(w, e->exception_has_payload);
	gw_put_le64(w, e->exception_payload);
}

static void dec_events(struct gw_rbuf *r, struct kvm_vcpu_events *e)
{
	memset(e, 0, sizeof(*e));
	e->exception.injected = gw_get_u8(r);
	e->exception.nr = gw_get_u8(r);
	e->exception.has_error_code = gw_get_u8(r);
	e->exception.pending = gw_get_u8(r);
	e->exception.error_code = gw_get_le32(r);
	e->interrupt.injected = gw_get_u8(r);
	e->interrupt.nr = gw_get_u8(r);
	e->interrupt.soft = gw_get_u8(r);
	e->interrupt.shadow = gw_get_u8(r);
	e->nmi.injected = gw_get_u8(r);
	e->nmi.pending = gw_get_u8(r);
	e->nmi.masked = gw_get_u8(r);
	e->sipi_vector = gw_get_le32(r);
	e->flags = gw_get_le32(r);
	e->smi.smm = gw_get_u8(r);
	e->smi.pending = gw_get_u8(r);
	e->smi.smm_inside_nmi = gw_get_u8(r);
	e->smi.latched_init = gw_get_u8(r);
	e->triple_fault.pending = gw_get_u8(r);
	e->exception_has_payload = gw_get_u8(r);
	e->exception_payload = gw_get_le64(r);
}

static void enc_debugregs(struct gw_wbuf *w, const struct kvm_debugregs *d)
{
	for (unsigned i = 0; i < 4; i++)
		gw_put_le64(w, d->db[i]);
	gw_put_le64(w, d->dr6);
	gw_put_le64(w, d->dr7);
	gw_put_le64(w, d->flags);
}

static void dec_debugregs(struct gw_rbuf *r, struct kvm_debugregs *d)
{
	memset(d, 0, sizeof(*d));
	for (unsigned i = 0; i < 4; i++)
		d->db[i] = gw_get_le64(r);
	d->dr6 = gw_get_le64(r);
	d->dr7 = gw_get_le64(r);
	d->flags = gw_get_le64(r);
}

static void enc_xcrs(struct gw_wbuf *w, const struct kvm_xcrs *x)
{
	uint32_t n = x->nr_xcrs <= KVM_MAX_XCRS ? x->nr_xcrs : KVM_MAX_XCRS;

	gw_put_le32(w, n);
	gw_put_le32(w, x->flags);
	for (uint32_t i = 0; i < n; i++) {
		gw_put_le32(w, x->xcrs[i].xcr);
		gw_put_le64(w, x->xcrs[i].value);
	}
}

static void enc_msrs(struct gw_wbuf *w, const struct kvm_vcpu_state *s)
{
	uint32_t n = s->nr_msrs <= KVM_COMPAT_MAX_MSRS ? s->nr_msrs : KVM_COMPAT_MAX_MSRS;

	gw_put_le32(w, n);
	for (uint32_t i = 0; i < n; i++) {
		gw_put_le32(w, s->msrs[i].index);
		gw_put_le64(w, s->msrs[i].data);
	}
}

/* ---- kvm-vcpu<i> ---- */

/* One record: tag, length patched after the payload. */
#define REC(w, tag, body) do {							\
	size_t at_;								\
	gw_put_le32(w, tag);							\
	at_ = gw_put_le32_later(w);						\
	size_t start_ = (w)->len;						\
	body;									\
	gw_patch_le32(w, at_, (uint32_t)((w)->len - start_));			\
	nr++;									\
} while (0)

void kvm_enc_vcpu(struct gw_wbuf *w, const struct kvm_vcpu_state *s)
{
	size_t nr_at;
	uint32_t nr = 0;

	gw_put_le32(w, s->index);
	nr_at = gw_put_le32_later(w);
	REC(w, KVM_REC_REGS, enc_regs(w, &s->regs));
	if (s->has_sregs2)
		REC(w, KVM_REC_SREGS2, enc_sregs2(w, &s->sregs2));
	else
		REC(w, KVM_REC_SREGS, enc_sregs(w, &s->sregs));
	REC(w, KVM_REC_XSAVE, gw_put_bytes(w, s->xsave, s->xsave_bytes));
	if (s->has_xcrs)
		REC(w, KVM_REC_XCRS, enc_xcrs(w, &s->xcrs));
	REC(w, KVM_REC_MSRS, enc_msrs(w, s));
	REC(w, KVM_REC_LAPIC, gw_put_bytes(w, s->lapic.regs, sizeof(s->lapic.regs)));
	if (s->has_events)
		REC(w, KVM_REC_EVENTS, enc_events(w, &s->events));
	REC(w, KVM_REC_MP_STATE, gw_put_le32(w, s->mp.mp_state));
	if (s->has_debugregs)
		REC(w, KVM_REC_DEBUGREGS, enc_debugregs(w, &s->debugregs));
	gw_patch_le32(w, nr_at, nr);
}

static int dec_xcrs(struct gw_rbuf *r, struct kvm_xcrs *x, char *why, size_t why_len)
{
	uint32_t n = gw_get_le32(r);

	memset(x, 0, sizeof(*x));
	if (n > KVM_MAX_XCRS || gw_rbuf_left(r) != 4 + (size_t)n * XCR_BYTES)
		return kvm_dec_bad(why, why_len, "XCRS record: %u entries do not fit its length", n);
	x->nr_xcrs = n;
	x->flags = gw_get_le32(r);
	for (uint32_t i = 0; i < n; i++) {
		x->xcrs[i].xcr = gw_get_le32(r);
		x->xcrs[i].value = gw_get_le64(r);
	}
	return 0;
}

static int dec_msrs(struct gw_rbuf *r, struct kvm_vcpu_state *s, char *why, size_t why_len)
{
	uint32_t n = gw_get_le32(r);

	if (n > KVM_COMPAT_MAX_MSRS || gw_rbuf_left(r) != (size_t)n * MSR_BYTES)
		return kvm_dec_bad(why, why_len, "MSRS record: %u entries do not fit its length", n);
	s->nr_msrs = n;
	for (uint32_t i = 0; i < n; i++) {
		memset(&s->msrs[i], 0, sizeof(s->msrs[i]));
		s->msrs[i].index = gw_get_le32(r);
		s->msrs[i].data = gw_get_le64(r);
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

static int dec_record(uint32_t tag, struct gw_rbuf *p, struct kvm_vcpu_state *s,
		      uint32_t xsave_cap_bytes, char *why, size_t why_len)
{
	size_t n = gw_rbuf_left(p);

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
		gw_get_copy(p, s->xsave, n);
		break;
	case KVM_REC_XCRS: s->has_xcrs = true; return dec_xcrs(p, &s->xcrs, why, why_len);
	case KVM_REC_MSRS: return dec_msrs(p, s, why, why_len);
	case KVM_REC_LAPIC: gw_get_copy(p, s->lapic.regs, sizeof(s->lapic.regs)); break;
	case KVM_REC_EVENTS: dec_events(p, &s->events); s->has_events = true; break;
	case KVM_REC_MP_STATE: s->mp.mp_state = gw_get_le32(p); break;
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
	struct gw_rbuf r;
	uint32_t nr, seen = 0;
	int ret;

	memset(s, 0, sizeof(*s));
	s->xsave = xsave;
	gw_rbuf_init(&r, buf, len);
	s->index = gw_get_le32(&r);
	nr = gw_get_le32(&r);
	if (gw_rbuf_err(&r) || nr > KVM_REC__MAX)
		return kvm_dec_bad(why, why_len, "vCPU section header bad (%zu bytes, %u records)", len, nr);
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t tag = gw_get_le32(&r), n = gw_get_le32(&r);
		struct gw_rbuf p = gw_rbuf_sub(&r, n);

		if (gw_rbuf_err(&p))
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
		if (!ret && gw_rbuf_done(&p))
			ret = kvm_dec_bad(why, why_len, "vCPU record %u: length and content disagree", tag);
		if (ret)
			goto fail;
	}
	ret = gw_rbuf_done(&r) ? kvm_dec_bad(why, why_len, "bytes after the last vCPU record") :
				  check_records(seen, caps, why, why_len);
	if (!ret)
		return 0;
fail:
	if (s->xsave != xsave)
		free(s->xsave);
	s->xsave = NULL;
	return ret;
}
