/* ndksmb's two halves: the client (ndksmb.c) and the server (serve.c), and what both read from
 * their command lines (args.c). */
#ifndef SOFTNDK_TOOLS_NDKSMB_H
#define SOFTNDK_TOOLS_NDKSMB_H

#include <ndk/softndk.h>

/* `ndksmb serve DIR [options]`, argv[0] being "serve": the exit status. */
int ndksmb_serve(int argc, char **argv);

/* -U USER[%PASS]: the user and, after a '%', the password (kept in a static buffer). */
void ndksmb_split_user(const char *arg, const char **user, const char **password);

/* A count or size given on the command line: decimal, 0x hex or 0 octal, with an optional k or
 * M (KiB, MiB) suffix; anything else prints "ndksmb: WHAT: not a number: S" and exits 2. */
unsigned long ndksmb_parse_num(const char *s, const char *what);

#endif
