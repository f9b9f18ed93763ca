/* SPDX-License-Identifier: MIT */
/*
 * What every guest shares: port I/O, the paravirtual call, the serial
 * console, the IDT, the x2APIC timer. Freestanding: no libc. Guest
 * instructions are emulated at about 1.5 M/s on nested hosts, so the loops
 * that matter are kept to a few instructions per word.
 *
 * Where KVM runs guests through its instruction emulator (nested hosts
 * without hardware virtualisation for L2, like this one), two rules:
 *  - never a string instruction (rep stos/movs) on guest RAM: one emulated
 *    `rep stosq` pushes an entry into the KVM dirty ring per iteration, past
 *    the ring's reserve (the host kernel warns in kvm_dirty_ring_push and the
 *    ring overflows); one store instruction dirties a page at most twice,
 *    which the reserve absorbs;
 *  - no SSE/x87 arithmetic: KVM's emulator knows only SSE moves (movdqa,
 *    movdqu, movaps, movups); anything else is KVM_INTERNAL_ERROR_EMULATION.
 * So guests are built with -mgeneral-regs-only and
 * -fno-tree-loop-distribute-patterns (gcc makes no memset calls or string
 * instructions of its own); SSE registers appear only in explicit asm moves.
 */
#ifndef GW_GUEST_H
#define GW_GUEST_H

#include <stdint.h>
#include "guest_abi.h"

#define barrier() __asm__ __volatile__("" ::: "memory")

static inline void outb(uint16_t port, uint8_t v)
{
	__asm__ __volatile__("outb %0, %1" : : "a"(v), "Nd"(port));
}

static inline uint32_t inl(uint16_t port)
{
	uint32_t v;

	__asm__ __volatile__("inl %1, %0" : "=a"(v) : "Nd"(port) : "memory");
	return v;
}

static inline uint64_t rdmsr(uint32_t msr)
{
	uint32_t lo, hi;

	__asm__ __volatile__("rdmsr" : "=a"(lo), "=d"(hi) : "c"(msr));
	return (uint64_t)hi << 32 | lo;
}

static inline void wrmsr(uint32_t msr, uint64_t v)
{
	__asm__ __volatile__("wrmsr" : : "c"(msr), "a"((uint32_t)v), "d"((uint32_t)(v >> 32)));
}

static inline struct gw_vcpu_area *vcpu_area(uint64_t idx)
{
	return (struct gw_vcpu_area *)(GW_GUEST_VCPU_AREA_GPA + idx * GW_VCPU_AREA_BYTES);
}

/* Store that the VMM may read at any time (progress, cursor). */
static inline void publish_u64(uint64_t *p, uint64_t v)
{
	barrier();
	*(volatile uint64_t *)p = v;
}

static inline uint64_t read_u64(const uint64_t *p)
{
	return *(const volatile uint64_t *)p;
}

/* A paravirtual call: arguments already in area->args. */
static inline uint32_t pv_call(enum gw_pv_command cmd)
{
	barrier();
	return inl((uint16_t)(GW_PV_PORT_BASE + cmd));
}

void serial_puts(const char *s);
void serial_put_u64(uint64_t v);
/* "<what> vcpu=<idx>" on the serial console, and PV hello. */
void guest_hello(uint64_t idx, const char *what);
/*
 * Every guest first: IDT (exceptions report through GW_PV_PANIC), x2APIC
 * mode (the ID MSR names the vCPU), state RUNNING, hello.
 */
void guest_init(uint64_t idx, const char *what);
/* Periodic x2APIC timer at @count bus cycles on GW_GUEST_VEC_TIMER. */
void x2apic_timer_start(uint64_t count);
/* Report failure state and stop this vCPU for good. */
void guest_halt_forever(void) __attribute__((noreturn));

/* Entry points called from start.S. */
void guest_main(uint64_t idx, struct gw_boot_info *bi) __attribute__((noreturn));
void guest_exception(uint64_t vector, uint64_t rip, uint64_t error) __attribute__((noreturn));
/* The NICs' interrupt (GW_GUEST_VEC_NIC), from nic_isr; weak in lib.c (nic.c's for the NIC guests). */
void guest_nic_irq(void);

/* gcc may emit calls to these even in freestanding code. */
void *memset(void *d, int c, unsigned long n);
void *memcpy(void *d, const void *s, unsigned long n);

#endif
