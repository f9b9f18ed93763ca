/* SPDX-License-Identifier: MIT */
/* The running library's version (see godwit.h). */
#include <godwit/godwit.h>

const char *gw_version(void)
{
	return GW_VERSION_STRING;
}

unsigned gw_version_number(void)
{
	return GW_VERSION_NUMBER;
}
