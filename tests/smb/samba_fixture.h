/* A private Samba smbd on loopback for the SMB2 client's integration tests: its own smb.conf
 * and directories in a temporary folder, one share, one user, on a free port. The smbd dies
 * with the test process (PR_SET_PDEATHSIG) and is stopped by samba_stop with a bounded wait. */
#ifndef SOFTNDK_TESTS_SAMBA_FIXTURE_H
#define SOFTNDK_TESTS_SAMBA_FIXTURE_H

#include <stdint.h>
#include <sys/types.h>

#define SAMBA_USER     "softndksmb"
#define SAMBA_PASSWORD "Sm6-test-pw"
#define SAMBA_SHARE    "data"

struct samba {
    char dir[256];   /* the temporary folder */
    char share[300]; /* the share's folder */
    uint16_t port;
    pid_t pid;
};

/* Starts smbd; SKIPs (77) with the reason when Samba or the user cannot be had.
 * signing: "mandatory", "default" or "disabled" (server signing). */
void samba_start(struct samba *s, const char *signing);
void samba_stop(struct samba *s);

#endif
