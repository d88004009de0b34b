#!/usr/bin/env bash
# Make sure the PostgreSQL and Redis servers the test settings use answer on 127.0.0.1,
# starting them if they do not. Idempotent: a running server is left alone.
# A service whose URL is set in the environment (DATABASE_URL, REDIS_URL) is someone
# else's to run, and is not touched.
# The dashboard's browser tests need Debian's Chromium (/usr/bin/chromium, or TAS_CHROMIUM):
# installed with apt-get when missing and running as root, else a clear error.
set -euo pipefail

WAIT_SECONDS="${WAIT_SECONDS:-60}"

pg_up() { pg_isready -q -h 127.0.0.1 -p 5432; }
redis_up() { [ "$(redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null)" = "PONG" ]; }

need() {
	command -v "$1" >/dev/null 2>&1 || {
		echo "error: the tests need $2 on 127.0.0.1 and '$1' is not installed to check or start it;" \
			"start $2 yourself and set $3, or install it" >&2
		exit 1
	}
}

wait_until() {
	local name="$1"
	shift
	local deadline=$((SECONDS + WAIT_SECONDS))
	until "$@"; do
		if ((SECONDS >= deadline)); then
			echo "error: $name did not answer within ${WAIT_SECONDS}s" >&2
			exit 1
		fi
		sleep 0.2
	done
}

if [ -z "${DATABASE_URL:-}" ]; then
	need pg_isready PostgreSQL DATABASE_URL
	if ! pg_up; then
		need pg_ctlcluster PostgreSQL DATABASE_URL
		version="$(ls /etc/postgresql | sort -V | tail -n 1)"
		echo "Starting PostgreSQL $version ..."
		# "already running" (a server still starting up) is fine: the wait below decides.
		pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
		wait_until PostgreSQL pg_up
	fi
fi

if [ -z "${REDIS_URL:-}" ]; then
	need redis-cli Redis REDIS_URL
	if ! redis_up; then
		need redis-server Redis REDIS_URL
		echo "Starting Redis ..."
		mkdir -p /var/lib/redis /var/log/redis 2>/dev/null || true
		redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
			--dir /var/lib/redis --logfile /var/log/redis/ci.log
		wait_until Redis redis_up
	fi
fi

chromium_found() {
	if [ -n "${TAS_CHROMIUM:-}" ]; then [ -x "$TAS_CHROMIUM" ]; else command -v chromium >/dev/null 2>&1; fi
}

if ! chromium_found; then
	if [ -n "${TAS_CHROMIUM:-}" ]; then
		echo "error: TAS_CHROMIUM=$TAS_CHROMIUM is not an executable Chromium" >&2
		exit 1
	fi
	if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
		echo "Installing Chromium (Debian's chromium) for the dashboard's browser tests ..."
		apt-get update -qq
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
	else
		echo "error: the dashboard's browser tests need Chromium and 'chromium' is not installed;" \
			"install Debian's package (apt-get install -y chromium, as root) or set TAS_CHROMIUM to a Chromium binary" >&2
		exit 1
	fi
fi
