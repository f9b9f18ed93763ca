/* SPDX-License-Identifier: MIT */
/* libgodwit: live migration engine. Include this one header. */
#ifndef GODWIT_H
#define GODWIT_H

#define GW_VERSION_MAJOR 0
#define GW_VERSION_MINOR 1

#include <godwit/log.h>
#include <godwit/params.h>
#include <godwit/session.h>
#include <godwit/stats.h>
#include <godwit/vm.h>

#endif
