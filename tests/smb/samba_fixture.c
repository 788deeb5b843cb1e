#include "samba_fixture.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness.h"

/* smbd: $SOFTNDK_SMBD (a Samba smbd unpacked elsewhere), else Debian's /usr/sbin/smbd. */
static const char *smbd_path(void)
{
    const char *p = getenv("SOFTNDK_SMBD");
    if (p && *p)
        return p;
    return "/usr/sbin/smbd";
}

static uint16_t free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    CHECK(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
    socklen_t l = sizeof(a);
    CHECK(getsockname(fd, (struct sockaddr *)&a, &l) == 0);
    close(fd);
    return ntohs(a.sin_port);
}

static int run(const char *const argv[], const char *stdin_text)
{
    int pfd[2];
    if (pipe(pfd) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[0], 0);
        close(pfd[1]);
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    close(pfd[0]);
    if (stdin_text) {
        ssize_t w = write(pfd[1], stdin_text, strlen(stdin_text));
        (void)w;
    }
    close(pfd[1]);
    int st = 0;
    for (int i = 0; i < 300; i++) { /* 30 s */
        pid_t r = waitpid(pid, &st, WNOHANG);
        if (r == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1;
}

static int port_open(uint16_t port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {
        .sin_family = AF_INET, .sin_port = htons(port), .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int ok = connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    close(fd);
    return ok;
}

void samba_start(struct samba *s, const char *signing)
{
    memset(s, 0, sizeof(*s));
    if (access(smbd_path(), X_OK) != 0)
        SKIP("no Samba smbd at %s (apt-get install samba, or SOFTNDK_SMBD=path; Debian's "
             "samba conflicts with ksmbd-tools)",
             smbd_path());
    if (access("/usr/bin/smbpasswd", X_OK) != 0)
        SKIP("no /usr/bin/smbpasswd (apt-get install samba-common-bin)");
    if (!getpwnam(SAMBA_USER)) {
        if (geteuid() != 0)
            SKIP("no system user %s for Samba, and not root to create it", SAMBA_USER);
        const char *ua[] = {"/usr/sbin/useradd", "-M", "-s", "/usr/sbin/nologin", SAMBA_USER, NULL};
        int rc = run(ua, NULL);
        if (rc != 0 && !getpwnam(SAMBA_USER))
            SKIP("useradd %s failed (%d)", SAMBA_USER, rc);
    }
    if (geteuid() != 0)
        SKIP("smbd needs root here (it switches to the user of each session)");
    snprintf(s->dir, sizeof(s->dir), "/tmp/softndk-smb-XXXXXX");
    CHECK(mkdtemp(s->dir) != NULL);
    const char *subs[] = {"private", "lock", "pid", "state", "cache", "ncalrpc", "share"};
    char path[400];
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
        snprintf(path, sizeof(path), "%s/%s", s->dir, subs[i]);
        CHECK(mkdir(path, 0755) == 0);
    }
    snprintf(s->share, sizeof(s->share), "%s/share", s->dir);
    CHECK(chmod(s->share, 0777) == 0);
    CHECK(chmod(s->dir, 0755) == 0);
    s->port = free_port();
    char conf[400];
    snprintf(conf, sizeof(conf), "%s/smb.conf", s->dir);
    FILE *f = fopen(conf, "w");
    CHECK(f != NULL);
    fprintf(f,
            "[global]\n"
            "  server role = standalone server\n"
            "  smb ports = %u\n"
            "  interfaces = lo\n"
            "  bind interfaces only = yes\n"
            "  disable netbios = yes\n"
            "  private dir = %s/private\n"
            "  lock directory = %s/lock\n"
            "  pid directory = %s/pid\n"
            "  state directory = %s/state\n"
            "  cache directory = %s/cache\n"
            "  ncalrpc dir = %s/ncalrpc\n"
            "  passdb backend = tdbsam:%s/private/passdb.tdb\n"
            "  log file = %s/smbd.log\n"
            "  log level = 1\n"
            "  map to guest = never\n"
            "  server signing = %s\n"
            "  server min protocol = SMB3_02\n"
            "  load printers = no\n"
            "  printing = bsd\n"
            "  printcap name = /dev/null\n"
            "  disable spoolss = yes\n"
            "  usershare path =\n"
            "[" SAMBA_SHARE "]\n"
            "  path = %s\n"
            "  read only = no\n",
            s->port, s->dir, s->dir, s->dir, s->dir, s->dir, s->dir, s->dir, s->dir, signing,
            s->share);
    CHECK(fclose(f) == 0);
    const char *pa[] = {"/usr/bin/smbpasswd", "-c", conf, "-a", "-s", SAMBA_USER, NULL};
    int rc = run(pa, SAMBA_PASSWORD "\n" SAMBA_PASSWORD "\n");
    CHECK_MSG(rc == 0, "smbpasswd -a %s: exit %d", SAMBA_USER, rc);
    s->pid = fork();
    CHECK(s->pid >= 0);
    if (s->pid == 0) {
        /* its own process group: smbd signals its whole group when it ends */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        execl(smbd_path(), "smbd", "--foreground", "--no-process-group", "-s", conf, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 200; i++) { /* 20 s */
        if (port_open(s->port))
            return;
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = 0;
            CHECK_MSG(0, "smbd exited (status 0x%x) before listening; see %s/smbd.log", st, s->dir);
        }
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    CHECK_MSG(0, "smbd did not listen on port %u within 20 s; see %s/smbd.log", s->port, s->dir);
}

void samba_stop(struct samba *s)
{
    if (s->pid > 0) {
        kill(-s->pid, SIGTERM);
        int st;
        int done = 0;
        for (int i = 0; i < 100 && !done; i++) { /* 10 s, then SIGKILL */
            if (waitpid(s->pid, &st, WNOHANG) == s->pid)
                done = 1;
            else {
                struct timespec ts = {0, 100 * 1000 * 1000};
                nanosleep(&ts, NULL);
            }
        }
        if (!done) {
            kill(-s->pid, SIGKILL);
            waitpid(s->pid, &st, 0);
        }
        kill(-s->pid, SIGKILL); /* any child smbd left in its group */
        s->pid = 0;
    }
    if (s->dir[0]) {
        const char *ra[] = {"/bin/rm", "-rf", s->dir, NULL};
        run(ra, NULL);
    }
}
