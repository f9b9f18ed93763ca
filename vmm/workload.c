/* SPDX-License-Identifier: MIT */
/* Workload specs (see workload.h). */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "content.h"
#include "workload.h"

#define DIRTY_DEFAULT_WS_BYTES (256ull << 20)
#define BALLOON_DEFAULT_WINDOW 64

static int parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	if (!*s || *s == '-')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'k': case 'K': shift = 10; end++; break;
	case 'm': case 'M': shift = 20; end++; break;
	case 'g': case 'G': shift = 30; end++; break;
	case 't': case 'T': shift = 40; end++; break;
	default: break;
	}
	if (*end == 'i' || *end == 'B') {	/* accept "Mi", "MB", "MiB" */
		if (*end == 'i')
			end++;
		if (*end == 'B')
			end++;
	}
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static const char *const kind_names[] = {
	[VMM_WL_IDLE] = "idle", [VMM_WL_DIRTY] = "dirty", [VMM_WL_VERIFY] = "verify",
	[VMM_WL_BALLOON] = "balloon", [VMM_WL_L2FWD] = "l2fwd", [VMM_WL_ECHO] = "echo",
};

static int parse_mac(const char *s, uint8_t mac[6])
{
	for (unsigned i = 0; i < 6; i++) {
		unsigned v;

		/* two hex digits, nothing sscanf would also take ("0x", a sign, a space) */
		if (!isxdigit((unsigned char)s[0]) || !isxdigit((unsigned char)s[1]) ||
		    sscanf(s, "%2x", &v) != 1)
			return -EINVAL;
		mac[i] = (uint8_t)v;
		s += 2;
		if (*s != (i == 5 ? '\0' : ':'))
			return -EINVAL;
		s += i < 5;
	}
	return 0;
}

/* l2fwd's own options: dstN=MAC, budget=FRAMES. 1 when @key is none of them. */
static int parse_fwd_opt(struct vmm_workload *wl, const char *key, const char *val, char *err,
			 size_t err_len)
{
	uint64_t v;

	if (strncmp(key, "dst", 3) == 0 && key[3] >= '0' &&
	    key[3] < (char)('0' + VMM_WL_NET_MAX_NICS) && !key[4]) {
		unsigned i = (unsigned)(key[3] - '0');

		if (parse_mac(val, wl->dst_mac[i])) {
			snprintf(err, err_len, "bad MAC '%s' for %s (xx:xx:xx:xx:xx:xx)", val, key);
			return -EINVAL;
		}
		wl->dst_set[i] = 1;
		return 0;
	}
	if (strcmp(key, "budget") == 0) {
		if (parse_size(val, &v) || !v || v > VMM_WL_FWD_BUDGET_MAX) {
			snprintf(err, err_len, "bad budget '%s' (1..%u frames)", val,
				 VMM_WL_FWD_BUDGET_MAX);
			return -EINVAL;
		}
		wl->budget_frames = (uint32_t)v;
		return 0;
	}
	return 1;
}

/* The workloads that write a working set (ws=, rate=). */
static bool has_ws(const struct vmm_workload *wl)
{
	return wl->kind == VMM_WL_DIRTY || wl->kind == VMM_WL_VERIFY || wl->kind == VMM_WL_BALLOON;
}

/* The workload's name and its defaults. 0, or -EINVAL with a reason. */
static int parse_kind(const char *name, struct vmm_workload *wl, char *err, size_t err_len)
{
	if (strcmp(name, "idle") == 0) {
		wl->kind = VMM_WL_IDLE;
	} else if (strcmp(name, "dirty") == 0) {
		wl->kind = VMM_WL_DIRTY;
		wl->ws_bytes = DIRTY_DEFAULT_WS_BYTES;
		wl->pattern_page = true;
	} else if (strcmp(name, "verify") == 0) {
		wl->kind = VMM_WL_VERIFY;
	} else if (strcmp(name, "balloon") == 0) {
		wl->kind = VMM_WL_BALLOON;
		wl->window_pages = BALLOON_DEFAULT_WINDOW;
	} else if (strcmp(name, "l2fwd") == 0) {
		wl->kind = VMM_WL_L2FWD;
		wl->budget_frames = VMM_WL_FWD_BUDGET_DEFAULT;
	} else if (strcmp(name, "echo") == 0) {
		wl->kind = VMM_WL_ECHO;
	} else {
		snprintf(err, err_len,
			 "unknown workload '%s' (idle, dirty, verify, balloon, l2fwd, echo)", name);
		return -EINVAL;
	}
	return 0;
}

/* The working-set workloads' options: ws, pattern, rate, keep, window. 1 when @key is none of them. */
static int parse_ws_opt(struct vmm_workload *wl, const char *key, const char *val, char *err,
			size_t err_len)
{
	if (strcmp(key, "ws") == 0 && has_ws(wl)) {
		if (parse_size(val, &wl->ws_bytes) || wl->ws_bytes < VMM_PAGE_BYTES) {
			snprintf(err, err_len, "bad working set size '%s'", val);
			return -EINVAL;
		}
		wl->ws_given = true;
	} else if (strcmp(key, "pattern") == 0 && wl->kind == VMM_WL_DIRTY) {
		if (strcmp(val, "page") && strcmp(val, "byte")) {
			snprintf(err, err_len, "bad pattern '%s' (byte, page)", val);
			return -EINVAL;
		}
		wl->pattern_page = strcmp(val, "page") == 0;
	} else if (strcmp(key, "rate") == 0 && has_ws(wl)) {
		if (parse_size(val, &wl->rate_pps)) {
			snprintf(err, err_len, "bad rate '%s' (pages per second)", val);
			return -EINVAL;
		}
	} else if (strcmp(key, "keep") == 0 && wl->kind == VMM_WL_BALLOON) {
		if (parse_size(val, &wl->keep_bytes) || wl->keep_bytes < VMM_PAGE_BYTES) {
			snprintf(err, err_len, "bad kept size '%s'", val);
			return -EINVAL;
		}
	} else if (strcmp(key, "window") == 0 && wl->kind == VMM_WL_BALLOON) {
		if (parse_size(val, &wl->window_pages) || !wl->window_pages || wl->window_pages > 1u << 20) {
			snprintf(err, err_len, "bad window '%s' (1..1M pages)", val);
			return -EINVAL;
		}
	} else {
		return 1;
	}
	return 0;
}

int vmm_workload_parse(const char *spec, struct vmm_workload *wl, char *err, size_t err_len)
{
	char buf[VMM_WORKLOAD_SPEC_MAX * 2];
	char *args, *tok, *save = NULL;
	int ret;

	memset(wl, 0, sizeof(*wl));
	if (!spec || !*spec)
		spec = "idle";
	if (strlen(spec) >= sizeof(buf)) {
		snprintf(err, err_len, "workload spec too long");
		return -EINVAL;
	}
	strcpy(buf, spec);
	args = strchr(buf, ':');
	if (args)
		*args++ = '\0';
	ret = parse_kind(buf, wl, err, err_len);
	if (ret || !args)
		return ret;
	for (tok = strtok_r(args, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *val = strchr(tok, '=');

		if (!val) {
			snprintf(err, err_len, "workload option '%s' needs a value", tok);
			return -EINVAL;
		}
		*val++ = '\0';
		ret = wl->kind == VMM_WL_L2FWD ? parse_fwd_opt(wl, tok, val, err, err_len) : 1;
		if (ret == 1)
			ret = parse_ws_opt(wl, tok, val, err, err_len);
		if (ret == 1) {
			snprintf(err, err_len, "unknown option '%s' for workload %s", tok, kind_names[wl->kind]);
			return -EINVAL;
		}
		if (ret)
			return ret;
	}
	return 0;
}

uint64_t vmm_workload_ws_pages(const struct vmm_workload *wl, uint64_t ram_pages)
{
	uint64_t pages;

	if (!has_ws(wl))
		return 0;
	if ((wl->kind == VMM_WL_VERIFY || wl->kind == VMM_WL_BALLOON) && !wl->ws_given)
		return ram_pages;
	pages = wl->ws_bytes / VMM_PAGE_BYTES;
	return pages < ram_pages ? pages : ram_pages;
}

/* "l2fwd:budget=B[,dstI=MAC...]" (at most 4 MACs: fits VMM_WORKLOAD_SPEC_MAX). */
static void format_fwd(const struct vmm_workload *wl, char *buf, size_t len)
{
	int n = snprintf(buf, len, "l2fwd:budget=%u", wl->budget_frames);

	for (unsigned i = 0; i < VMM_WL_NET_MAX_NICS && n > 0 && (size_t)n < len; i++) {
		const uint8_t *m = wl->dst_mac[i];

		if (wl->dst_set[i])
			n += snprintf(buf + n, len - (size_t)n,
				      ",dst%u=%02x:%02x:%02x:%02x:%02x:%02x", i, m[0], m[1], m[2],
				      m[3], m[4], m[5]);
	}
}

void vmm_workload_format(const struct vmm_workload *wl, uint64_t ws_pages, char *buf,
			  size_t len)
{
	switch (wl->kind) {
	case VMM_WL_DIRTY:
		snprintf(buf, len, "dirty:ws=%" PRIu64 ",pattern=%s,rate=%" PRIu64,
			 ws_pages * VMM_PAGE_BYTES, wl->pattern_page ? "page" : "byte",
			 wl->rate_pps);
		break;
	case VMM_WL_VERIFY:
		if (wl->rate_pps)
			snprintf(buf, len, "verify:ws=%" PRIu64 ",rate=%" PRIu64,
				 ws_pages * VMM_PAGE_BYTES, wl->rate_pps);
		else
			snprintf(buf, len, "verify:ws=%" PRIu64, ws_pages * VMM_PAGE_BYTES);
		break;
	case VMM_WL_BALLOON:
		snprintf(buf, len, "balloon:ws=%" PRIu64 ",keep=%" PRIu64 ",window=%" PRIu64 ",rate=%" PRIu64,
			 ws_pages * VMM_PAGE_BYTES, vmm_workload_keep_pages(wl, ws_pages) * VMM_PAGE_BYTES,
			 wl->window_pages, wl->rate_pps);
		break;
	case VMM_WL_L2FWD:
		format_fwd(wl, buf, len);
		break;
	case VMM_WL_ECHO:
		snprintf(buf, len, "echo");
		break;
	default:
		snprintf(buf, len, "idle");
		break;
	}
}

uint64_t vmm_workload_keep_pages(const struct vmm_workload *wl, uint64_t ws_pages)
{
	uint64_t keep = wl->keep_bytes ? wl->keep_bytes / VMM_PAGE_BYTES : ws_pages / 8;

	return keep < ws_pages ? keep : ws_pages;
}

bool vmm_workload_checkable(const struct vmm_workload *wl)
{
	return wl->kind == VMM_WL_DIRTY || wl->kind == VMM_WL_VERIFY || wl->kind == VMM_WL_BALLOON;
}

bool vmm_workload_needs_nic(const struct vmm_workload *wl)
{
	return wl->kind == VMM_WL_L2FWD || wl->kind == VMM_WL_ECHO;
}

int vmm_workload_check_nics(const struct vmm_workload *wl, unsigned nr_nics, char *err,
			    size_t err_len)
{
	if (!vmm_workload_needs_nic(wl) || nr_nics)
		return 0;
	snprintf(err, err_len, "workload %s drives the guest's NICs: the VM has none (--nic)",
		 kind_names[wl->kind]);
	return -EINVAL;
}
