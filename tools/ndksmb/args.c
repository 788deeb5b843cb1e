/* What the client (ndksmb.c) and the server (serve.c) both read from their command lines. */
#include "ndksmb.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned long ndksmb_parse_num(const char *s, const char *what)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 0);
    if (errno || end == s) {
        fprintf(stderr, "ndksmb: %s: not a number: %s\n", what, s);
        exit(2);
    }
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    if (*end) {
        fprintf(stderr, "ndksmb: %s: not a number: %s\n", what, s);
        exit(2);
    }
    return v;
}

void ndksmb_split_user(const char *arg, const char **user, const char **password)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s", arg);
    char *pct = strchr(buf, '%');
    if (pct) {
        *pct = 0;
        *password = pct + 1;
    }
    *user = buf;
}
