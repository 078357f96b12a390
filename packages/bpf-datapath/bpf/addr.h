/* Address predicates on the 16-byte form every address takes in the datapath (IPv4 as
 * ::ffff:a.b.c.d). Pure functions of the bytes, no map. */
#ifndef CASCADE_ADDR_H
#define CASCADE_ADDR_H

static __always_inline int same_addr(const __u8 *a, const __u8 *b)
{
	const __u64 *x = (const __u64 *)a;
	const __u64 *y = (const __u64 *)b;
	return x[0] == y[0] && x[1] == y[1];
}

static __always_inline int is_zero(const __u8 *a)
{
	const __u64 *x = (const __u64 *)a;
	return x[0] == 0 && x[1] == 0;
}

static __always_inline int is_link_local6(const __u8 *a)
{
	return a[0] == 0xfe && (a[1] & 0xc0) == 0x80;
}

/* 0.0.0.0 as ::ffff:0.0.0.0 (an ARP probe's sender) */
static __always_inline int is_zero4(const __u8 *a)
{
	return a[12] == 0 && a[13] == 0 && a[14] == 0 && a[15] == 0;
}

#endif
