/* SPDX-License-Identifier: MIT */
/* The guests' common code (see guest.h). */
#include "guest.h"

#define MSR_APIC_BASE 0x1b
#define APIC_BASE_EXTD (1ull << 10)
#define APIC_BASE_EN (1ull << 11)
#define X2APIC_ID 0x802
#define X2APIC_SVR 0x80f
#define X2APIC_LVT_TIMER 0x832
#define X2APIC_TIMER_ICR 0x838
#define X2APIC_TIMER_DCR 0x83e
#define LVT_TIMER_PERIODIC (1u << 17)

struct idt_gate {
	uint16_t off0;
	uint16_t sel;
	uint8_t ist;
	uint8_t type_attr;		/* P | DPL 0 | interrupt gate (0xe) */
	uint16_t off1;
	uint32_t off2;
	uint32_t zero;
};

static struct idt_gate idt[256] __attribute__((aligned(16)));

extern char exc_0[], exc_1[], exc_2[], exc_3[], exc_4[], exc_5[], exc_6[], exc_7[];
extern char exc_8[], exc_9[], exc_10[], exc_11[], exc_12[], exc_13[], exc_14[], exc_15[];
extern char exc_16[], exc_17[], exc_18[], exc_19[], exc_20[], exc_21[], exc_22[], exc_23[];
extern char exc_24[], exc_25[], exc_26[], exc_27[], exc_28[], exc_29[], exc_30[], exc_31[];
extern char exc_other[], timer_isr[], spurious_isr[], nic_isr[];

static char *const exc_stubs[32] = {
	exc_0, exc_1, exc_2, exc_3, exc_4, exc_5, exc_6, exc_7,
	exc_8, exc_9, exc_10, exc_11, exc_12, exc_13, exc_14, exc_15,
	exc_16, exc_17, exc_18, exc_19, exc_20, exc_21, exc_22, exc_23,
	exc_24, exc_25, exc_26, exc_27, exc_28, exc_29, exc_30, exc_31,
};

void *memset(void *d, int c, unsigned long n)
{
	volatile uint8_t *p = d;

	while (n--)
		*p++ = (uint8_t)c;
	return d;
}

void *memcpy(void *d, const void *s, unsigned long n)
{
	volatile uint8_t *p = d;
	const uint8_t *q = s;

	while (n--)
		*p++ = *q++;
	return d;
}

static void serial_putc(char c)
{
	outb(GW_SERIAL_PORT, (uint8_t)c);
}

void serial_puts(const char *s)
{
	while (*s)
		serial_putc(*s++);
}

void serial_put_u64(uint64_t v)
{
	char buf[21];
	int i = 20;

	buf[i] = '\0';
	do {
		buf[--i] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	serial_puts(&buf[i]);
}

void guest_hello(uint64_t idx, const char *what)
{
	serial_puts(what);
	serial_puts(" vcpu=");
	serial_put_u64(idx);
	serial_puts("\n");
	pv_call(GW_PV_HELLO);
}

static void idt_set(unsigned vec, const void *handler)
{
	uint64_t a = (uint64_t)(uintptr_t)handler;

	idt[vec].off0 = (uint16_t)a;
	idt[vec].sel = GW_GUEST_SEL_CODE;
	idt[vec].ist = 0;
	idt[vec].type_attr = 0x8e;
	idt[vec].off1 = (uint16_t)(a >> 16);
	idt[vec].off2 = (uint32_t)(a >> 32);
	idt[vec].zero = 0;
}

static void idt_init(void)
{
	struct __attribute__((packed)) {
		uint16_t limit;
		uint64_t base;
	} idtr;

	/*
	 * One IDT for all vCPUs, written by each as it starts while others may
	 * already take interrupts: every entry is written once with its final
	 * value, so a concurrent rewrite stores the same bytes.
	 */
	for (unsigned v = 0; v < 256; v++)
		idt_set(v, v == GW_GUEST_VEC_TIMER ? timer_isr :
			   v == GW_GUEST_VEC_SPURIOUS ? spurious_isr :
			   v == GW_GUEST_VEC_NIC ? nic_isr :
			   v < 32 ? exc_stubs[v] : exc_other + (v - 32) * 16);
	idtr.limit = sizeof(idt) - 1;
	idtr.base = (uint64_t)(uintptr_t)idt;
	__asm__ __volatile__("lidt %0" : : "m"(idtr) : "memory");
}

void guest_init(uint64_t idx, const char *what)
{
	idt_init();
	wrmsr(MSR_APIC_BASE, rdmsr(MSR_APIC_BASE) | APIC_BASE_EN | APIC_BASE_EXTD);
	wrmsr(X2APIC_SVR, 0x100 | GW_GUEST_VEC_SPURIOUS);
	publish_u64(&vcpu_area(idx)->state, GW_VCPU_RUNNING);
	guest_hello(idx, what);
}

void x2apic_timer_start(uint64_t count)
{
	wrmsr(X2APIC_TIMER_DCR, 0xb);		/* divide by 1 */
	wrmsr(X2APIC_LVT_TIMER, LVT_TIMER_PERIODIC | GW_GUEST_VEC_TIMER);
	wrmsr(X2APIC_TIMER_ICR, count);
}

/* Guests without NICs: their vector is an unexpected interrupt, like any other. */
__attribute__((weak)) void guest_nic_irq(void)
{
	guest_exception(GW_GUEST_VEC_NIC, 0, 0);
}

void guest_halt_forever(void)
{
	for (;;)
		__asm__ __volatile__("cli; hlt");
}

void guest_exception(uint64_t vector, uint64_t rip, uint64_t error)
{
	/* guest_init() turned x2APIC mode on before anything could fault. */
	uint64_t idx = rdmsr(MSR_APIC_BASE) & APIC_BASE_EXTD ? rdmsr(X2APIC_ID) : 0;
	struct gw_vcpu_area *a = vcpu_area(idx < GW_GUEST_MAX_VCPUS ? idx : 0);

	a->args[0] = vector;
	a->args[1] = rip;
	a->args[2] = error;
	publish_u64(&a->state, GW_VCPU_FAILED);
	pv_call(GW_PV_PANIC);
	guest_halt_forever();
}
