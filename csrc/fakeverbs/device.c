// device.c: the fake devices (fake0, ...), their contexts, ports, GIDs and
// PDs, and libibverbs's helpers (strings, rates) that programs call.
#include "fv.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

struct fv_device fv_devices[FV_MAX_DEVICES];
int fv_ndevices;
struct fv_slot fv_slots[FV_MAX_LOCAL_QPS];
struct fv_qp *fv_qps[FV_MAX_LOCAL_QPS];
pthread_mutex_t fv_qps_mu = PTHREAD_MUTEX_INITIALIZER;
long fv_page = 4096;
int fv_stats;
int fv_paced;
int fv_yield;
static const char *stats_path;

void fv_warn(const char *fmt, ...) {
	char line[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "fakeverbs: %s\n", line);
}

uint64_t fv_now_ns(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

// fnv24 is a 24-bit FNV-1a hash: a named device's GID.
static uint32_t fnv24(const char *a, const char *b) {
	uint32_t h = 2166136261u;
	for (const char *p = a; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	h = (h ^ '/') * 16777619u;
	for (const char *p = b; *p; p++)
		h = (h ^ (uint8_t)*p) * 16777619u;
	return (h >> 24 ^ h) & 0xffffff;
}

static int fabric_bad;

// FAKEVERBS_DEVICES=N (1..4, default 1) makes fake0..fake{N-1}: two let a
// loopback run put its sides on different devices.
//
// A fabric on one host: FAKEVERBS_NAME=mlx5_0[,mlx5_1,...] (up to 4)
// names the devices instead (their number is the list's), and
// FAKEVERBS_HOST=node7 (default "localhost") the host they are on. With
// either set a device is "host/name": its GID ::ffff:127.a.b.c, a.b.c a
// 24-bit hash of "host/name" (never 127.0.0.x, fake0's), a different one
// for each device of a mesh of processes; a clash of two names on one GID
// is found when the second opens its device (EADDRINUSE). The address a
// program connects to over TCP stays its own (127.0.0.1): only the GID
// differs.
static void init_once(void) {
	fv_page = sysconf(_SC_PAGESIZE);
	stats_path = getenv("FAKEVERBS_STATS");
	fv_stats = stats_path && *stats_path;
	const char *y = getenv("FAKEVERBS_YIELD");
	fv_yield = y && strcmp(y, "1") == 0;
	int n = 1;
	const char *s = getenv("FAKEVERBS_DEVICES");
	if (s && *s) {
		n = atoi(s);
		if (n < 1 || n > FV_MAX_DEVICES) {
			fv_warn("FAKEVERBS_DEVICES=%s: want 1 to %d; using 1", s, FV_MAX_DEVICES);
			n = 1;
		}
	}
	const char *host = getenv("FAKEVERBS_HOST"), *names = getenv("FAKEVERBS_NAME");
	int named = (host && *host) || (names && *names);
	if (!host || !*host)
		host = "localhost";
	char namev[FV_MAX_DEVICES][48];
	if (names && *names) {
		n = 0;
		for (const char *p = names; *p && n < FV_MAX_DEVICES;) {
			size_t k = strcspn(p, ",");
			if (k) {
				snprintf(namev[n], sizeof(namev[n]), "%.*s", (int)(k < 47 ? k : 47), p);
				n++;
			}
			p += k;
			if (*p == ',')
				p++;
		}
		if (!n) {
			snprintf(namev[0], sizeof(namev[0]), "fake0");
			n = 1;
		}
	} else {
		for (int i = 0; i < n; i++)
			snprintf(namev[i], sizeof(namev[i]), "fake%d", i);
	}
	for (int i = 0; i < n; i++) {
		struct fv_device *d = &fv_devices[i];
		d->index = i;
		d->dev.node_type = IBV_NODE_CA;
		d->dev.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->dev.name, sizeof(d->dev.name), "%.47s", namev[i]);
		snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs-%.47s", namev[i]);
		// Paths that do not exist: a program that reads sysfs finds
		// nothing there, as for a device it cannot inspect.
		snprintf(d->dev.dev_path, sizeof(d->dev.dev_path), "/sys/class/infiniband_verbs/uverbs-%.47s", namev[i]);
		snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%.47s", namev[i]);
		snprintf(d->host, sizeof(d->host), "%s", host);
		d->named = named;
		memset(&d->gid, 0, sizeof(d->gid));
		d->gid.raw[10] = d->gid.raw[11] = 0xff;
		d->gid.raw[12] = 127;
		uint32_t h = (uint32_t)(i + 1);
		if (named) {
			h = fnv24(host, namev[i]);
			if (h < 0x100)
				h |= 0x10000; // not 127.0.0.x
			snprintf(d->ns, sizeof(d->ns), "g%06x", h);
		} else {
			snprintf(d->ns, sizeof(d->ns), "fake%d", i);
		}
		d->gid.raw[13] = (uint8_t)(h >> 16);
		d->gid.raw[14] = (uint8_t)(h >> 8);
		d->gid.raw[15] = (uint8_t)h;
		d->guid = htobe64(0xfa4e000000000000ull | (uint64_t)h << 8 | (uint64_t)(i + 1));
	}
	fv_ndevices = n;
	fabric_bad = fv_fabric_load() != 0;
}

void fv_init(void) {
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	pthread_once(&once, init_once);
}

// The meter (FAKEVERBS_STATS=FILE; struct fv_meter in fv.h): each window
// of FV_METER_EVERY messages a QP posted or a CQ gave, timed, as the device
// sees it: a figure a benchmark's own clock cannot give on a loaded host,
// where its wall time includes the time other processes ran. A sample is
// one clock read (vDSO, no system call) a window: nothing per message.

void fv_meter_sample(struct fv_meter *m) {
	uint64_t wall = fv_now_ns();
	if (!m->next) {
		m->n0 = m->n;
		m->wall0 = wall;
		m->win = calloc(FV_METER_WINDOWS, sizeof(*m->win));
	} else if (m->win && m->nwin < FV_METER_WINDOWS) {
		double per = (double)(wall - m->walll) * 100 / (double)(m->n - m->nl);
		m->win[m->nwin++] = per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
	}
	m->nl = m->n;
	m->walll = wall;
	m->next = m->n + FV_METER_EVERY;
}

static int cmp_u32(const void *a, const void *b) {
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
	return x < y ? -1 : x > y;
}

// pct is the p-th percentile (nearest rank) of n sorted windows, in ns.
static double pct(const uint32_t *v, uint32_t n, double p) {
	uint32_t i = (uint32_t)(p / 100 * (n - 1) + 0.5);
	return v[i < n ? i : n - 1] / 100.0;
}

void fv_meter_report(struct fv_meter *m, const char *kind, uint32_t id) {
	// Fewer messages than a window (a run the host hardly let run): the
	// messages since the first sample make the one window, to now.
	if (fv_stats && m->win && !m->nwin && m->n > m->nl) {
		uint64_t wall = fv_now_ns();
		double per = (double)(wall - m->walll) * 100 / (double)(m->n - m->nl);
		m->win[m->nwin++] = per > UINT32_MAX ? UINT32_MAX : (uint32_t)per;
		m->nl = m->n;
		m->walll = wall;
	}
	int fd = -1;
	if (fv_stats && m->win && m->nwin)
		fd = open(stats_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd >= 0) {
		qsort(m->win, m->nwin, sizeof(*m->win), cmp_u32);
		char line[512];
		int len = snprintf(line, sizeof(line), "fakeverbs-stats pid=%d kind=%s id=%u msgs=%llu wall_ns=%llu windows=%u p10=%.2f p50=%.2f p90=%.2f\n",
		                   (int)getpid(), kind, id, (unsigned long long)(m->nl - m->n0), (unsigned long long)(m->walll - m->wall0), m->nwin,
		                   pct(m->win, m->nwin, 10), pct(m->win, m->nwin, 50), pct(m->win, m->nwin, 90));
		if (write(fd, line, (size_t)len) < 0) { // one line, O_APPEND: whole or not at all
		}
		close(fd);
	}
	free(m->win);
	m->win = NULL;
}

// Peers' devices, known by their GIDs (fv_device_by_gid adds them).
static struct fv_peer fv_peers[FV_MAX_PEERS];
static int fv_npeers;
static pthread_mutex_t fv_peers_mu = PTHREAD_MUTEX_INITIALIZER;

const char *fv_dev_ns(int dev) { return dev < FV_MAX_DEVICES ? fv_devices[dev].ns : fv_peers[dev - FV_MAX_DEVICES].ns; }

const union ibv_gid *fv_dev_gid(int dev) { return dev < FV_MAX_DEVICES ? &fv_devices[dev].gid : &fv_peers[dev - FV_MAX_DEVICES].gid; }

void fv_dev_ident(int dev, const char **host, const char **name) {
	if (dev < FV_MAX_DEVICES) {
		*host = fv_devices[dev].host;
		*name = fv_devices[dev].dev.name;
	} else {
		*host = fv_peers[dev - FV_MAX_DEVICES].host;
		*name = fv_peers[dev - FV_MAX_DEVICES].name;
	}
}

// read_registry reads the registry object of namespace ns (-1: none, or
// not written yet).
static int read_registry(const char *ns, struct fv_dev_shm *out) {
	char name[96];
	fv_obj_name_ns(name, sizeof(name), ns, FV_DEV, 0);
	int fd = shm_open(name, O_RDONLY, 0);
	if (fd < 0)
		return -1;
	ssize_t n = pread(fd, out, sizeof(*out), 0);
	close(fd);
	if (n != (ssize_t)sizeof(*out) || __atomic_load_n(&out->magic, __ATOMIC_ACQUIRE) != FV_MAGIC_DEV)
		return -1;
	out->host[sizeof(out->host) - 1] = out->name[sizeof(out->name) - 1] = 0;
	return 0;
}

// fv_device_by_gid is the dev number of the device whose GID is gid: this
// process's, or another's (fake0..fake3 by their fixed GIDs; a named one
// while its process has it open, from its registry object); -1: none.
int fv_device_by_gid(const union ibv_gid *gid) {
	for (int i = 0; i < fv_ndevices; i++)
		if (memcmp(gid->raw, fv_devices[i].gid.raw, 16) == 0)
			return i;
	static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	const uint8_t *g = gid->raw;
	if (memcmp(g, v4, 12) != 0 || g[12] != 127)
		return -1;
	int found = -1;
	pthread_mutex_lock(&fv_peers_mu);
	for (int j = 0; j < fv_npeers; j++)
		if (memcmp(g, fv_peers[j].gid.raw, 16) == 0) {
			found = FV_MAX_DEVICES + j;
			break;
		}
	if (found < 0 && fv_npeers < FV_MAX_PEERS) {
		struct fv_peer *p = &fv_peers[fv_npeers];
		memset(p, 0, sizeof(*p));
		p->gid = *gid;
		uint32_t h = (uint32_t)g[13] << 16 | (uint32_t)g[14] << 8 | g[15];
		int ok = 0;
		if (h >= 1 && h <= FV_MAX_DEVICES) { // another process's fakeN
			snprintf(p->ns, sizeof(p->ns), "fake%u", h - 1);
			snprintf(p->name, sizeof(p->name), "fake%u", h - 1);
			snprintf(p->host, sizeof(p->host), "%s", fv_ndevices ? fv_devices[0].host : "localhost");
			ok = 1;
		} else if (h >= 0x100) {
			struct fv_dev_shm r;
			snprintf(p->ns, sizeof(p->ns), "g%06x", h);
			if (read_registry(p->ns, &r) == 0) {
				snprintf(p->host, sizeof(p->host), "%s", r.host);
				snprintf(p->name, sizeof(p->name), "%s", r.name);
				ok = 1;
			}
		}
		if (ok)
			found = FV_MAX_DEVICES + fv_npeers++;
	} else if (found < 0) {
		fv_warn("more than %d peers' devices: GID ...:%u.%u.%u.%u not taken", FV_MAX_PEERS, g[12], g[13], g[14], g[15]);
	}
	pthread_mutex_unlock(&fv_peers_mu);
	return found;
}

// dev_register makes a named device's registry object, which tells peers
// its host and name (its GID is only a hash of them), or finds one of the
// same device (another process of the same name, or a dead one's, taken
// over). A different device on the same GID fails: EADDRINUSE.
static int dev_register(struct fv_device *d) {
	char name[96];
	fv_obj_name_ns(name, sizeof(name), d->ns, FV_DEV, 0);
	for (int tries = 0; tries < 100; tries++) {
		int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
		if (fd >= 0) {
			struct fv_dev_shm r;
			memset(&r, 0, sizeof(r));
			r.pid = getpid();
			snprintf(r.host, sizeof(r.host), "%s", d->host);
			snprintf(r.name, sizeof(r.name), "%s", d->dev.name);
			r.magic = FV_MAGIC_DEV;
			int ok = pwrite(fd, &r, sizeof(r), 0) == (ssize_t)sizeof(r);
			close(fd);
			if (!ok) {
				shm_unlink(name);
				return errno ? errno : EIO;
			}
			d->owner = 1;
			return 0;
		}
		if (errno != EEXIST)
			return errno;
		struct fv_dev_shm r;
		if (read_registry(d->ns, &r) != 0) { // being written: a moment
			struct timespec ts = {0, 1000000};
			nanosleep(&ts, NULL);
			continue;
		}
		if (strcmp(r.host, d->host) != 0 || strcmp(r.name, d->dev.name) != 0) {
			if (r.pid > 0 && kill(r.pid, 0) != 0 && errno == ESRCH) {
				shm_unlink(name); // a dead process's: take it
				continue;
			}
			fv_warn("device %s/%s has the GID of %s/%s (::ffff:127.%u.%u.%u, pid %d): choose another FAKEVERBS_NAME or FAKEVERBS_HOST",
			        d->host, d->dev.name, r.host, r.name, d->gid.raw[13], d->gid.raw[14], d->gid.raw[15], (int)r.pid);
			return EADDRINUSE;
		}
		return 0; // the same device, in another process too
	}
	return EAGAIN;
}

static void dev_unregister(struct fv_device *d) {
	if (!d->owner)
		return;
	char name[96];
	fv_obj_name_ns(name, sizeof(name), d->ns, FV_DEV, 0);
	struct fv_dev_shm r;
	if (read_registry(d->ns, &r) == 0 && r.pid == getpid())
		shm_unlink(name);
	d->owner = 0;
}

// A process that exits with a context open still takes its registry
// objects away (one killed leaves them to fv_gc).
__attribute__((destructor)) static void unregister_all(void) {
	for (int i = 0; i < fv_ndevices; i++)
		if (fv_devices[i].opens)
			dev_unregister(&fv_devices[i]);
}

static struct fv_device *dev_of(struct ibv_context *c) { return ((struct fv_context *)verbs_get_ctx(c))->dev; }

FV_EXPORT struct ibv_device **ibv_get_device_list(int *num) {
	fv_init();
	if (fabric_bad) { // FAKEVERBS_FABRIC's file is bad: said on stderr
		errno = EINVAL;
		return NULL;
	}
	struct ibv_device **l = calloc((size_t)fv_ndevices + 1, sizeof(*l));
	if (!l) {
		errno = ENOMEM;
		return NULL;
	}
	for (int i = 0; i < fv_ndevices; i++)
		l[i] = &fv_devices[i].dev;
	if (num)
		*num = fv_ndevices;
	return l;
}

FV_EXPORT void ibv_free_device_list(struct ibv_device **list) { free(list); }

FV_EXPORT const char *ibv_get_device_name(struct ibv_device *d) { return d->name; }

FV_EXPORT __be64 ibv_get_device_guid(struct ibv_device *d) { return ((struct fv_device *)d)->guid; }

FV_EXPORT int ibv_get_device_index(struct ibv_device *d) { return ((struct fv_device *)d)->index; }

static int query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len);
static int query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in, struct ibv_device_attr_ex *a, size_t len);
static struct ibv_cq_ex *create_cq_ex_op(struct ibv_context *c, struct ibv_cq_init_attr_ex *a);
struct ibv_cq_ex *fv_create_cq_ex(struct ibv_context *c, struct ibv_cq_init_attr_ex *a);

FV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device) {
	fv_init();
	struct fv_device *d = (struct fv_device *)device;
	if (d < fv_devices || d >= fv_devices + fv_ndevices) {
		errno = ENODEV;
		return NULL;
	}
	struct fv_context *fc = calloc(1, sizeof(*fc));
	if (!fc) {
		errno = ENOMEM;
		return NULL;
	}
	fv_gc(d->index);
	if (d->named) {
		pthread_mutex_lock(&fv_qps_mu);
		int rc = d->opens ? 0 : dev_register(d);
		if (!rc)
			d->opens++;
		pthread_mutex_unlock(&fv_qps_mu);
		if (rc) {
			free(fc);
			errno = rc;
			return NULL;
		}
	}
	fc->dev = d;
	struct verbs_context *v = &fc->vctx;
	struct ibv_context *c = &v->context;
	c->device = device;
	c->cmd_fd = -1;
	// No asynchronous event ever comes; ibv_get_async_event waits on an
	// eventfd that is never written, as on a quiet device.
	c->async_fd = eventfd(0, EFD_CLOEXEC);
	c->num_comp_vectors = 1;
	pthread_mutex_init(&c->mutex, NULL);
	c->abi_compat = __VERBS_ABI_IS_EXTENDED;
	v->sz = sizeof(*v);
	v->query_port = query_port_ex;
	v->query_device_ex = query_device_ex;
	v->create_qp_ex = fv_create_qp_ex;
	v->create_cq_ex = create_cq_ex_op;
	fv_qp_ops(&c->ops);
	return c;
}

static struct ibv_cq_ex *create_cq_ex_op(struct ibv_context *c, struct ibv_cq_init_attr_ex *a) { return fv_create_cq_ex(c, a); }

FV_EXPORT int ibv_close_device(struct ibv_context *c) {
	struct fv_context *fc = (struct fv_context *)verbs_get_ctx(c);
	struct fv_device *d = fc->dev;
	if (d->named) {
		pthread_mutex_lock(&fv_qps_mu);
		if (d->opens > 0 && --d->opens == 0)
			dev_unregister(d);
		pthread_mutex_unlock(&fv_qps_mu);
	}
	if (c->async_fd >= 0)
		close(c->async_fd);
	pthread_mutex_destroy(&c->mutex);
	free(fc);
	return 0;
}

static void fill_device_attr(struct fv_device *d, struct ibv_device_attr *a) {
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "fakeverbs 1.0");
	a->node_guid = d->guid;
	a->sys_image_guid = d->guid;
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = (uint64_t)fv_page;
	a->vendor_id = FV_VENDOR_ID;
	a->vendor_part_id = 1;
	a->hw_ver = 1;
	a->max_qp = FV_MAX_LOCAL_QPS;
	a->max_qp_wr = FV_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
	a->max_sge = FV_MAX_SGE;
	a->max_sge_rd = FV_MAX_SGE;
	a->max_cq = FV_MAX_LOCAL_QPS * 2;
	a->max_cqe = FV_MAX_CQE;
	a->max_mr = FV_MAX_MREFS;
	a->max_pd = 1 << 16;
	a->max_qp_rd_atom = 16;
	a->max_res_rd_atom = 16 * FV_MAX_LOCAL_QPS;
	a->max_qp_init_rd_atom = 16;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 0;
	a->phys_port_cnt = 1;
}

FV_EXPORT int ibv_query_device(struct ibv_context *c, struct ibv_device_attr *a) {
	fill_device_attr(dev_of(c), a);
	return 0;
}

static int query_device_ex(struct ibv_context *c, const struct ibv_query_device_ex_input *in, struct ibv_device_attr_ex *a, size_t len) {
	if (in && in->comp_mask)
		return EINVAL;
	if (len < sizeof(a->orig_attr))
		return EINVAL;
	memset(a, 0, len < sizeof(*a) ? len : sizeof(*a)); // no extended capability
	fill_device_attr(dev_of(c), &a->orig_attr);
	return 0;
}

// The port: RoCE (Ethernet link layer, GRH required), up, 4 KiB MTU, and
// as fast as NDR 4x (400 Gb/s) so that no tool caps its figures by the rate.
static void fill_port(struct ibv_port_attr *a) {
	memset(a, 0, sizeof(*a));
	a->state = IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = 1;
	a->port_cap_flags = IBV_PORT_CM_SUP;
	a->max_msg_sz = 1u << 31;
	a->pkey_tbl_len = 1;
	a->active_width = 2; // 4x
	a->active_speed = 128; // NDR
	a->phys_state = 5; // LinkUp
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

static int query_port_ex(struct ibv_context *c, uint8_t port, struct ibv_port_attr *a, size_t len) {
	(void)c;
	if (port != 1)
		return EINVAL;
	struct ibv_port_attr full;
	fill_port(&full);
	memcpy(a, &full, len < sizeof(full) ? len : sizeof(full));
	return 0;
}

// The old entry point, for binaries that call it directly: its structure
// ends before port_cap_flags2.
FV_EXPORT int (ibv_query_port)(struct ibv_context *c, uint8_t port, struct _compat_ibv_port_attr *a) {
	return query_port_ex(c, port, (struct ibv_port_attr *)a, offsetof(struct ibv_port_attr, port_cap_flags2));
}

FV_EXPORT int ibv_query_gid(struct ibv_context *c, uint8_t port, int index, union ibv_gid *gid) {
	if (port != 1 || index != 0)
		return -1;
	*gid = dev_of(c)->gid;
	return 0;
}

static void fill_gid_entry(struct ibv_context *c, struct ibv_gid_entry *e) {
	memset(e, 0, sizeof(*e));
	e->gid = dev_of(c)->gid;
	e->gid_index = 0;
	e->port_num = 1;
	e->gid_type = IBV_GID_TYPE_ROCE_V2;
	e->ndev_ifindex = 1; // lo: the GID is a 127/8 address
}

FV_EXPORT int _ibv_query_gid_ex(struct ibv_context *c, uint32_t port, uint32_t index, struct ibv_gid_entry *e, uint32_t flags, size_t size) {
	if (flags || size < sizeof(*e))
		return EINVAL;
	if (port != 1 || index != 0)
		return ENODATA;
	fill_gid_entry(c, e);
	return 0;
}

FV_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *c, struct ibv_gid_entry *e, size_t max, uint32_t flags, size_t size) {
	if (flags || size < sizeof(*e))
		return -EINVAL;
	if (max < 1)
		return -EINVAL;
	fill_gid_entry(c, e);
	return 1;
}

// ibv_query_gid_type is libibverbs-private (providers call it); its type
// is libibverbs's internal enum ibv_gid_type_sysfs, where RoCE v2 is 1.
FV_EXPORT int ibv_query_gid_type(struct ibv_context *c, uint8_t port, unsigned int index, uint32_t *type) {
	(void)c;
	if (port != 1 || index != 0)
		return -1;
	*type = 1;
	return 0;
}

FV_EXPORT int ibv_query_pkey(struct ibv_context *c, uint8_t port, int index, __be16 *pkey) {
	(void)c;
	if (port != 1 || index != 0)
		return -1;
	*pkey = htobe16(0xffff);
	return 0;
}

FV_EXPORT int ibv_get_pkey_index(struct ibv_context *c, uint8_t port, __be16 pkey) {
	(void)c;
	return port == 1 && be16toh(pkey) == 0xffff ? 0 : -1;
}

static uint32_t next_pd = 1;

FV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *c) {
	struct fv_pd *p = calloc(1, sizeof(*p));
	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = c;
	// PD numbers must differ between processes too (a peer checks that an
	// MR and its QP share one): the pid makes them so.
	p->num = ((uint32_t)getpid() << 12) ^ __atomic_fetch_add(&next_pd, 1, __ATOMIC_RELAXED);
	p->pd.handle = p->num;
	return &p->pd;
}

FV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd) {
	free(pd);
	return 0;
}

// Strings and rates.

FV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s) {
	static const char *const str[] = {
		[IBV_WC_SUCCESS] = "success",
		[IBV_WC_LOC_LEN_ERR] = "local length error",
		[IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
		[IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
		[IBV_WC_LOC_PROT_ERR] = "local protection error",
		[IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
		[IBV_WC_MW_BIND_ERR] = "memory management operation error",
		[IBV_WC_BAD_RESP_ERR] = "bad response error",
		[IBV_WC_LOC_ACCESS_ERR] = "local access error",
		[IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
		[IBV_WC_REM_ACCESS_ERR] = "remote access error",
		[IBV_WC_REM_OP_ERR] = "remote operation error",
		[IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
		[IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
		[IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
		[IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
		[IBV_WC_REM_ABORT_ERR] = "aborted error",
		[IBV_WC_INV_EECN_ERR] = "invalid EE context number",
		[IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
		[IBV_WC_FATAL_ERR] = "fatal error",
		[IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
		[IBV_WC_GENERAL_ERR] = "general error",
		[IBV_WC_TM_ERR] = "TM error",
		[IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
	};
	return (unsigned)s < sizeof(str) / sizeof(str[0]) && str[s] ? str[s] : "unknown";
}

FV_EXPORT const char *ibv_node_type_str(enum ibv_node_type t) {
	switch (t) {
	case IBV_NODE_CA: return "InfiniBand channel adapter";
	case IBV_NODE_SWITCH: return "InfiniBand switch";
	case IBV_NODE_ROUTER: return "InfiniBand router";
	case IBV_NODE_RNIC: return "iWARP NIC";
	case IBV_NODE_USNIC: return "usNIC";
	case IBV_NODE_USNIC_UDP: return "usNIC UDP";
	case IBV_NODE_UNSPECIFIED: return "unspecified";
	default: return "unknown";
	}
}

FV_EXPORT const char *ibv_port_state_str(enum ibv_port_state s) {
	static const char *const str[] = {"no state change (NOP)", "down", "init", "armed", "active", "active defer"};
	return (unsigned)s < 6 ? str[s] : "unknown";
}

FV_EXPORT const char *ibv_event_type_str(enum ibv_event_type e) {
	static const char *const str[] = {
		[IBV_EVENT_CQ_ERR] = "CQ error",
		[IBV_EVENT_QP_FATAL] = "local work queue catastrophic error",
		[IBV_EVENT_QP_REQ_ERR] = "invalid request local work queue error",
		[IBV_EVENT_QP_ACCESS_ERR] = "local access violation work queue error",
		[IBV_EVENT_COMM_EST] = "communication established",
		[IBV_EVENT_SQ_DRAINED] = "send queue drained",
		[IBV_EVENT_PATH_MIG] = "path migrated",
		[IBV_EVENT_PATH_MIG_ERR] = "path migration request error",
		[IBV_EVENT_DEVICE_FATAL] = "local catastrophic error",
		[IBV_EVENT_PORT_ACTIVE] = "port active",
		[IBV_EVENT_PORT_ERR] = "port error",
		[IBV_EVENT_LID_CHANGE] = "LID change",
		[IBV_EVENT_PKEY_CHANGE] = "P_Key change",
		[IBV_EVENT_SM_CHANGE] = "SM change",
		[IBV_EVENT_SRQ_ERR] = "SRQ catastrophic error",
		[IBV_EVENT_SRQ_LIMIT_REACHED] = "SRQ limit reached",
		[IBV_EVENT_QP_LAST_WQE_REACHED] = "last WQE reached",
		[IBV_EVENT_CLIENT_REREGISTER] = "client reregistration",
		[IBV_EVENT_GID_CHANGE] = "GID table change",
		[IBV_EVENT_WQ_FATAL] = "WQ fatal",
	};
	return (unsigned)e < sizeof(str) / sizeof(str[0]) && str[e] ? str[e] : "unknown";
}

// Rates: enum ibv_rate, its multiple of 2.5 Gb/s and its Mb/s.
static const struct {
	enum ibv_rate rate;
	int mult, mbps;
} rates[] = {
	{IBV_RATE_2_5_GBPS, 1, 2500}, {IBV_RATE_5_GBPS, 2, 5000}, {IBV_RATE_10_GBPS, 4, 10000},
	{IBV_RATE_20_GBPS, 8, 20000}, {IBV_RATE_30_GBPS, 12, 30000}, {IBV_RATE_40_GBPS, 16, 40000},
	{IBV_RATE_60_GBPS, 24, 60000}, {IBV_RATE_80_GBPS, 32, 80000}, {IBV_RATE_120_GBPS, 48, 120000},
	{IBV_RATE_14_GBPS, 5, 14062}, {IBV_RATE_56_GBPS, 22, 56250}, {IBV_RATE_112_GBPS, 45, 112500},
	{IBV_RATE_168_GBPS, 67, 168750}, {IBV_RATE_25_GBPS, 10, 25781}, {IBV_RATE_100_GBPS, 40, 103125},
	{IBV_RATE_200_GBPS, 80, 206250}, {IBV_RATE_300_GBPS, 120, 309375}, {IBV_RATE_28_GBPS, 11, 28125},
	{IBV_RATE_50_GBPS, 20, 53125}, {IBV_RATE_400_GBPS, 160, 425000}, {IBV_RATE_600_GBPS, 240, 637500},
	{IBV_RATE_800_GBPS, 320, 850000}, {IBV_RATE_1200_GBPS, 480, 1275000},
};
#define NRATES (sizeof(rates) / sizeof(rates[0]))

FV_EXPORT int ibv_rate_to_mult(enum ibv_rate r) {
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == r)
			return rates[i].mult;
	return -1;
}

FV_EXPORT enum ibv_rate mult_to_ibv_rate(int mult) {
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mult == mult)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

FV_EXPORT int ibv_rate_to_mbps(enum ibv_rate r) {
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].rate == r)
			return rates[i].mbps;
	return -1;
}

FV_EXPORT enum ibv_rate mbps_to_ibv_rate(int mbps) {
	for (size_t i = 0; i < NRATES; i++)
		if (rates[i].mbps == mbps)
			return rates[i].rate;
	return IBV_RATE_MAX;
}

// Fork: registered pages are MAP_SHARED objects already, which a child
// shares rather than copies; nothing to set up.
FV_EXPORT int ibv_fork_init(void) { return 0; }
FV_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void) { return IBV_FORK_UNNEEDED; }
FV_EXPORT int ibv_dontfork_range(void *base, size_t size) {
	(void)base, (void)size;
	return 0;
}
FV_EXPORT int ibv_dofork_range(void *base, size_t size) {
	(void)base, (void)size;
	return 0;
}

// sysfs helpers (librdmacm uses them): real reads, of whatever is there.
FV_EXPORT const char *ibv_get_sysfs_path(void) { return "/sys"; }

FV_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size) {
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, file);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, buf, size);
	close(fd);
	if (n < 0)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		buf[--n] = '\0';
	else if ((size_t)n < size)
		buf[n] = '\0';
	return (int)n;
}

// Asynchronous events: none ever comes (see ibv_open_device), so a call
// blocks as it would on a device that never reports one.
FV_EXPORT int ibv_get_async_event(struct ibv_context *c, struct ibv_async_event *ev) {
	uint64_t v;
	(void)ev;
	if (read(c->async_fd, &v, sizeof(v)) < 0)
		return -1;
	errno = EIO;
	return -1;
}

FV_EXPORT void ibv_ack_async_event(struct ibv_async_event *ev) { (void)ev; }
