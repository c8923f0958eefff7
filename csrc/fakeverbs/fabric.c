// fabric.c: a fabric on one host, whose faults are known. FAKEVERBS_FABRIC
// names a file of rules that give the paths between devices (each "host/
// name": FAKEVERBS_HOST and FAKEVERBS_NAME, device.c) a bandwidth and a
// latency. The syntax, one rule a line, '#' to the end of a line a comment:
//
//	default                        bw 400 lat 1.0   every path
//	host node6                     bw 280           every path into or out of a device of node6
//	nic node3/mlx5_2               bw 280           every path into or out of node3/mlx5_2
//	link node1/mlx5_0 node5/mlx5_0 bw 280           between the two, both ways
//	dir node2/mlx5_1 -> node4/mlx5_1 bw 200 lat 6   from the first to the second only
//
// bw is in Gb/s (> 0), lat in µs (>= 0); a rule gives either or both. A
// host or a device name may be "*" (any). A path's bandwidth is the least
// of the bws of the rules that match it (none: no limit), its latency the
// greatest of their lats (none: 0). A device's path to itself (a loopback
// QP pair) is a path as any other. Devices without FAKEVERBS_NAME are
// fake0, fake1, ...; without FAKEVERBS_HOST, on host "localhost".
//
// What it does (qp.c's pace, cq.c's due_limit): a request of B bytes on a
// QP keeps the QP's path busy for B·8/bw from the later of its posting and
// the end of the path's previous request (a virtual clock per path, src to
// dst, that a process's QPs on it share: -q 2 gets the path's bandwidth,
// not twice it; other processes' QPs have clocks of their own), and its
// completions, the sender's and the receiver's, are
// due lat after that: no poll returns them before, by CLOCK_MONOTONIC. The
// data lands at once, as before; completions are late, never early. A bad
// file fails ibv_get_device_list (EINVAL), the line said on stderr.
#include "fv.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { R_DEFAULT, R_HOST, R_NIC, R_LINK, R_DIR };

struct ep {
	char host[64], name[64];
};

struct rule {
	int kind;
	struct ep a, b; // host: a.host; nic: a; link, dir: a and b
	double bw, lat; // 0, -1: not given
};

static struct rule *rules;
static int nrules;

static int parse_ep(const char *w, struct ep *e) {
	const char *sl = strchr(w, '/');
	if (!sl || sl == w || !sl[1] || (size_t)(sl - w) >= sizeof(e->host) || strlen(sl + 1) >= sizeof(e->name))
		return -1;
	snprintf(e->host, sizeof(e->host), "%.*s", (int)(sl - w), w);
	snprintf(e->name, sizeof(e->name), "%s", sl + 1);
	return 0;
}

static int word_eq(const char *pat, const char *s) { return strcmp(pat, "*") == 0 || strcmp(pat, s) == 0; }

static int ep_eq(const struct ep *e, const char *host, const char *name) { return word_eq(e->host, host) && word_eq(e->name, name); }

static int parse_num(const char *w, double *v) {
	char *end;
	errno = 0;
	*v = strtod(w, &end);
	return errno || end == w || *end ? -1 : 0;
}

int fv_fabric_load(void) {
	const char *path = getenv("FAKEVERBS_FABRIC");
	if (!path || !*path)
		return 0;
	FILE *f = fopen(path, "r");
	if (!f) {
		fv_warn("FAKEVERBS_FABRIC=%s: %s", path, strerror(errno));
		return -1;
	}
	char line[1024];
	int lineno = 0, bad = 0;
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		char *hash = strchr(line, '#');
		if (hash)
			*hash = 0;
		char *w[16];
		int nw = 0;
		for (char *save, *t = strtok_r(line, " \t\r\n", &save); t; t = strtok_r(NULL, " \t\r\n", &save))
			if (nw < 16)
				w[nw++] = t;
			else
				bad = 1;
		if (!nw)
			continue;
		struct rule r;
		memset(&r, 0, sizeof(r));
		r.lat = -1;
		int i = 1;
		if (strcmp(w[0], "default") == 0) {
			r.kind = R_DEFAULT;
		} else if (strcmp(w[0], "host") == 0 && nw > 1 && strchr(w[1], '/') == NULL && strlen(w[1]) < sizeof(r.a.host)) {
			r.kind = R_HOST;
			snprintf(r.a.host, sizeof(r.a.host), "%s", w[1]);
			i = 2;
		} else if (strcmp(w[0], "nic") == 0 && nw > 1 && parse_ep(w[1], &r.a) == 0) {
			r.kind = R_NIC;
			i = 2;
		} else if (strcmp(w[0], "link") == 0 && nw > 2 && parse_ep(w[1], &r.a) == 0 && parse_ep(w[2], &r.b) == 0) {
			r.kind = R_LINK;
			i = 3;
		} else if (strcmp(w[0], "dir") == 0 && nw > 3 && parse_ep(w[1], &r.a) == 0 && strcmp(w[2], "->") == 0 && parse_ep(w[3], &r.b) == 0) {
			r.kind = R_DIR;
			i = 4;
		} else {
			bad = 1;
		}
		int given = 0;
		for (; !bad && i < nw; i += 2) {
			double v;
			if (i + 1 >= nw || parse_num(w[i + 1], &v) != 0) {
				bad = 1;
			} else if (strcmp(w[i], "bw") == 0 && v > 0) {
				r.bw = v;
				given = 1;
			} else if (strcmp(w[i], "lat") == 0 && v >= 0) {
				r.lat = v;
				given = 1;
			} else {
				bad = 1;
			}
		}
		if (bad || !given) {
			fv_warn("FAKEVERBS_FABRIC=%s line %d: want 'default', 'host H', 'nic H/D', 'link H/D H/D' or 'dir H/D -> H/D', then 'bw GBPS' and/or 'lat US' (csrc/fakeverbs/fabric.c)",
			        path, lineno);
			fclose(f);
			return -1;
		}
		struct rule *n = realloc(rules, (size_t)(nrules + 1) * sizeof(*rules));
		if (!n) {
			fclose(f);
			return -1;
		}
		rules = n;
		rules[nrules++] = r;
	}
	fclose(f);
	fv_paced = nrules > 0;
	return 0;
}

void fv_fabric_path(int src, int dst, double *bw_gbps, double *lat_us) {
	const char *sh, *sn, *dh, *dn;
	fv_dev_ident(src, &sh, &sn);
	fv_dev_ident(dst, &dh, &dn);
	double bw = 0, lat = 0;
	for (int i = 0; i < nrules; i++) {
		const struct rule *r = &rules[i];
		int m = 0;
		switch (r->kind) {
		case R_DEFAULT: m = 1; break;
		case R_HOST: m = word_eq(r->a.host, sh) || word_eq(r->a.host, dh); break;
		case R_NIC: m = ep_eq(&r->a, sh, sn) || ep_eq(&r->a, dh, dn); break;
		case R_LINK: m = (ep_eq(&r->a, sh, sn) && ep_eq(&r->b, dh, dn)) || (ep_eq(&r->b, sh, sn) && ep_eq(&r->a, dh, dn)); break;
		case R_DIR: m = ep_eq(&r->a, sh, sn) && ep_eq(&r->b, dh, dn); break;
		}
		if (!m)
			continue;
		if (r->bw > 0 && (bw == 0 || r->bw < bw))
			bw = r->bw;
		if (r->lat > lat)
			lat = r->lat;
	}
	*bw_gbps = bw;
	*lat_us = lat;
}
