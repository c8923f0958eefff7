// mem.c: memory registration. An MR is an object named by its key: a
// header page (range, access, state) and, when it brought new pages, the
// pages themselves. Registering moves the registered pages onto that object
// (copied, then put in place with mremap at the same addresses), so a peer
// process maps the same pages and its RDMA WRITE lands in them. The pages
// stay shared after deregistration (the program keeps its memory); the
// header says the key is dead, so a peer still holding it gets a remote
// access error, as from a NIC.
#include "fv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

// A span: pages this process moved onto an object. A later registration
// inside a span reuses it (its pages are that object's already); one that
// overlaps a span only in part cannot be shared (it would need the same
// pages in two objects) and stays local to this process.
struct fv_span {
	int dev;
	uint64_t base, len;
	uint32_t key; // the object holding the pages (the first MR's)
	int refs;
	struct fv_span *next;
};

static pthread_mutex_t span_mu = PTHREAD_MUTEX_INITIALIZER;
static struct fv_span *spans;

static pthread_mutex_t mref_mu = PTHREAD_MUTEX_INITIALIZER;
#define MREF_BUCKETS 256
static struct fv_mref *mrefs[MREF_BUCKETS];
static int nmrefs;

// shareable says whether [lo, hi) is plain private anonymous read-write
// memory (malloc's heap, an anonymous mmap): what can be moved onto a
// shared object without changing what the program sees. Files, SysV and
// hugetlb memory, the stack and read-only memory are left where they are.
static int shareable(uint64_t lo, uint64_t hi) {
	FILE *f = fopen("/proc/self/maps", "re");
	if (!f)
		return 0;
	char line[512];
	uint64_t covered = lo;
	int ok = 1;
	while (ok && covered < hi && fgets(line, sizeof(line), f)) {
		unsigned long s, e, off, inode;
		char perms[8], devs[16], path[256] = "";
		if (sscanf(line, "%lx-%lx %7s %lx %15s %lu %255s", &s, &e, perms, &off, devs, &inode, path) < 6)
			continue;
		if (e <= covered || s >= hi)
			continue;
		if (s > covered) // a hole
			ok = 0;
		else if (perms[0] != 'r' || perms[1] != 'w' || perms[3] != 'p' || inode != 0 || (path[0] && strcmp(path, "[heap]") != 0))
			ok = 0;
		else
			covered = e;
	}
	fclose(f);
	return ok && covered >= hi;
}

static void *map_range(int dev, uint32_t key, uint64_t off, size_t len) {
	char name[96];
	fv_obj_name(name, sizeof(name), dev, FV_MR, key);
	int fd = shm_open(name, O_RDWR, 0);
	if (fd < 0)
		return NULL;
	void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
	close(fd);
	return m == MAP_FAILED ? NULL : m;
}

static void mref_insert(struct fv_mref *r) {
	struct fv_mref **b = &mrefs[r->key % MREF_BUCKETS];
	r->next = *b;
	*b = r;
	nmrefs++;
}

static void mref_free(struct fv_mref **at) {
	struct fv_mref *r = *at;
	*at = r->next;
	nmrefs--;
	if (r->data_map)
		munmap(r->data_map, r->data_len);
	munmap(r->hdr, FV_HDR_SIZE);
	free(r);
}

// sweep frees the handles nobody holds whose MR has died. Called with
// mref_mu held, on the slow path only (a lookup that missed).
static void sweep(void) {
	for (int i = 0; i < MREF_BUCKETS; i++)
		for (struct fv_mref **at = &mrefs[i]; *at;) {
			if ((*at)->refs == 0 && __atomic_load_n(&(*at)->hdr->state, __ATOMIC_ACQUIRE) != FV_MR_VALID)
				mref_free(at);
			else
				at = &(*at)->next;
		}
}

struct fv_mref *fv_mref_get(int dev, uint32_t key) {
	pthread_mutex_lock(&mref_mu);
	for (struct fv_mref *r = mrefs[key % MREF_BUCKETS]; r; r = r->next)
		if (r->key == key && r->dev == dev) {
			r->refs++;
			pthread_mutex_unlock(&mref_mu);
			return r;
		}
	sweep();
	struct fv_mref *r = NULL;
	if (nmrefs >= FV_MAX_MREFS) {
		fv_warn("more than %d memory regions in use by this process: key 0x%x not mapped", FV_MAX_MREFS, key);
		goto out;
	}
	// A peer's MR: its header, then its pages where they are shared.
	struct fv_mr_hdr *h = map_range(dev, key, 0, FV_HDR_SIZE);
	if (!h)
		goto out;
	if (h->magic != FV_MAGIC_MR || h->key != key || __atomic_load_n(&h->state, __ATOMIC_ACQUIRE) != FV_MR_VALID || h->pid == getpid()) {
		munmap(h, FV_HDR_SIZE);
		goto out;
	}
	r = calloc(1, sizeof(*r));
	if (!r) {
		munmap(h, FV_HDR_SIZE);
		goto out;
	}
	r->dev = dev;
	r->key = key;
	r->hdr = h;
	r->refs = 1;
	if (h->shared && h->plen) {
		r->data_map = map_range(dev, h->data_key, h->data_off, h->plen);
		r->data_len = h->plen;
		r->base = r->data_map;
	}
	mref_insert(r);
out:
	pthread_mutex_unlock(&mref_mu);
	return r;
}

void fv_mref_put(struct fv_mref *r) {
	if (!r)
		return;
	pthread_mutex_lock(&mref_mu);
	if (--r->refs == 0 && (r->own || __atomic_load_n(&r->hdr->state, __ATOMIC_ACQUIRE) != FV_MR_VALID)) {
		for (struct fv_mref **at = &mrefs[r->key % MREF_BUCKETS]; *at; at = &(*at)->next)
			if (*at == r) {
				mref_free(at);
				break;
			}
	}
	pthread_mutex_unlock(&mref_mu);
}

static uint32_t key_seed(void) {
	static uint32_t n;
	uint32_t x = (uint32_t)getpid() * 2654435761u ^ (uint32_t)fv_now_ns() ^ (__atomic_fetch_add(&n, 1, __ATOMIC_RELAXED) << 20);
	return x;
}

// share puts the pages [pbase, pbase+plen) of this process onto the MR's
// object at FV_HDR_SIZE: the pages are copied into the object, then the
// object's mapping is moved over them (mremap replaces the old pages in one
// step). A thread writing those pages during the copy would lose its write:
// registration is set-up, not the data path.
static int share(int fd, uint64_t pbase, uint64_t plen) {
	void *tmp = mmap(NULL, plen, PROT_READ | PROT_WRITE, MAP_SHARED, fd, FV_HDR_SIZE);
	if (tmp == MAP_FAILED)
		return -1;
	memcpy(tmp, (void *)(uintptr_t)pbase, plen);
	if (mremap(tmp, plen, plen, MREMAP_MAYMOVE | MREMAP_FIXED, (void *)(uintptr_t)pbase) == MAP_FAILED) {
		munmap(tmp, plen);
		return -1;
	}
	return 0;
}

static struct ibv_mr *reg(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned access) {
	fv_init();
	struct fv_context *fc = (struct fv_context *)verbs_get_ctx(pd->context);
	int dev = fc->dev->index;
	// The IB rule: remote write and atomic access need local write.
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
		errno = EINVAL;
		return NULL;
	}
	if (iova != (uintptr_t)addr) { // keys address the program's own pointers here
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!addr && length) {
		errno = EINVAL;
		return NULL;
	}
	uint64_t a = (uintptr_t)addr, pg = (uint64_t)fv_page;
	uint64_t pbase = a & ~(pg - 1), pend = (a + length + pg - 1) & ~(pg - 1), plen = length ? pend - pbase : 0;
	struct fv_mr *m = calloc(1, sizeof(*m));
	struct fv_mref *r = calloc(1, sizeof(*r));
	if (!m || !r) {
		free(m);
		free(r);
		errno = ENOMEM;
		return NULL;
	}
	pthread_mutex_lock(&span_mu);
	// Where the pages are: in a span already, to be moved onto this MR's
	// object (a new span), or left alone (not shared).
	struct fv_span *in = NULL;
	int overlap = 0;
	for (struct fv_span *s = spans; s && plen; s = s->next) {
		if (s->dev != dev || pend <= s->base || pbase >= s->base + s->len)
			continue;
		if (pbase >= s->base && pend <= s->base + s->len)
			in = s;
		else
			overlap = 1;
	}
	const char *env = getenv("FAKEVERBS_SHARE");
	int new_span = plen && !in && !overlap && !(env && strcmp(env, "0") == 0) && shareable(pbase, pend);
	uint32_t key;
	void *map;
	size_t made = FV_HDR_SIZE + (new_span ? plen : 0);
	int fd = fv_obj_create(dev, FV_MR, key_seed(), made, &key, &map);
	if (fd < 0) {
		int e = errno;
		pthread_mutex_unlock(&span_mu);
		free(m);
		free(r);
		errno = e;
		return NULL;
	}
	if (new_span && share(fd, pbase, plen) != 0) {
		fv_warn("cannot move %zu bytes at %p onto shared memory (%s): the MR stays local to this process", length, addr, strerror(errno));
		new_span = 0;
	}
	close(fd);
	// The header page stays mapped; the data pages are at pbase now (or,
	// when they could not be moved, unused).
	if (made > FV_HDR_SIZE)
		munmap((uint8_t *)map + FV_HDR_SIZE, plen);
	struct fv_mr_hdr *h = map;
	h->magic = FV_MAGIC_MR;
	h->key = key;
	h->access = access;
	h->pd = ((struct fv_pd *)pd)->num;
	h->addr = a;
	h->len = length;
	h->pbase = pbase;
	h->plen = plen;
	if (new_span) {
		struct fv_span *s = calloc(1, sizeof(*s));
		if (s) {
			*s = (struct fv_span){.dev = dev, .base = pbase, .len = plen, .key = key, .refs = 1, .next = spans};
			spans = s;
			m->span = s;
		}
		h->shared = 1;
		h->data_key = key;
		h->data_off = FV_HDR_SIZE;
	} else if (in) {
		in->refs++;
		m->span = in;
		h->shared = 1;
		h->data_key = in->key;
		h->data_off = FV_HDR_SIZE + (pbase - in->base);
	}
	pthread_mutex_unlock(&span_mu);
	__atomic_store_n(&h->state, FV_MR_VALID, __ATOMIC_RELEASE);

	r->dev = dev;
	r->key = key;
	r->own = 1;
	r->hdr = h;
	r->base = (uint8_t *)(uintptr_t)pbase; // this process's own addresses
	r->refs = 1;
	pthread_mutex_lock(&mref_mu);
	mref_insert(r);
	pthread_mutex_unlock(&mref_mu);
	m->ref = r;
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = length;
	m->mr.handle = key;
	m->mr.lkey = key;
	m->mr.rkey = key;
	return &m->mr;
}

FV_EXPORT struct ibv_mr *(ibv_reg_mr)(struct ibv_pd *pd, void *addr, size_t length, int access) {
	return reg(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

FV_EXPORT struct ibv_mr *(ibv_reg_mr_iova)(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, int access) {
	return reg(pd, addr, length, iova, (unsigned)access);
}

FV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova, unsigned int access) {
	// The optional flags (relaxed ordering) mean nothing here.
	return reg(pd, addr, length, iova, access & ~(unsigned)IBV_ACCESS_OPTIONAL_RANGE);
}

FV_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length, uint64_t iova, int fd, int access) {
	(void)pd, (void)offset, (void)length, (void)iova, (void)fd, (void)access;
	errno = EOPNOTSUPP; // no device memory behind a fake NIC
	return NULL;
}

FV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr) {
	struct fv_mr *m = (struct fv_mr *)mr;
	struct fv_mref *r = m->ref;
	int dev = r->dev;
	uint32_t key = r->key;
	__atomic_store_n(&r->hdr->state, FV_MR_DEAD, __ATOMIC_RELEASE);
	pthread_mutex_lock(&span_mu);
	struct fv_span *s = m->span;
	int keep_name = 0; // this MR's object still carries a live span's pages
	if (s) {
		if (--s->refs == 0) {
			for (struct fv_span **at = &spans; *at; at = &(*at)->next)
				if (*at == s) {
					*at = s->next;
					break;
				}
			if (s->key != key)
				fv_obj_unlink(dev, FV_MR, s->key);
			free(s);
		} else if (s->key == key) {
			keep_name = 1;
		}
	}
	pthread_mutex_unlock(&span_mu);
	if (!keep_name)
		fv_obj_unlink(dev, FV_MR, key);
	fv_mref_put(r);
	free(m);
	return 0;
}

FV_EXPORT int ibv_rereg_mr(struct ibv_mr *mr, int flags, struct ibv_pd *pd, void *addr, size_t length, int access) {
	(void)mr, (void)flags, (void)pd, (void)addr, (void)length, (void)access;
	errno = EOPNOTSUPP;
	return IBV_REREG_MR_ERR_INPUT;
}
