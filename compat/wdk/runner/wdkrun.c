/* softndk-wdkrun — load an NDK consumer driver built as a shared object and run it as Windows
 * would: DriverEntry, then DriverUnload, then a leak report (SoftNdkWdkRunDriver).
 *
 *   softndk-wdkrun [-n NAME] [-r REGISTRY_PATH] [-t SECONDS] [-q] [--report FILE]
 *                  [--special-pool[=TAGS|all]] DRIVER.so
 *
 * Exit status: 0 = loaded, unloaded, nothing leaked; 1 = DriverEntry failed, something leaked,
 * or a timeout; 2 = usage or load error; 3 to 12 = the driver crashed, by class
 * (SOFTNDK_WDK_EXIT_*, with a bugcheck report on stderr). The last line on stdout says PASS or
 * FAIL (not after a crash). */
#include "softndk_wdk.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* The loader names only the first undefined symbol. To name them all at once, as a link with
 * --no-undefined would: read the module's dynamic symbol table and look up every undefined,
 * non-weak symbol in the module's dependencies (a lazy load brings them in when it can) and in
 * the runner itself (libsoftndk-wdk, libsoftndk, libc). Returns how many it listed. */
static unsigned list_undefined(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct stat st;
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < sizeof(Elf64_Ehdr)) {
        close(fd);
        return 0;
    }
    size_t size = (size_t)st.st_size;
    const unsigned char *img = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED)
        return 0;
    unsigned listed = 0;
    Elf64_Ehdr eh;
    memcpy(&eh, img, sizeof eh);
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff > size ||
        (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
        goto out;
    void *lazy = dlopen(path, RTLD_LAZY | RTLD_LOCAL); /* NULL if a data symbol is missing */
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh;
        memcpy(&sh, img + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_DYNSYM || sh.sh_link >= eh.e_shnum || sh.sh_offset > size ||
            sh.sh_size > size - sh.sh_offset)
            continue;
        Elf64_Shdr str;
        memcpy(&str, img + eh.e_shoff + sh.sh_link * sizeof str, sizeof str);
        if (str.sh_offset > size || str.sh_size > size - str.sh_offset)
            continue;
        const char *names = (const char *)img + str.sh_offset;
        for (size_t k = 1; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
            Elf64_Sym sym;
            memcpy(&sym, img + sh.sh_offset + k * sizeof sym, sizeof sym);
            if (sym.st_shndx != SHN_UNDEF || ELF64_ST_BIND(sym.st_info) != STB_GLOBAL ||
                sym.st_name >= str.sh_size)
                continue;
            const char *name = names + sym.st_name;
            if (!*name || memchr(name, 0, str.sh_size - sym.st_name) == NULL)
                continue;
            if ((lazy && dlsym(lazy, name)) || dlsym(RTLD_DEFAULT, name))
                continue;
            fprintf(stderr, "wdkrun: undefined symbol: %s\n", name);
            listed++;
        }
    }
    if (lazy)
        dlclose(lazy);
out:
    munmap((void *)img, size);
    return listed;
}

static void usage(void)
{
    fprintf(stderr, "usage: softndk-wdkrun [-n NAME] [-r REGISTRY_PATH] [-t SECONDS] [-q] "
                    "[--report FILE] [--special-pool[=TAGS|all]] DRIVER.so\n"
                    "  -n NAME           driver name (default: the file name, without lib and .so)\n"
                    "  -r REGISTRY_PATH  the RegistryPath passed to DriverEntry\n"
                    "  -t SECONDS        fail if DriverEntry or DriverUnload hangs this long\n"
                    "  -q                report problems only\n"
                    "  --report FILE     a fatal signal's bugcheck report also to FILE (text) "
                    "and FILE.json\n"
                    "  --special-pool[=TAGS|all]  special pool for these pool tags (Rdma,Tag2; "
                    "default all)\n");
}

int main(int argc, char **argv)
{
    SOFTNDK_WDK_RUN run = {sizeof run, NULL, NULL, 0, FALSE};
    static const struct option longopts[] = {
        {"report", required_argument, NULL, 'R'},
        {"special-pool", optional_argument, NULL, 'S'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *report = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "n:r:t:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': run.DriverName = optarg; break;
        case 'r': run.RegistryPath = optarg; break;
        case 't': run.TimeoutSeconds = (ULONG)strtoul(optarg, NULL, 10); break;
        case 'q': run.Quiet = TRUE; break;
        case 'R': report = optarg; break;
        case 'S':
            if (SoftNdkWdkSetSpecialPool(optarg ? optarg : "all") != STATUS_SUCCESS) {
                fprintf(stderr, "wdkrun: --special-pool=%s: tags of 1 to 4 characters, "
                                "comma-separated, or all\n", optarg);
                return 2;
            }
            break;
        default: usage(); return c == 'h' ? 0 : 2;
        }
    }
    SoftNdkWdkInstallCrashReport(report);
    if (optind != argc - 1) {
        usage();
        return 2;
    }
    const char *path = argv[optind];
    char name[256];
    if (!run.DriverName) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (strncmp(base, "lib", 3) == 0)
            base += 3;
        snprintf(name, sizeof name, "%s", base);
        char *dot = strchr(name, '.');
        if (dot)
            *dot = 0;
        run.DriverName = name;
    }
    /* RTLD_NOW: an unresolved kernel routine fails the load, as an import would on Windows. */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *err = dlerror();
        fprintf(stderr, "wdkrun: cannot load %s: %s\n", path, err);
        if (err && strstr(err, "undefined symbol")) {
            unsigned n = list_undefined(path);
            if (n)
                fprintf(stderr,
                        "wdkrun: %u undefined symbol(s) in %s: the harness does not "
                        "provide them (docs/wdk.md, \"What is not provided\")\n",
                        n, path);
        }
        printf("FAIL %s: not loadable\n", run.DriverName);
        return 2;
    }
    PDRIVER_INITIALIZE entry;
    /* POSIX: a function pointer travels through void * from dlsym. */
    *(void **)&entry = dlsym(h, "DriverEntry");
    if (!entry) {
        fprintf(stderr, "wdkrun: %s exports no DriverEntry\n", path);
        printf("FAIL %s: no DriverEntry\n", run.DriverName);
        return 2;
    }
    int rc = SoftNdkWdkRunDriver(entry, &run);
    /* Unmap only a driver that left nothing behind that could still call into it. */
    if (rc == 0)
        dlclose(h);
    printf("%s %s\n", rc == 0 ? "PASS" : "FAIL", run.DriverName);
    fflush(stdout);
    return rc;
}
