/* SPDX-License-Identifier: MIT */
/*
 * QEMU's names for what godwit calls otherwise, in one place: migration
 * parameters (with their units), capabilities, migration statuses and run
 * states. The CLI's --set and the API take QEMU's parameter names as
 * aliases; the QMP socket speaks only these names (docs/qmp.md).
 *
 * Tables only: const arrays, read by any thread.
 */
#ifndef GW_CLI_QEMU_NAMES_H
#define GW_CLI_QEMU_NAMES_H

#include <stdbool.h>
#include <stdint.h>
#include <godwit/godwit.h>

/* How a QEMU parameter's value reads. */
enum qemu_kind {
	QEMU_INT,			/* integer in QEMU's unit */
	QEMU_BOOL,			/* true / false */
	QEMU_CODEC,			/* multifd-compression: "none", "zlib", "zstd" (+ godwit's) */
};

struct qemu_param {
	const char *name;		/* QEMU's, e.g. "downtime-limit" */
	enum gw_param p;		/* godwit's parameter */
	int64_t scale;			/* godwit value = QEMU value * scale */
	enum qemu_kind kind;
	const char *unit;		/* QEMU's unit, "" when none */
};

/* Every QEMU parameter godwit has, NULL-name terminated. */
extern const struct qemu_param qemu_params[];
/* By QEMU's name, or NULL. */
const struct qemu_param *qemu_param_by_name(const char *name);
/* The first QEMU name of godwit's @p, or NULL when QEMU has none. */
const struct qemu_param *qemu_param_of(enum gw_param p);

/*
 * QEMU's migration parameters that are the VMM's in godwit, not the
 * engine's (the engine stays device-agnostic): announce-*, taken by the
 * VM's announcer (vmm/dev/announce.h, which holds their defaults and
 * bounds). Integers in ms (rounds: a count).
 */
enum qemu_vmm_param {
	QEMU_VMM_ANNOUNCE_INITIAL,
	QEMU_VMM_ANNOUNCE_MAX,
	QEMU_VMM_ANNOUNCE_ROUNDS,
	QEMU_VMM_ANNOUNCE_STEP,
	QEMU_VMM__COUNT,
};
struct qemu_vmm_param_name {
	const char *name;		/* "announce-initial" */
	enum qemu_vmm_param p;
	const char *unit;		/* "ms", "" */
};
extern const struct qemu_vmm_param_name qemu_vmm_params[];	/* NULL-name terminated */
const struct qemu_vmm_param_name *qemu_vmm_param_by_name(const char *name);

/*
 * Capabilities (migrate-set-capabilities). Each is a godwit parameter
 * switched between two values, or not available in this build: asking for
 * it is an error naming @missing. A capability that lands is one entry.
 */
struct qemu_cap {
	const char *name;		/* "xbzrle", "auto-converge", ... */
	const char *missing;		/* NULL: available; else why not, for the error */
};
extern const struct qemu_cap qemu_caps[];
const struct qemu_cap *qemu_cap_by_name(const char *name);

/* QEMU's MigrationStatus for godwit's (handover is "device"; unknown is "failed"). */
const char *qemu_status_name(enum gw_status st);
/* QEMU's RunState for godwit's VM state name ("incoming" -> "inmigrate"). */
const char *qemu_runstate_name(const char *vm_status);

/*
 * Levenshtein distance between @a and @b, capped at @cap (returns cap + 1
 * when larger): for "did you mean" suggestions.
 */
unsigned qemu_edit_distance(const char *a, const char *b, unsigned cap);

#endif
