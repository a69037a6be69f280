/* Minimal `inotifyd - FILE[:MASK]...` for images whose busybox lacks the applet.
 * One inotify instance per process; events are printed as busybox prints them with PROG "-":
 * "<mask letters>\t<file>[\t<name>]". Mask letters are busybox's; no mask means all events.
 * If inotify_init fails (for example at fs.inotify.max_user_instances), the errno text is printed and
 * the exit status is 1. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

static const char letters[] = "acew0rmyndDMuox";
static const unsigned masks[] = {
    IN_ACCESS, IN_MODIFY, IN_ATTRIB, IN_CLOSE_WRITE, IN_CLOSE_NOWRITE, IN_OPEN, IN_MOVED_FROM,
    IN_MOVED_TO, IN_CREATE, IN_DELETE, IN_DELETE_SELF, IN_MOVE_SELF, IN_UNMOUNT, IN_Q_OVERFLOW, IN_IGNORED,
};

int main(int argc, char **argv) {
    if (argc < 3 || strcmp(argv[1], "-") != 0) {
        fprintf(stderr, "usage: inotifyd - FILE[:MASK]...\n");
        return 2;
    }
    int fd = inotify_init();
    if (fd < 0) {
        fprintf(stderr, "inotifyd: inotify_init: %s\n", strerror(errno));
        return 1;
    }
    int nfiles = argc - 2;
    char **files = argv + 2;
    int *wds = calloc((size_t)nfiles, sizeof(int));
    for (int i = 0; i < nfiles; i++) {
        char *colon = strrchr(files[i], ':');
        unsigned mask = 0;
        if (colon) {
            *colon = '\0';
            for (const char *c = colon + 1; *c; c++) {
                const char *p = strchr(letters, *c);
                if (p) mask |= masks[p - letters];
            }
        }
        if (!mask) mask = IN_ALL_EVENTS;
        wds[i] = inotify_add_watch(fd, files[i], mask);
        if (wds[i] < 0) {
            fprintf(stderr, "inotifyd: add watch (%s): %s\n", files[i], strerror(errno));
            return 1;
        }
    }
    char buf[sizeof(struct inotify_event) + NAME_MAX + 1] __attribute__((aligned(8)));
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return n < 0;
        }
        for (char *p = buf; p < buf + n;) {
            struct inotify_event *ev = (struct inotify_event *)p;
            char ml[sizeof letters] = {0};
            int k = 0;
            for (size_t j = 0; j < sizeof masks / sizeof masks[0]; j++)
                if (ev->mask & masks[j]) ml[k++] = letters[j];
            const char *file = "?";
            for (int i = 0; i < nfiles; i++)
                if (wds[i] == ev->wd) file = files[i];
            if (ev->len)
                printf("%s\t%s\t%s\n", ml, file, ev->name);
            else
                printf("%s\t%s\n", ml, file);
            fflush(stdout);
            p += sizeof(struct inotify_event) + ev->len;
        }
    }
}
