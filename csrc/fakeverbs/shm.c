// shm.c: the shared memory objects that carry a fake device's QPs, CQs and
// MRs between processes. Each is named by the device and its number, and
// the number is the object's: creating it with O_EXCL is what hands the
// number out, so two processes can never take the same QP number or key.
#include "fv.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *kind_name[] = {[FV_QP] = "qp", [FV_CQ] = "cq", [FV_MR] = "mr", [FV_DEV] = "dev"};

void fv_obj_name_ns(char *buf, size_t len, const char *ns, enum fv_kind kind, uint32_t id) {
	snprintf(buf, len, "/fakeverbs-%s-%s-%08x", ns, kind_name[kind], id);
}

// A device's objects are named by its namespace (fv_dev_ns): fake0's
// "fake0", a named device's "g" and its GID's last three bytes.
void fv_obj_name(char *buf, size_t len, int dev, enum fv_kind kind, uint32_t id) {
	fv_obj_name_ns(buf, len, fv_dev_ns(dev), kind, id);
}

// Numbers a kind may take: QP numbers are 24 bits and 0 and 1 are special
// (the SMI and GSI QPs); keys and CQ numbers are 32 bits, never 0.
static uint32_t valid_id(enum fv_kind kind, uint32_t id) {
	if (kind == FV_QP) {
		id &= 0xffffff;
		return id < 2 ? id + 2 : id;
	}
	return id ? id : 1;
}

int fv_obj_create(int dev, enum fv_kind kind, uint32_t first, size_t size, uint32_t *id, void **map) {
	char name[96];
	uint32_t cand = valid_id(kind, first);
	// Bounded: a taken number moves on to the next; 4096 taken in a row
	// means the namespace is full of leftovers (fv_gc removes those of
	// dead processes).
	for (int tries = 0; tries < 4096; tries++, cand = valid_id(kind, cand + 1)) {
		fv_obj_name(name, sizeof(name), dev, kind, cand);
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd < 0) {
			if (errno == EEXIST)
				continue;
			return -1;
		}
		void *m = MAP_FAILED;
		if (ftruncate(fd, (off_t)size) != 0 || (m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
			int e = errno;
			close(fd);
			shm_unlink(name);
			errno = e;
			return -1;
		}
		// The owner's pid is the object's third word in every kind
		// (fv_gc reads it); it is written before anything can look.
		((int32_t *)m)[2] = getpid();
		*id = cand;
		*map = m;
		return fd;
	}
	errno = ENOSPC;
	return -1;
}

void *fv_obj_new(int dev, enum fv_kind kind, uint32_t first, size_t size, uint32_t *id) {
	void *map;
	int fd = fv_obj_create(dev, kind, first, size, id, &map);
	if (fd < 0)
		return NULL;
	close(fd);
	return map;
}

void *fv_obj_map(int dev, enum fv_kind kind, uint32_t id, size_t *len) {
	char name[96];
	fv_obj_name(name, sizeof(name), dev, kind, id);
	int fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return NULL;
	struct stat st;
	void *m = MAP_FAILED;
	if (fstat(fd, &st) == 0 && st.st_size >= 64)
		m = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (m == MAP_FAILED)
		return NULL;
	*len = (size_t)st.st_size;
	return m;
}

void fv_obj_unlink(int dev, enum fv_kind kind, uint32_t id) {
	char name[96];
	fv_obj_name(name, sizeof(name), dev, kind, id);
	shm_unlink(name);
}

// fv_gc removes the objects of this device whose owner has died (a process
// killed before it closed its QPs leaves them behind). An owner of 0 is an
// object being created this moment: left alone unless it is a minute old.
void fv_gc(int dev) {
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "fakeverbs-%s-", fv_dev_ns(dev));
	DIR *d = opendir("/dev/shm");
	if (!d)
		return;
	struct dirent *e;
	int seen = 0;
	while ((e = readdir(d)) && seen++ < 100000) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0)
			continue;
		char path[300];
		snprintf(path, sizeof(path), "/dev/shm/%s", e->d_name);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue;
		int32_t w[3] = {0, 0, 0};
		struct stat st;
		int ok = pread(fd, w, sizeof(w), 0) == (ssize_t)sizeof(w) && fstat(fd, &st) == 0;
		close(fd);
		if (!ok)
			continue;
		int dead = w[2] > 0 ? kill(w[2], 0) != 0 && errno == ESRCH : time(NULL) - st.st_mtime > 60;
		if (dead) {
			char name[300];
			snprintf(name, sizeof(name), "/%s", e->d_name);
			shm_unlink(name);
		}
	}
	closedir(d);
}
