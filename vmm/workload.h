/* SPDX-License-Identifier: MIT */
/*
 * Workload specs, parsed and printed the same way for every backend:
 *
 *   idle                 no memory writes; progress ticks about every 1 ms.
 *   dirty[:ws=SIZE,pattern=byte|page,rate=PAGES_PER_SECOND]
 *                        rewrite the working set (default 256M, at most all
 *                        RAM; godwit run refuses a ws= larger than --memory)
 *                        over and over: one 8-byte word per page (byte)
 *                        or the whole page (page); rate is over all vCPUs,
 *                        0 = full speed. Progress: pages written.
 *                        Checked like verify (same cursor and generation
 *                        invariant): a page holds vmm_dirty_page() of its
 *                        last generation (common/content.h).
 *   verify[:ws=SIZE,rate=PAGES_PER_SECOND]
 *                        (default: all RAM, full speed) pass after pass,
 *                        rewrite every page of the slice whole with
 *                        vmm_verify_page(page, gen); rate as for dirty.
 *                        Progress: pages written.
 *   balloon[:ws=SIZE,keep=SIZE,window=PAGES,rate=PAGES_PER_SECOND]
 *                        (default: all RAM, keep 1/8 of it, window 64) a
 *                        guest that fills its memory, then frees most of it
 *                        and reports the freed pages (free-page hints), and
 *                        goes on using the rest: each vCPU rewrites the
 *                        first keep/nr_vcpus pages of its slice like verify,
 *                        and walks the others with a window of `window`
 *                        pages in use, reallocating (writing) the page in
 *                        front and freeing (hinting) the page behind: a page
 *                        written after it was hinted, over and over. The
 *                        check knows which pages are free (their content
 *                        does not matter) and checks every other page.
 *   l2fwd[:dst0=MAC,dst1=MAC,...,budget=FRAMES]
 *                        poll mode (no interrupts): frames read on NIC i
 *                        leave by NIC i ^ 1 (0<->1, 2<->3) with the source
 *                        MAC set to that NIC's and the destination to dstJ
 *                        for egress NIC J (default: the frame's own source,
 *                        back to the sender); a NIC without a partner
 *                        sends its frames back with source and destination
 *                        swapped. budget: frames per NIC per pass (default
 *                        32, 1..64). Needs at least one --nic. Runs on
 *                        vCPU 0 only (the others idle); no memory writes
 *                        outside the driver's area. Progress: frames
 *                        forwarded.
 *   echo                 interrupt-driven: vCPU 0 halts until NIC 0's
 *                        line rises, then sends every waiting frame back
 *                        with the MACs swapped. Needs a --nic. Progress:
 *                        frames sent back.
 *                        Both run the guest driver of common/vnet_drv.h;
 *                        only the 12 MAC bytes of a frame change.
 *
 * A rate makes the dirty rate independent of the machine's speed: tests that
 * need a migration to converge use one, so their outcome never depends on
 * how fast this machine's guest writes relative to its link.
 *
 * Verify invariant, kept by every backend between any two pause points:
 * vCPU i owns the slice [i * ws / n, (i + 1) * ws / n) of the working set;
 * with slice offset `cursor` and generation `gen` (>= 1), pages
 * [0, cursor) of the slice hold vmm_verify_page(page, gen) and pages
 * [cursor, end) hold generation gen-1; generation 0 means "never written by
 * the workload": the initial fill content of that page. A page is written
 * whole before the cursor moves. Where a vCPU can stop in the middle of a
 * page (KVM), the page at the cursor holds, word by word, its gen or its
 * gen-1 value (common/guest_abi.h).
 */
#ifndef GW_VMM_WORKLOAD_H
#define GW_VMM_WORKLOAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VMM_WORKLOAD_SPEC_MAX 128	/* canonical spec, with the NUL */

enum vmm_workload_kind {
	VMM_WL_IDLE = 0,
	VMM_WL_DIRTY,
	VMM_WL_VERIFY,
	VMM_WL_BALLOON,
	VMM_WL_L2FWD,
	VMM_WL_ECHO,
};

#define VMM_WL_NET_MAX_NICS 4u		/* == VMM_MAX_NICS */
#define VMM_WL_FWD_BUDGET_DEFAULT 32u
#define VMM_WL_FWD_BUDGET_MAX 64u	/* == VNET_DRV_QUEUE_NUM */

struct vmm_workload {
	enum vmm_workload_kind kind;
	bool ws_given;			/* ws= was in the spec */
	uint64_t ws_bytes;		/* as given (dirty default 256M; verify: all RAM) */
	bool pattern_page;		/* dirty: rewrite whole pages, else one word per page */
	uint64_t rate_pps;		/* pages per second over all vCPUs, 0 = full speed */
	uint64_t keep_bytes;		/* balloon: kept in use, over all vCPUs (0: ws / 8) */
	uint64_t window_pages;		/* balloon: pages in use in the freed part, per vCPU */
	/* l2fwd: the destination MAC of frames leaving NIC i (dst_set[i]: given). */
	uint8_t dst_mac[VMM_WL_NET_MAX_NICS][6];
	uint8_t dst_set[VMM_WL_NET_MAX_NICS];
	uint32_t budget_frames;		/* l2fwd: frames per NIC per pass */
};

/* Parse "name[:key=value,...]" (NULL = idle). 0, or -EINVAL with a reason in @err. */
int vmm_workload_parse(const char *spec, struct vmm_workload *wl, char *err, size_t err_len);
/* Pages of the working set for @ram_pages of RAM. */
uint64_t vmm_workload_ws_pages(const struct vmm_workload *wl, uint64_t ram_pages);
/* Whether the workload drives the NICs (l2fwd, echo): it needs at least one. */
bool vmm_workload_needs_nic(const struct vmm_workload *wl);
/* 0, or -EINVAL with a reason when @wl needs a NIC and there are none. */
int vmm_workload_check_nics(const struct vmm_workload *wl, unsigned nr_nics, char *err,
			    size_t err_len);
/* Whether every page's expected content is known (dirty, verify, balloon): the exact check. */
bool vmm_workload_checkable(const struct vmm_workload *wl);
/* balloon: pages kept in use over all vCPUs, for @ws_pages of working set. */
uint64_t vmm_workload_keep_pages(const struct vmm_workload *wl, uint64_t ws_pages);
/* Canonical spec with the effective working set, e.g. "verify:ws=67108864". */
void vmm_workload_format(const struct vmm_workload *wl, uint64_t ws_pages, char *buf,
			 size_t len);

#endif
