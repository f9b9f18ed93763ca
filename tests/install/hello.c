/* SPDX-License-Identifier: MIT */
/* The smallest embedder: built against the installed libgodwit with pkg-config. */
#include <stdio.h>
#include <string.h>
#include <godwit/godwit.h>

int main(void)
{
	printf("libgodwit %s (headers %s)\n", gw_version(), GW_VERSION_STRING);
	return strcmp(gw_version(), GW_VERSION_STRING) != 0;
}
