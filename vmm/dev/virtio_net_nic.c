/* SPDX-License-Identifier: MIT */
/* The --nic option (virtio_net.h): "tap=IFNAME[,mac=XX:XX:XX:XX:XX:XX]". */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include "dev/virtio_net.h"

static int parse_mac(const char *v, size_t len, uint8_t mac[6])
{
	if (len != 17)
		return -EINVAL;
	for (unsigned i = 0; i < 6; i++) {
		unsigned b = 0;

		for (unsigned j = 0; j < 2; j++) {
			char c = v[3 * i + j];

			b <<= 4;
			if (c >= '0' && c <= '9')
				b |= (unsigned)(c - '0');
			else if (c >= 'a' && c <= 'f')
				b |= (unsigned)(c - 'a' + 10);
			else if (c >= 'A' && c <= 'F')
				b |= (unsigned)(c - 'A' + 10);
			else
				return -EINVAL;
		}
		if (i < 5 && v[3 * i + 2] != ':')
			return -EINVAL;
		mac[i] = (uint8_t)b;
	}
	return mac[0] & 1 ? -EINVAL : 0;	/* a NIC's own address is never multicast */
}

int virtio_net_parse_nic(const char *spec, struct virtio_net_nic *nic, char *why, size_t why_len)
{
	const char *p = spec;

	memset(nic, 0, sizeof(*nic));
	if (spec && *spec && spec[strlen(spec) - 1] == ',') {
		snprintf(why, why_len, "--nic %s: empty option after ','", spec);
		return -EINVAL;
	}
	while (p && *p) {
		const char *end = strchr(p, ','), *eq = strchr(p, '=');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		size_t klen, vlen;

		if (!eq || eq >= p + len) {
			snprintf(why, why_len, "--nic %s: \"%.*s\" is not key=value", spec, (int)len, p);
			return -EINVAL;
		}
		klen = (size_t)(eq - p);
		vlen = len - klen - 1;
		if (klen == 3 && !memcmp(p, "tap", 3)) {
			if (vlen == 0 || vlen >= IFNAMSIZ || memchr(eq + 1, '/', vlen) ||
			    memchr(eq + 1, ' ', vlen)) {
				snprintf(why, why_len, "--nic %s: interface name of %zu bytes "
					 "(1..%d, no '/' or space)", spec, vlen, IFNAMSIZ - 1);
				return -EINVAL;
			}
			memcpy(nic->ifname, eq + 1, vlen);
			nic->ifname[vlen] = '\0';
		} else if (klen == 3 && !memcmp(p, "mac", 3)) {
			if (parse_mac(eq + 1, vlen, nic->mac)) {
				snprintf(why, why_len, "--nic %s: mac is XX:XX:XX:XX:XX:XX, "
					 "unicast", spec);
				return -EINVAL;
			}
			nic->mac_set = true;
		} else {
			snprintf(why, why_len, "--nic %s: unknown key \"%.*s\" (tap, mac)", spec,
				 (int)klen, p);
			return -EINVAL;
		}
		p = end ? end + 1 : NULL;
	}
	if (!nic->ifname[0]) {
		snprintf(why, why_len, "--nic %s: tap=IFNAME is required", spec ? spec : "");
		return -EINVAL;
	}
	return 0;
}
