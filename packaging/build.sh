#!/usr/bin/env bash
# build.sh: the .deb and the .rpm from make dist's tree, with nfpm
# (packaging/nfpm.yaml). Run by make dist from the repository root:
#   packaging/build.sh NFPM-COMMAND TREE OUT-DIR PACKAGE-VERSION
# PACKAGE-VERSION is already a valid deb/rpm version (internal/version's
# Package). PKG_MAINTAINER comes from the environment.
set -euo pipefail
[ $# = 4 ] || { echo "usage: packaging/build.sh NFPM-COMMAND TREE OUT-DIR PACKAGE-VERSION" >&2; exit 2; }
nfpm=$1 tree=$2 out=$3 version=$4
here=$(cd "$(dirname "$0")" && pwd)
out=$(cd "$out" && pwd)
go=${GO:-go}
: "${PKG_MAINTAINER:?set PKG_MAINTAINER to "Name <address>" (make dist does)}"
stage=$(mktemp -d "$out/.pkg.XXXXXX")
trap 'rm -rf "$stage"' EXIT

# Debian policy: binaries stripped as dh_strip strips them, man pages
# gzipped at -9 without a timestamp (-n: the same bytes whenever built):
# every page the binaries wrote (rdmabench-COMMAND.1 too) and the rxe
# runner's.
cp "$tree/bin/rdmabench" "$tree/bin/ncclbench" "$stage/"
strip --strip-unneeded --remove-section=.comment --remove-section=.note "$stage/rdmabench" "$stage/ncclbench"
mkdir "$stage/man1"
for page in "$tree"/share/*.1 "$here/rdmabench-rxe-run.1"; do
	gzip -9n <"$page" >"$stage/man1/$(basename "$page").gz"
done
for t in rdmabench ncclbench; do
	cp "$tree/share/$t.bash" "$tree/share/_$t" "$stage/"
done
cp "$tree/README.md" "$here/lintian-overrides" "$stage/"
# The agent's systemd units and the flags they read.
cp "$here/rdmabench-agent.service" "$here/rdmabench-agent@.service" "$here/rdmabench-agent.default" "$stage/"
cp -p -r "$tree/docs" "$stage/docs"
cp -p -r "$tree/share/slurm" "$stage/slurm"
cp -p -r "$tree/share/rxe" "$stage/rxe"

# The date of the commit (or SOURCE_DATE_EPOCH), not of the build.
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || date +%s)}
rev=$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)
{
	printf 'rdmabench (%s-1) unstable; urgency=medium\n\n' "$version"
	printf '  * Built by make dist from commit %s.\n\n' "$rev"
	printf ' -- %s  %s\n' "$PKG_MAINTAINER" "$(LC_ALL=C date -u -R -d "@$epoch")"
} | gzip -9n >"$stage/changelog.Debian.gz"

# copyright: ours, then the license of Go and of each module linked into
# the binaries (go version -m), from the module cache, each text once, with
# the NOTICE files Apache-2.0 asks to pass on. The .deb's refers to Debian's
# copy of the Apache-2.0 and GPL texts (/usr/share/common-licenses), as
# Debian policy asks; the .rpm's keeps them in full.
modcache=$("$go" env GOMODCACHE)
declare -A users text
order=() notices=()
add_license() { # module, its folder
	local f sum
	f=$(find "$2" -maxdepth 1 -type f \( -iname 'LICEN[CS]E*' -o -iname 'COPYING*' \) | sort | head -n 1)
	[ -n "$f" ] || { echo "packaging: no license file for $1 in $2" >&2; exit 1; }
	sum=$(sha256sum <"$f" | cut -c1-16)
	[ -n "${text[$sum]:-}" ] || { text[$sum]=$f; order+=("$sum"); }
	users[$sum]+=" $1"
	for f in "$2"/NOTICE*; do [ -f "$f" ] && notices+=("$1|$f"); done
	return 0
}
add_license "Go $("$go" env GOVERSION) (standard library and runtime)" "$("$go" env GOROOT)"
while read -r path ver; do
	# The module cache spells capitals as !lower.
	add_license "$path $ver" "$modcache/$(sed 's/[A-Z]/!\L&/g' <<<"$path")@$ver"
done < <("$go" version -m "$stage/rdmabench" "$stage/ncclbench" | awk '$1 == "dep" { print $2, $3 }' | sort -u)
# A text in UTF-8 (freetype's ftl.txt is in Latin-1).
utf8() {
	if iconv -f UTF-8 -t UTF-8 "$1" >/dev/null 2>&1; then cat "$1"; else iconv -f ISO-8859-1 -t UTF-8 "$1"; fi
}
copyright() { # deb|rpm
	local s f n l
	cat "$here/copyright"
	for s in "${order[@]}"; do
		f=${text[$s]}
		printf '\n-----------------------------------------------------------------------\n'
		printf 'Linked in:%s\n' "${users[$s]}" | fold -s -w 72
		if [ "$1" = deb ] && grep -q 'Apache License' "$f" && grep -q 'Version 2.0, January 2004' "$f"; then
			printf 'License: Apache-2.0. On Debian systems its full text is in\n/usr/share/common-licenses/Apache-2.0.\n'
			continue
		fi
		printf 'License (%s):\n\n' "$(basename "$f")"
		utf8 "$f"
		# A choice of licenses kept in a licenses/ folder (freetype's:
		# FreeType License or GPL): the one other than the GPL is used.
		if [ -d "$(dirname "$f")/licenses" ] && grep -q 'GNU General Public License' "$f"; then
			printf '\nrdmabench uses it under the license other than the GPL:\n\n'
			for l in $(find "$(dirname "$f")/licenses" -type f ! -iname '*gpl*' | sort); do utf8 "$l"; done
			[ "$1" != deb ] || printf '\n(On Debian systems the GPL version 2 is in /usr/share/common-licenses/GPL-2.)\n'
		fi
	done
	for n in "${notices[@]}"; do
		printf '\n-----------------------------------------------------------------------\n'
		printf 'NOTICE of %s:\n\n' "${n%%|*}"
		utf8 "${n#*|}"
	done
}
copyright deb >"$stage/copyright.deb"
copyright rpm >"$stage/copyright"

# The libraries the binaries need, as dpkg-shlibdeps (from the symbols
# they use) names them: libc6 and libibverbs1 and nothing else.
mkdir "$stage/debian"
printf 'Source: rdmabench\n\nPackage: rdmabench\nArchitecture: any\n' >"$stage/debian/control"
deps=$(cd "$stage" && dpkg-shlibdeps -O rdmabench ncclbench 2>/dev/null | sed -n 's/^shlibs:Depends=//p')
rm -r "$stage/debian"
export PKG_DEB_LIBC6="" PKG_DEB_LIBIBVERBS1=""
IFS=, read -ra list <<<"$deps"
for d in "${list[@]}"; do
	d=$(echo $d)
	case $d in
	"libc6 "* | libc6) PKG_DEB_LIBC6=$d ;;
	"libibverbs1 "* | libibverbs1) PKG_DEB_LIBIBVERBS1=$d ;;
	*) echo "packaging: the binaries need $d (dpkg-shlibdeps: $deps); a package must need only libc6 and libibverbs1" >&2; exit 1 ;;
	esac
done
[ -n "$PKG_DEB_LIBIBVERBS1" ] || { echo "packaging: dpkg-shlibdeps found no libibverbs1 in the binaries (got: $deps)" >&2; exit 1; }

export PKG_VERSION=$version PKG_ARCH=$("$go" env GOARCH) PKG_MAINTAINER
for p in deb rpm; do
	(cd "$stage" && $nfpm package --config "$here/nfpm.yaml" --packager "$p" --target "$out/") >/dev/null
done
ls "$out"/rdmabench_"$version"-1_*.deb "$out"/rdmabench-"$version"-1.*.rpm
