/* Socket addresses as softndk keeps them: an IPv4 or IPv6 address and port, copied from a
 * consumer's sockaddr once it is checked. Every layer names connections by them (the objects,
 * the counters, the capture), so they sit in util/ and know nothing else. */
#ifndef SOFTNDK_UTIL_ADDR_H
#define SOFTNDK_UTIL_ADDR_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <ndk/softndk.h>

struct sndk_addr {
    union {
        struct sockaddr sa;
        struct sockaddr_in in;
        struct sockaddr_in6 in6;
    };
    socklen_t len;
};

/* Copy a consumer's address: STATUS_SUCCESS, or STATUS_INVALID_ADDRESS (not AF_INET / AF_INET6
 * of the right length). */
NTSTATUS sndk_addr_from(struct sndk_addr *a, const struct sockaddr *sa, ULONG len);
uint16_t sndk_addr_port(const struct sndk_addr *a);
void sndk_addr_set_port(struct sndk_addr *a, uint16_t port);
bool sndk_addr_is_wildcard(const struct sndk_addr *a);
bool sndk_addr_same_host(const struct sndk_addr *a, const struct sndk_addr *b); /* addr only */
bool sndk_addr_equal(const struct sndk_addr *a, const struct sndk_addr *b);     /* addr + port */
/* "1.2.3.4:5" / "[::1]:5" */
const char *sndk_addr_str(const struct sndk_addr *a, char *buf, size_t len);
/* Write a to the consumer's buffer with the NDK size protocol: STATUS_SUCCESS or
 * STATUS_BUFFER_TOO_SMALL, *plen set either way. */
NTSTATUS sndk_addr_copy_out(const struct sndk_addr *a, struct sockaddr *out, ULONG *plen);

#endif
