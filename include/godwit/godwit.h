/* SPDX-License-Identifier: MIT */
/* libgodwit: live migration engine. Include this one header. */
#ifndef GODWIT_H
#define GODWIT_H

#include <godwit/buf.h>
#include <godwit/export.h>
#include <godwit/log.h>
#include <godwit/params.h>
#include <godwit/session.h>
#include <godwit/stats.h>
#include <godwit/version.h>
#include <godwit/vm.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * The version of the library actually running ("0.1.0"), which may differ
 * from GW_VERSION_STRING, the one these headers were built against.
 */
GW_EXPORT const char *gw_version(void);
/* The same as GW_VERSION_NUMBER computes it. */
GW_EXPORT unsigned gw_version_number(void);

#ifdef __cplusplus
}
#endif
#endif
