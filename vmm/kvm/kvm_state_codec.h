/* SPDX-License-Identifier: MIT */
/*
 * State sections of the KVM VMM: the in-memory form of each, and its wire
 * form, encoded field by field in little-endian with fixed widths
 * (<godwit/buf.h>). Pure functions: the unit tests round-trip every field without
 * KVM; kvm_state.c moves these structures to and from KVM.
 *
 * Sections (name, version 1 each):
 *
 *   "kvm-vm"        u32 nr_vcpus, u32 caps (KVM_COMPAT_*), u32 xsave_bytes,
 *                   u32 flags (bit 0: PIT created), u32 nr_cpuid, then per
 *                   entry u32 function, index, flags, eax, ebx, ecx, edx;
 *                   u32 nr_msrs, then u32 index per MSR the vCPUs carry
 *   "kvm-workload"  u32 fill (0 none 1 zero 2 mix 3 random 4 text), u32 flags
 *                   (bit 0: initial content unknown), u64 seed, u64 ram_pages,
 *                   u32 spec_len, spec bytes (canonical workload, no NUL),
 *                   u32 guest_len, guest bytes (image name), u64 migrations
 *                   (incoming migrations before this one)
 *   "kvm-clock"     u64 clock_ns, u32 flags, u64 realtime_ns, u64 host_tsc
 *   "kvm-irqchip"   PIC master, PIC slave: 16 x u8 each (kvm_pic_state order);
 *                   IOAPIC: u64 base_address, u32 ioregsel, u32 id, u32 irr,
 *                   24 x u64 redirection entries
 *   "kvm-pit"       (only with a PIT) 3 x { u32 count, u16 latched_count,
 *                   u8 count_latched, status_latched, status, read_state,
 *                   write_state, write_latch, rw_mode, mode, bcd, gate,
 *                   s64 count_load_time }, u32 flags
 *   "kvm-vcpu<i>"   u32 vcpu index, u32 nr_records, then records
 *                   { u32 tag, u32 len_bytes, payload }:
 *       1 REGS       18 x u64: rax rbx rcx rdx rsi rdi rsp rbp r8..r15 rip rflags
 *       2 SREGS      8 segments (cs ds es fs gs ss tr ldt: u64 base, u32 limit,
 *                    u16 selector, 9 x u8 type present dpl db s l g avl
 *                    unusable), gdt, idt (u64 base, u16 limit), u64 cr0 cr2
 *                    cr3 cr4 cr8 efer apic_base, 4 x u64 interrupt bitmap
 *       3 SREGS2     the same segments and tables, the same 7 x u64, u64 flags,
 *                    4 x u64 pdptrs (instead of SREGS where KVM has SREGS2)
 *       4 XSAVE      the XSAVE area as KVM_GET_XSAVE(2) gives it: an
 *                    architectural little-endian image (Intel SDM vol. 1 ch. 13),
 *                    carried as bytes; len_bytes = its size, a multiple of 4
 *       5 XCRS       u32 nr, u32 flags, nr x { u32 xcr, u64 value }
 *       6 MSRS       u32 nr, nr x { u32 index, u64 value }
 *       7 LAPIC      the 1024-byte APIC register page (architectural layout)
 *       8 EVENTS     exception: u8 injected nr has_error_code pending, u32
 *                    error_code; interrupt: u8 injected nr soft shadow; nmi:
 *                    u8 injected pending masked; u32 sipi_vector, u32 flags;
 *                    smi: u8 smm pending smm_inside_nmi latched_init; u8
 *                    triple_fault_pending, u8 exception_has_payload, u64
 *                    exception_payload
 *       9 MP_STATE   u32
 *      10 DEBUGREGS  4 x u64 db, u64 dr6, u64 dr7, u64 flags
 *     A decoder refuses unknown tags, repeated tags, wrong lengths, missing
 *     records (REGS, one of SREGS/SREGS2, XSAVE, MSRS, LAPIC, MP_STATE;
 *     EVENTS, XCRS, DEBUGREGS when caps say the source had them).
 */
#ifndef GW_KVM_STATE_CODEC_H
#define GW_KVM_STATE_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <linux/kvm.h>
#include <godwit/buf.h>
#include "kvm/kvm_compat.h"

#define KVM_SEC_VM "kvm-vm"
#define KVM_SEC_WORKLOAD "kvm-workload"
#define KVM_SEC_CLOCK "kvm-clock"
#define KVM_SEC_IRQCHIP "kvm-irqchip"
#define KVM_SEC_PIT "kvm-pit"
#define KVM_SEC_VCPU_FMT "kvm-vcpu%u"
#define KVM_SEC_VERSION 1u

#define KVM_XSAVE_MAX_BYTES (1u << 20)	/* refuse absurd XSAVE areas */
#define KVM_SPEC_MAX 128		/* canonical workload spec, with the NUL */
#define KVM_GUEST_NAME_MAX 32

enum kvm_rec_tag {
	KVM_REC_REGS = 1,
	KVM_REC_SREGS = 2,
	KVM_REC_SREGS2 = 3,
	KVM_REC_XSAVE = 4,
	KVM_REC_XCRS = 5,
	KVM_REC_MSRS = 6,
	KVM_REC_LAPIC = 7,
	KVM_REC_EVENTS = 8,
	KVM_REC_MP_STATE = 9,
	KVM_REC_DEBUGREGS = 10,
	KVM_REC__MAX = 10,
};

/* One vCPU's state. The xsave buffer is owned by whoever filled the struct. */
struct kvm_vcpu_state {
	uint32_t index;
	struct kvm_regs regs;
	bool has_sregs2;		/* sregs2 holds the system registers, else sregs */
	struct kvm_sregs sregs;
	struct kvm_sregs2 sregs2;
	uint32_t xsave_bytes;		/* size of xsave (multiple of 4) */
	uint8_t *xsave;
	bool has_xcrs;
	struct kvm_xcrs xcrs;
	uint32_t nr_msrs;
	struct kvm_msr_entry msrs[KVM_COMPAT_MAX_MSRS];
	struct kvm_lapic_state lapic;
	bool has_events;
	struct kvm_vcpu_events events;
	struct kvm_mp_state mp;
	bool has_debugregs;
	struct kvm_debugregs debugregs;
};

struct kvm_clock_state {
	uint64_t clock_ns;
	uint32_t flags;
	uint64_t realtime_ns;
	uint64_t host_tsc;
};

struct kvm_irqchip_state {
	struct kvm_pic_state pic[2];	/* master, slave */
	struct kvm_ioapic_state ioapic;
};

/* The VM-level description: also what the compatibility check reads. */
struct kvm_vm_state {
	uint32_t nr_vcpus;
	bool has_pit;
	struct kvm_compat compat;	/* caps, xsave_bytes, cpuid, msrs (max_vcpus = nr_vcpus) */
};

struct kvm_workload_state {
	uint32_t fill_wire;		/* 0 none 1 zero 2 mix 3 random 4 text */
	bool init_unknown;		/* never-rewritten pages hold unknown content */
	uint64_t seed;
	uint64_t ram_pages;
	char spec[KVM_SPEC_MAX];
	char guest[KVM_GUEST_NAME_MAX];
	uint64_t migrations;
};

/* Encoders: append to @w (sticky error in w). */
void kvm_enc_vcpu(struct gw_wbuf *w, const struct kvm_vcpu_state *s);
void kvm_enc_vm(struct gw_wbuf *w, const struct kvm_vm_state *s);
void kvm_enc_workload(struct gw_wbuf *w, const struct kvm_workload_state *s);
void kvm_enc_clock(struct gw_wbuf *w, const struct kvm_clock_state *s);
void kvm_enc_irqchip(struct gw_wbuf *w, const struct kvm_irqchip_state *s);
void kvm_enc_pit(struct gw_wbuf *w, const struct kvm_pit_state2 *s);

/*
 * Decoders: the whole buffer, hostile. 0, or -EBADMSG with the reason in
 * @why. kvm_dec_vcpu allocates s->xsave (free it with free()); @caps are
 * the source's KVM_COMPAT_* bits (which optional records must be there).
 */
int kvm_dec_vcpu(const void *buf, size_t len, uint32_t caps, struct kvm_vcpu_state *s,
		 char *why, size_t why_len);
/*
 * The same, XSAVE decoded into the caller's @xsave of @xsave_cap_bytes when
 * it fits (s->xsave == @xsave, still the caller's; else allocated as above).
 */
int kvm_dec_vcpu_into(const void *buf, size_t len, uint32_t caps, struct kvm_vcpu_state *s,
		      uint8_t *xsave, uint32_t xsave_cap_bytes, char *why, size_t why_len);
int kvm_dec_vm(const void *buf, size_t len, struct kvm_vm_state *s, char *why, size_t why_len);
int kvm_dec_workload(const void *buf, size_t len, struct kvm_workload_state *s,
		     char *why, size_t why_len);
int kvm_dec_clock(const void *buf, size_t len, struct kvm_clock_state *s, char *why, size_t why_len);
int kvm_dec_irqchip(const void *buf, size_t len, struct kvm_irqchip_state *s,
		    char *why, size_t why_len);
int kvm_dec_pit(const void *buf, size_t len, struct kvm_pit_state2 *s, char *why, size_t why_len);
/* The decoders' refusal: the reason into @why (NULL-safe), returns -EBADMSG. */
int kvm_dec_bad(char *why, size_t why_len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/*
 * Encode with @fn into a new malloc'd buffer: a sizing pass, then the real
 * one. Evaluates to the buffer (*@lenp set) or NULL (no memory, overflow).
 */
#define KVM_ENCODE_ALLOC(fn, arg, lenp) __extension__ ({			\
	struct gw_wbuf w_;							\
	uint8_t *b_;								\
	gw_wbuf_init(&w_, NULL, 0);						\
	fn(&w_, arg);								\
	b_ = malloc(w_.len ? w_.len : 1);				\
	if (b_) {								\
		gw_wbuf_init(&w_, b_, w_.len);				\
		fn(&w_, arg);							\
		if (gw_wbuf_done(&w_)) {					\
			free(b_);						\
			b_ = NULL;						\
		}								\
	}									\
	*(lenp) = w_.len;							\
	b_;									\
})

#endif
