/* SPDX-License-Identifier: MIT */
/*
 * Guest entry and interrupt stubs. The VMM starts every vCPU here in 64-bit
 * mode with RDI = vCPU index, RSI = boot info, RSP = top of its stack.
 */
#include "guest_abi.h"

	.section .text.start, "ax"
	.code64
	.globl _start
_start:
	cld
	xorl	%ebp, %ebp
	call	guest_main		/* never returns */
1:	cli
	hlt
	jmp	1b

/* Exceptions: push a zero error code where the CPU pushes none. */
	.macro EXC vec, has_err
	.globl	exc_\vec
exc_\vec:
	.if \has_err == 0
	pushq	$0
	.endif
	pushq	$\vec
	jmp	exc_common
	.endm

	.text
	EXC 0,0
	EXC 1,0
	EXC 2,0
	EXC 3,0
	EXC 4,0
	EXC 5,0
	EXC 6,0
	EXC 7,0
	EXC 8,1
	EXC 9,0
	EXC 10,1
	EXC 11,1
	EXC 12,1
	EXC 13,1
	EXC 14,1
	EXC 15,0
	EXC 16,0
	EXC 17,1
	EXC 18,0
	EXC 19,0
	EXC 20,0
	EXC 21,1
	EXC 22,0
	EXC 23,0
	EXC 24,0
	EXC 25,0
	EXC 26,0
	EXC 27,0
	EXC 28,0
	EXC 29,1
	EXC 30,1
	EXC 31,0

	/* Vectors 32..255: one 16-byte stub each, at exc_other + (vector - 32) * 16. */
	.balign	16
	.globl	exc_other
exc_other:
	.set	vec, 32
	.rept	224
	.balign	16
	pushq	$0
	pushq	$vec
	jmp	exc_common
	.set	vec, vec + 1
	.endr

/* Stack: vector, error code, RIP, CS, RFLAGS, RSP, SS. */
exc_common:
	movq	(%rsp), %rdi
	movq	16(%rsp), %rsi
	movq	8(%rsp), %rdx
	andq	$-16, %rsp
	call	guest_exception		/* never returns */
2:	cli
	hlt
	jmp	2b

/*
 * LAPIC timer (x2APIC): count a tick in this vCPU's area (its x2APIC ID is
 * its index), then EOI. Touches only RAX, RCX, RDX, saved here.
 */
	.globl	timer_isr
timer_isr:
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	movl	$0x802, %ecx		/* x2APIC ID */
	rdmsr
	shlq	$7, %rax		/* * GW_VCPU_AREA_BYTES */
	addq	$(GW_GUEST_VCPU_AREA_GPA + GW_VCPU_AREA_TICKS_OFF), %rax
	incq	(%rax)
	movl	$0x80b, %ecx		/* EOI */
	xorl	%eax, %eax
	xorl	%edx, %edx
	wrmsr
	popq	%rdx
	popq	%rcx
	popq	%rax
	iretq

	.globl	spurious_isr
spurious_isr:
	iretq

/*
 * The NICs' vector (GW_GUEST_VEC_NIC): guest_nic_irq() in C, with every
 * caller-saved register kept. The CPU aligned RSP to 16 before its 40-byte
 * frame; 9 pushes make it 16-aligned again at the call.
 */
	.globl	nic_isr
nic_isr:
	pushq	%rax
	pushq	%rcx
	pushq	%rdx
	pushq	%rsi
	pushq	%rdi
	pushq	%r8
	pushq	%r9
	pushq	%r10
	pushq	%r11
	call	guest_nic_irq
	popq	%r11
	popq	%r10
	popq	%r9
	popq	%r8
	popq	%rdi
	popq	%rsi
	popq	%rdx
	popq	%rcx
	popq	%rax
	iretq

	.section .note.GNU-stack, "", @progbits
