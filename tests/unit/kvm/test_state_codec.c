/* SPDX-License-Identifier: MIT */
/*
 * Invariant: every state section of the KVM VMM (kvm-vcpu<i> with each of
 * its records, kvm-vm, kvm-workload, kvm-clock, kvm-irqchip, kvm-pit)
 * encodes and decodes back to the same value in every field (structures
 * filled with random bytes, padding zeroed: the wire has no padding), with
 * both SREGS and SREGS2 and with and without the optional records, at the
 * documented sizes; and every decoder refuses with -EBADMSG (never reading
 * past its input) each truncation, trailing bytes, an unknown or repeated
 * record, a record of the wrong length, a missing required record, counts
 * too large for their section. No KVM needed.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kvm/kvm_state_codec.h"
#include "test_util.h"

TEST_DEFINE_FAILURES;

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void fill(void *p, size_t n)
{
	uint8_t *b = p;

	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)rnd();
}

static void seg_pad(struct kvm_segment *s) { s->padding = 0; }
static void dt_pad(struct kvm_dtable *d) { memset(d->padding, 0, sizeof(d->padding)); }

#define SYS_PAD(s) do {								\
	seg_pad(&(s)->cs); seg_pad(&(s)->ds); seg_pad(&(s)->es); seg_pad(&(s)->fs);	\
	seg_pad(&(s)->gs); seg_pad(&(s)->ss); seg_pad(&(s)->tr); seg_pad(&(s)->ldt);	\
	dt_pad(&(s)->gdt); dt_pad(&(s)->idt);					\
} while (0)

/* A random vCPU state; the fields that do not travel are zero. */
static void random_vcpu(struct kvm_vcpu_state *s, bool sregs2, bool optional)
{
	memset(s, 0, sizeof(*s));
	s->index = (uint32_t)rnd() % 64;
	fill(&s->regs, sizeof(s->regs));
	s->has_sregs2 = sregs2;
	if (sregs2) {
		fill(&s->sregs2, sizeof(s->sregs2));
		SYS_PAD(&s->sregs2);
	} else {
		fill(&s->sregs, sizeof(s->sregs));
		SYS_PAD(&s->sregs);
	}
	s->xsave_bytes = 4096 + 64 * (uint32_t)(rnd() % 4);
	s->xsave = malloc(s->xsave_bytes);
	TEST_ASSERT(s->xsave, "malloc");
	fill(s->xsave, s->xsave_bytes);
	s->nr_msrs = (uint32_t)(rnd() % 60);
	for (uint32_t i = 0; i < s->nr_msrs; i++) {
		s->msrs[i].index = (uint32_t)rnd();
		s->msrs[i].data = rnd();
	}
	fill(&s->lapic, sizeof(s->lapic));
	s->mp.mp_state = (uint32_t)rnd();
	s->has_xcrs = s->has_events = s->has_debugregs = optional;
	if (optional) {
		s->xcrs.nr_xcrs = 1 + (uint32_t)(rnd() % KVM_MAX_XCRS);
		s->xcrs.flags = (uint32_t)rnd();
		for (uint32_t i = 0; i < s->xcrs.nr_xcrs; i++) {
			s->xcrs.xcrs[i].xcr = (uint32_t)rnd();
			s->xcrs.xcrs[i].value = rnd();
		}
		fill(&s->events, sizeof(s->events));
		s->events.nmi.pad = 0;
		memset(s->events.reserved, 0, sizeof(s->events.reserved));
		fill(&s->debugregs, sizeof(s->debugregs));
		memset(s->debugregs.reserved, 0, sizeof(s->debugregs.reserved));
	}
}

static uint32_t caps_of(const struct kvm_vcpu_state *s)
{
	return (s->has_sregs2 ? KVM_COMPAT_SREGS2 : 0) |
	       (s->has_xcrs ? KVM_COMPAT_XCRS | KVM_COMPAT_VCPU_EVENTS | KVM_COMPAT_DEBUGREGS : 0);
}

static void same_vcpu(const struct kvm_vcpu_state *a, const struct kvm_vcpu_state *b)
{
	TEST_CHECK(a->index == b->index, "index");
	TEST_CHECK(!memcmp(&a->regs, &b->regs, sizeof(a->regs)), "regs");
	TEST_CHECK(a->has_sregs2 == b->has_sregs2, "sregs kind");
	TEST_CHECK(!memcmp(&a->sregs, &b->sregs, sizeof(a->sregs)), "sregs");
	TEST_CHECK(!memcmp(&a->sregs2, &b->sregs2, sizeof(a->sregs2)), "sregs2");
	TEST_CHECK(a->xsave_bytes == b->xsave_bytes && !memcmp(a->xsave, b->xsave, a->xsave_bytes), "xsave");
	TEST_CHECK(a->has_xcrs == b->has_xcrs && !memcmp(&a->xcrs, &b->xcrs, sizeof(a->xcrs)), "xcrs");
	TEST_CHECK(a->nr_msrs == b->nr_msrs && !memcmp(a->msrs, b->msrs, a->nr_msrs * sizeof(a->msrs[0])),
		   "msrs");
	TEST_CHECK(!memcmp(&a->lapic, &b->lapic, sizeof(a->lapic)), "lapic");
	TEST_CHECK(a->has_events == b->has_events && !memcmp(&a->events, &b->events, sizeof(a->events)),
		   "events");
	TEST_CHECK(!memcmp(&a->mp, &b->mp, sizeof(a->mp)), "mp_state");
	TEST_CHECK(a->has_debugregs == b->has_debugregs &&
		   !memcmp(&a->debugregs, &b->debugregs, sizeof(a->debugregs)), "debugregs");
}

/* Every strict prefix and one extra byte are refused. */
#define TRUNCATIONS(dec, buf, len, ...) do {					\
	uint8_t *t_ = malloc((len) + 1);					\
	char why_[200];								\
	TEST_ASSERT(t_, "malloc");						\
	memcpy(t_, buf, len);							\
	t_[len] = 0;								\
	for (size_t n_ = 0; n_ < (len); n_ += (len) > 2000 ? 61 : 1) {		\
		uint8_t *c_ = malloc(n_ ? n_ : 1);				\
		memcpy(c_, t_, n_);						\
		TEST_CHECK(dec(c_, n_, __VA_ARGS__, why_, sizeof(why_)) == -EBADMSG,	\
			   #dec ": %zu of %zu bytes accepted", n_, (size_t)(len));	\
		free(c_);							\
	}									\
	TEST_CHECK(dec(t_, (len) + 1, __VA_ARGS__, why_, sizeof(why_)) == -EBADMSG,	\
		   #dec ": trailing byte accepted");				\
	free(t_);								\
} while (0)

static void vcpu_round_trip(bool sregs2, bool optional)
{
	struct kvm_vcpu_state *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	size_t len, want;
	uint8_t *buf;
	char why[200] = "";

	TEST_ASSERT(a && b, "malloc");
	random_vcpu(a, sregs2, optional);
	buf = KVM_ENCODE_ALLOC(kvm_enc_vcpu, a, &len);
	TEST_ASSERT(buf, "encode");
	/* header 8; records 8 + payload: regs 144, sregs 292 / sregs2 300, xsave,
	   msrs 4 + 12 n, lapic 1024, mp 4; optional xcrs 8 + 12 n, events 37, dbg 56 */
	want = 8 + (8 + 144) + (8 + (sregs2 ? 300 : 292)) + (8 + a->xsave_bytes) +
	       (8 + 4 + 12 * (size_t)a->nr_msrs) + (8 + 1024) + (8 + 4) +
	       (optional ? (8 + 8 + 12 * (size_t)a->xcrs.nr_xcrs) + (8 + 37) + (8 + 56) : 0);
	TEST_CHECK(len == want, "vCPU section %zu bytes, documented %zu", len, want);
	TEST_ASSERT(kvm_dec_vcpu(buf, len, caps_of(a), b, why, sizeof(why)) == 0, "decode: %s", why);
	same_vcpu(a, b);
	free(b->xsave);
	TRUNCATIONS(kvm_dec_vcpu, buf, len, caps_of(a), b);
	{	/* into the caller's area when it fits (the load made ahead), else allocated */
		uint32_t cap = a->xsave_bytes + 64;
		uint8_t *area = malloc(cap);

		TEST_ASSERT(area, "malloc");
		TEST_ASSERT(kvm_dec_vcpu_into(buf, len, caps_of(a), b, area, cap, why, sizeof(why)) == 0,
			    "decode into: %s", why);
		TEST_CHECK(b->xsave == area, "XSAVE not decoded into the caller's area");
		same_vcpu(a, b);
		TEST_ASSERT(kvm_dec_vcpu_into(buf, len, caps_of(a), b, area, a->xsave_bytes - 4, why,
					      sizeof(why)) == 0, "decode, area too small: %s", why);
		TEST_CHECK(b->xsave != area, "XSAVE decoded into an area too small");
		same_vcpu(a, b);
		free(b->xsave);
		TEST_CHECK(kvm_dec_vcpu_into(buf, len - 1, caps_of(a), b, area, cap, why, sizeof(why)) ==
			   -EBADMSG && !b->xsave, "truncated, into the caller's area");
		free(area);
	}
	free(buf);
	free(a->xsave);
	free(a);
	free(b);
}

/* Records: tag and length at @off in @buf; find the @n-th. */
static size_t record_at(const uint8_t *buf, unsigned n)
{
	size_t off = 8;

	for (unsigned i = 0; i < n; i++) {
		uint32_t len = buf[off + 4] | buf[off + 5] << 8 | buf[off + 6] << 16 | (uint32_t)buf[off + 7] << 24;

		off += 8 + len;
	}
	return off;
}

static void vcpu_hostile(void)
{
	struct kvm_vcpu_state *a = malloc(sizeof(*a)), *b = malloc(sizeof(*b));
	uint8_t *buf, *c;
	size_t len;
	char why[200];

	TEST_ASSERT(a && b, "malloc");
	random_vcpu(a, true, true);
	buf = KVM_ENCODE_ALLOC(kvm_enc_vcpu, a, &len);
	c = malloc(len + 64);
	TEST_ASSERT(buf && c, "encode");

	memcpy(c, buf, len);
	c[record_at(c, 1)] = 77;		/* unknown tag */
	TEST_CHECK(kvm_dec_vcpu(c, len, caps_of(a), b, why, sizeof(why)) == -EBADMSG, "unknown tag");

	memcpy(c, buf, len);
	c[record_at(c, 1)] = KVM_REC_REGS;	/* REGS twice (wrong length too) */
	TEST_CHECK(kvm_dec_vcpu(c, len, caps_of(a), b, why, sizeof(why)) == -EBADMSG, "repeated tag");

	memcpy(c, buf, len);
	c[record_at(c, 0) + 4] = 143;		/* REGS of the wrong length */
	TEST_CHECK(kvm_dec_vcpu(c, len, caps_of(a), b, why, sizeof(why)) == -EBADMSG, "REGS length");

	memcpy(c, buf, len);
	c[4] = (uint8_t)(c[4] - 1);		/* one record fewer: bytes left over */
	TEST_CHECK(kvm_dec_vcpu(c, len, caps_of(a), b, why, sizeof(why)) == -EBADMSG, "record count");

	/* A missing required record: drop the last one (DEBUGREGS) but claim the caps. */
	memcpy(c, buf, len);
	c[4] = (uint8_t)(c[4] - 1);
	TEST_CHECK(kvm_dec_vcpu(c, record_at(c, c[4]), caps_of(a), b, why, sizeof(why)) == -EBADMSG &&
		   strstr(why, "DEBUGREGS"), "missing DEBUGREGS: %s", why);

	/* SREGS2 record but the source had no SREGS2: the caps disagree. */
	TEST_CHECK(kvm_dec_vcpu(buf, len, caps_of(a) & ~KVM_COMPAT_SREGS2, b, why, sizeof(why)) == -EBADMSG,
		   "SREGS2 without the capability");

	memcpy(c, buf, len);			/* MSR count larger than the record */
	c[record_at(c, 4) + 8] = 0xff;
	c[record_at(c, 4) + 9] = 0xff;
	TEST_CHECK(kvm_dec_vcpu(c, len, caps_of(a), b, why, sizeof(why)) == -EBADMSG, "MSR count");

	memcpy(c, buf, len);			/* a record length past the section */
	c[record_at(c, 2) + 7] = 0x7f;
	TEST_CHECK(kvm_dec_vcpu(c, len, caps_of(a), b, why, sizeof(why)) == -EBADMSG, "length overflow");
	free(c);
	free(buf);
	free(a->xsave);
	free(a);
	free(b);
}

static void vm_round_trip(void)
{
	struct kvm_vm_state *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
	size_t len;
	uint8_t *buf;
	char why[200] = "";

	TEST_ASSERT(a && b, "calloc");
	a->nr_vcpus = 1 + (uint32_t)(rnd() % 64);
	a->has_pit = true;
	a->compat.caps = KVM_COMPAT_ALL;
	a->compat.xsave_bytes = 4096;
	a->compat.max_vcpus = a->nr_vcpus;
	a->compat.nr_cpuid = 57;
	for (uint32_t i = 0; i < a->compat.nr_cpuid; i++) {
		fill(&a->compat.cpuid[i], sizeof(a->compat.cpuid[i]));
		memset(a->compat.cpuid[i].padding, 0, sizeof(a->compat.cpuid[i].padding));
	}
	a->compat.nr_msrs = 40;
	for (uint32_t i = 0; i < a->compat.nr_msrs; i++)
		a->compat.msrs[i] = (uint32_t)rnd();
	buf = KVM_ENCODE_ALLOC(kvm_enc_vm, a, &len);
	TEST_ASSERT(buf, "encode");
	TEST_CHECK(len == 20 + 28 * 57 + 4 + 4 * 40, "kvm-vm %zu bytes", len);
	TEST_ASSERT(kvm_dec_vm(buf, len, b, why, sizeof(why)) == 0, "decode: %s", why);
	TEST_CHECK(!memcmp(a, b, sizeof(*a)), "kvm-vm differs after the round trip");
	TRUNCATIONS(kvm_dec_vm, buf, len, b);
	buf[12] = 2;				/* unknown flag */
	TEST_CHECK(kvm_dec_vm(buf, len, b, why, sizeof(why)) == -EBADMSG, "kvm-vm flags");
	free(buf);
	free(a);
	free(b);
}

static void small_round_trips(void)
{
	struct kvm_workload_state wa = { .fill_wire = 2, .init_unknown = true, .seed = rnd(),
					 .ram_pages = rnd(), .migrations = rnd() }, wb;
	struct kvm_clock_state ca = { rnd(), (uint32_t)rnd(), rnd(), rnd() }, cb;
	struct kvm_irqchip_state ia, ib;
	struct kvm_pit_state2 pa, pb;
	size_t len;
	uint8_t *buf;
	char why[200] = "";

	snprintf(wa.spec, sizeof(wa.spec), "verify:ws=2097152,rate=300");
	snprintf(wa.guest, sizeof(wa.guest), "verify");
	buf = KVM_ENCODE_ALLOC(kvm_enc_workload, &wa, &len);
	TEST_ASSERT(buf && kvm_dec_workload(buf, len, &wb, why, sizeof(why)) == 0, "workload: %s", why);
	TEST_CHECK(wa.fill_wire == wb.fill_wire && wa.init_unknown == wb.init_unknown &&
		   wa.seed == wb.seed && wa.ram_pages == wb.ram_pages && wa.migrations == wb.migrations &&
		   !strcmp(wa.spec, wb.spec) && !strcmp(wa.guest, wb.guest), "kvm-workload differs");
	TRUNCATIONS(kvm_dec_workload, buf, len, &wb);
	buf[0] = 9;				/* unknown fill */
	TEST_CHECK(kvm_dec_workload(buf, len, &wb, why, sizeof(why)) == -EBADMSG, "fill 9");
	free(buf);

	buf = KVM_ENCODE_ALLOC(kvm_enc_clock, &ca, &len);
	TEST_ASSERT(buf && len == 28 && kvm_dec_clock(buf, len, &cb, why, sizeof(why)) == 0, "clock");
	TEST_CHECK(ca.clock_ns == cb.clock_ns && ca.flags == cb.flags &&
		   ca.realtime_ns == cb.realtime_ns && ca.host_tsc == cb.host_tsc, "kvm-clock differs");
	TRUNCATIONS(kvm_dec_clock, buf, len, &cb);
	free(buf);

	memset(&ia, 0, sizeof(ia));
	fill(&ia.pic, sizeof(ia.pic));
	ia.ioapic.base_address = rnd();
	ia.ioapic.ioregsel = (uint32_t)rnd();
	ia.ioapic.id = (uint32_t)rnd();
	ia.ioapic.irr = (uint32_t)rnd();
	for (unsigned i = 0; i < KVM_IOAPIC_NUM_PINS; i++)
		ia.ioapic.redirtbl[i].bits = rnd();
	buf = KVM_ENCODE_ALLOC(kvm_enc_irqchip, &ia, &len);
	TEST_ASSERT(buf && len == 244 && kvm_dec_irqchip(buf, len, &ib, why, sizeof(why)) == 0, "irqchip");
	TEST_CHECK(!memcmp(&ia, &ib, sizeof(ia)), "kvm-irqchip differs");
	TRUNCATIONS(kvm_dec_irqchip, buf, len, &ib);
	free(buf);

	fill(&pa, sizeof(pa));
	memset(pa.reserved, 0, sizeof(pa.reserved));
	buf = KVM_ENCODE_ALLOC(kvm_enc_pit, &pa, &len);
	TEST_ASSERT(buf && len == 76 && kvm_dec_pit(buf, len, &pb, why, sizeof(why)) == 0, "pit");
	TEST_CHECK(!memcmp(&pa, &pb, sizeof(pa)), "kvm-pit differs");
	TRUNCATIONS(kvm_dec_pit, buf, len, &pb);
	free(buf);
}

/*
 * The buffer helpers the codecs sit on (<godwit/buf.h>): sticky errors,
 * exact little-endian bytes, a sizing pass, a length patched later, a
 * sub-reader.
 */
static void le_basics(void)
{
	uint8_t b[16];
	struct gw_wbuf w;
	struct gw_rbuf r, sub;
	size_t at;

	gw_wbuf_init(&w, b, 6);
	gw_put_le32(&w, 0x11223344);
	gw_put_le32(&w, 0x55667788);		/* does not fit */
	gw_put_u8(&w, 1);			/* sticky: nothing more */
	TEST_CHECK(gw_wbuf_done(&w) < 0 && w.len == 4, "writer overflow");
	TEST_CHECK(b[0] == 0x44 && b[3] == 0x11, "little-endian");
	gw_rbuf_init(&r, b, 4);
	TEST_CHECK(gw_get_le16(&r) == 0x3344 && gw_get_le32(&r) == 0 && gw_rbuf_err(&r) < 0,
		   "reader overrun");
	TEST_CHECK(gw_get_u8(&r) == 0 && gw_rbuf_left(&r) == 0, "reader sticky");

	gw_wbuf_init(&w, NULL, 0);		/* sizing pass */
	gw_put_u8(&w, 1);
	at = gw_put_le32_later(&w);
	gw_put_le64(&w, 2);
	gw_patch_le32(&w, at, 8);
	TEST_CHECK(gw_wbuf_done(&w) == 0 && w.len == 13, "sizing pass counts %zu", w.len);
	gw_wbuf_init(&w, b, sizeof(b));
	gw_put_u8(&w, 0xab);
	at = gw_put_le32_later(&w);
	gw_put_le64(&w, 0x0102030405060708ull);
	gw_patch_le32(&w, at, 8);
	TEST_CHECK(gw_wbuf_done(&w) == 0 && w.len == 13 && b[1] == 8 && b[5] == 0x08, "patched");
	gw_rbuf_init(&r, b, w.len);
	TEST_CHECK(gw_get_u8(&r) == 0xab, "u8");
	sub = gw_rbuf_sub(&r, gw_get_le32(&r));
	TEST_CHECK(gw_get_le64(&sub) == 0x0102030405060708ull && gw_rbuf_done(&sub) == 0 &&
		   gw_rbuf_done(&r) == 0, "sub-reader");
	sub = gw_rbuf_sub(&r, 1);		/* nothing left */
	gw_get_copy(&sub, b, 2);
	TEST_CHECK(gw_rbuf_err(&r) < 0 && gw_rbuf_err(&sub) < 0 && b[0] == 0 && b[1] == 0,
		   "short sub-reader: underrun, zeros copied");
}

int main(void)
{
	le_basics();
	for (unsigned i = 0; i < 8; i++) {
		vcpu_round_trip(i & 1, i & 2);
		vm_round_trip();
		small_round_trips();
	}
	vcpu_hostile();
	TEST_EXIT();
}
