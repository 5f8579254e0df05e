/* SPDX-License-Identifier: MIT */
/* pkg-config: aioloop-vhost
 * An installed aioloop-vhost: a vhost-user-blk device listening on a
 * socket, a frontend connecting, the device seeing it. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <aioloop/aioloop.h>
#include <aioloop/vhost-blk.h>

int main(void)
{
    aiol_vhost_blk_opts o = { .num_queues = 2 };
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    aiol_vhost_blk *blk;
    aiol_loop *loop;
    int img = memfd_create("img", 0), c;
    char dir[] = "/tmp/use-vhost-XXXXXX";

    if (img < 0 || ftruncate(img, 1 << 20) < 0 || mkdtemp(dir) == NULL ||
        aiol_loop_new(&loop, NULL) < 0 ||
        aiol_vhost_blk_new(loop, img, &o, &blk) < 0) {
        return 1;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/sock", dir);
    if (aiol_vhost_dev_listen(aiol_vhost_blk_dev_get(blk), sa.sun_path) < 0 ||
        (c = socket(AF_UNIX, SOCK_STREAM, 0)) < 0 ||
        connect(c, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        return 1;
    }
    for (int i = 0; i < 100 && !aiol_vhost_dev_is_connected(aiol_vhost_blk_dev_get(blk));
         i++) {
        aiol_loop_poll(loop, false);
        usleep(1000);
    }
    if (!aiol_vhost_dev_is_connected(aiol_vhost_blk_dev_get(blk))) {
        return 1;
    }
    close(c);
    aiol_vhost_blk_free(blk);
    aiol_loop_free(loop);
    rmdir(dir);
    printf("aioloop-vhost: ok\n");
    return 0;
}
