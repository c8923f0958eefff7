# apt-source.sh, sourced by ci/deps.sh and ci/dist-check.sh: the machine's
# own apt entry for a Debian release, so that no mirror is written into the
# project. apt_source CODENAME prints "URI KEYRING" (KEYRING may be empty)
# of the first entry whose suites include CODENAME, and fails when none does.
apt_source() {
	local codename=$1 uris key
	# deb822 entries (Debian 12's debian.sources): the stanza whose Suites
	# has the release itself.
	read -r uris key < <(awk -v c="$codename" '
		/^$/ { if (ok && u != "") { print u, k; exit } ok = 0; u = ""; k = "" }
		/^URIs:/ { u = $2 } /^Signed-By:/ { k = $2 }
		/^Suites:/ { for (i = 2; i <= NF; i++) if ($i == c) ok = 1 }
		END { if (ok && u != "") print u, k }' /etc/apt/sources.list.d/*.sources 2>/dev/null) || true
	if [ -z "${uris:-}" ]; then
		# One-line entries: "deb [opts] URI codename components".
		uris=$(awk -v c="$codename" '$1 == "deb" { for (i = 2; i < NF; i++) if ($(i + 1) == c && $i ~ /^[a-z]+:\/\//) { print $i; exit } }' \
			/etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n 1)
		key=
	fi
	[ -n "${uris:-}" ] || return 1
	echo "$uris ${key:-}"
}
