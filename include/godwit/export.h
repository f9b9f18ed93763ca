/* SPDX-License-Identifier: MIT */
/*
 * GW_EXPORT marks the public API: libgodwit is built with hidden symbol
 * visibility, so only functions declared with it are exported from the
 * shared library. Everything else in the engine stays private.
 */
#ifndef GODWIT_EXPORT_H
#define GODWIT_EXPORT_H

#if defined(__GNUC__)
#define GW_EXPORT __attribute__((visibility("default")))
#else
#define GW_EXPORT
#endif

#endif
